package hep

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Reader splits a byte stream (a HEP-over-TCP connection) into HEPv3 packets by
// the length field of each packet's header. It holds one buffer of at most its
// maximum packet size, whatever the stream sends.
//
// HEP over TCP has no other framing, so a stream that stops being HEPv3 (wrong
// magic, a length shorter than a header or over the maximum) cannot be trusted
// to find its way back: Next reports ErrMalformed, or ErrUnsupported for a HEPv1
// or v2 header, and every later call returns the same error. The caller closes
// the connection; senders reconnect. Scanning ahead for the next "HEP3" was
// rejected: the magic can occur inside a payload, and a false match would turn
// one bad packet into a run of wrong ones.
type Reader struct {
	r   io.Reader
	max int
	buf []byte
	err error
}

// NewReader returns a Reader of r that accepts packets of up to max bytes
// (HeaderLen < max <= MaxPacketLen; MaxPacketLen is the usual choice).
func NewReader(r io.Reader, max int) (*Reader, error) {
	if r == nil {
		return nil, errors.New("hep reader: nil io.Reader")
	}
	if max <= HeaderLen || max > MaxPacketLen {
		return nil, fmt.Errorf("hep reader: maximum packet size %d not in (%d, %d]", max, HeaderLen, MaxPacketLen)
	}
	return &Reader{r: r, max: max}, nil
}

// Next returns the next whole packet's bytes, header included, ready for Decode.
// The slice is valid only until the next call to Next. At a clean end of the
// stream between packets it returns io.EOF; a stream that ends inside a packet
// gives io.ErrUnexpectedEOF. Next checks the framing only: the packet's chunks
// are Decode's to check.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	b, err := r.next()
	if err != nil {
		r.err = err
		return nil, err
	}
	return b, nil
}

func (r *Reader) next() ([]byte, error) {
	var hdr [HeaderLen]byte
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	if err := checkHeader(hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[4:6]))
	if n < HeaderLen || n > r.max {
		return nil, fmt.Errorf("%w: length field %d not in [%d, %d]", ErrMalformed, n, HeaderLen, r.max)
	}
	if r.buf == nil {
		r.buf = make([]byte, r.max)
	}
	b := r.buf[:n]
	copy(b, hdr[:])
	if _, err := io.ReadFull(r.r, b[HeaderLen:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}
