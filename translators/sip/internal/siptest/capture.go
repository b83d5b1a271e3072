package siptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"github.com/callwire/callwire/translators/sip/hep"
)

// A capture file is HEPv3 packets concatenated, exactly as HEP over TCP frames them: each packet
// is self-delimiting by the length field of its header. The packets are in the order the
// collector received them.

// SplitCapture splits a capture into its packets' bytes, exactly as recorded, in order. It checks
// the framing only (see hep.Reader); the slices are copies.
func SplitCapture(b []byte) ([][]byte, error) {
	r, err := hep.NewReader(bytes.NewReader(b), hep.MaxPacketLen)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	var out [][]byte
	for {
		raw, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("capture packet %d: %w", len(out)+1, err)
		}
		out = append(out, bytes.Clone(raw))
	}
}

// ReplayCapture sends the packets of a capture file to a HEP collector at addr, in order: over
// "udp" one datagram per packet, over "tcp" all of them on one connection (HEP's TCP framing).
// It paces nothing: the packets carry their own timestamps. It fails the test on any error.
func ReplayCapture(ctx context.Context, t testing.TB, path, network, addr string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read capture: %v", err)
	}
	ps, err := SplitCapture(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		t.Fatalf("replay capture: %v", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetWriteDeadline(dl)
	}
	for i, p := range ps {
		if _, err := conn.Write(p); err != nil {
			t.Fatalf("replay capture packet %d to %s %s: %v", i+1, network, addr, err)
		}
	}
}

// ParseCapture splits a capture into its packets and decodes each. The packets share no memory
// with b. It stops at the first packet that does not decode and reports which one.
func ParseCapture(b []byte) ([]hep.Packet, error) {
	raws, err := SplitCapture(b)
	out := make([]hep.Packet, 0, len(raws))
	for _, raw := range raws {
		p, derr := hep.Decode(raw)
		if derr != nil {
			return out, fmt.Errorf("capture packet %d: %w", len(out)+1, derr)
		}
		out = append(out, p.Clone())
	}
	return out, err
}

// ReadCapture reads and decodes a capture file (testdata/captures/<flow>.hep, see Flow.Capture),
// failing the test on any error. The packets are in arrival order.
func ReadCapture(t testing.TB, path string) []hep.Packet {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read capture: %v", err)
	}
	ps, err := ParseCapture(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(ps) == 0 {
		t.Fatalf("%s: no packets", path)
	}
	return ps
}

// WriteCapture writes HEP datagrams, each one whole packet, to path as a capture file. It fails
// the test when a datagram is not exactly one HEPv3 packet, so that the file stays readable.
func WriteCapture(t testing.TB, path string, datagrams [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	for i, d := range datagrams {
		if _, err := hep.Decode(d); err != nil {
			t.Fatalf("datagram %d is not one HEPv3 packet: %v", i+1, err)
		}
		buf.Write(d)
	}
	if _, err := ParseCapture(buf.Bytes()); err != nil {
		t.Fatalf("capture does not read back: %v", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatalf("write capture: %v", err)
	}
}
