package callmodel

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/netip"
	"strconv"
	"strings"
)

// direction is a media stream's direction attribute (RFC 3264 section 5.1), as its sender
// states it.
type direction uint8

// Directions; sendrecv is the default when an SDP says nothing.
const (
	dirSendRecv direction = iota
	dirSendOnly
	dirRecvOnly
	dirInactive
)

func (d direction) String() string {
	switch d {
	case dirSendOnly:
		return "sendonly"
	case dirRecvOnly:
		return "recvonly"
	case dirInactive:
		return "inactive"
	}
	return "sendrecv"
}

// sdpInfo is what a session description says about hold.
//
// The streams that count are the active audio streams (an m=audio line with a non-zero port,
// or port zero with a=bundle-only); without any, every active stream counts. held is true when
// there is at least one stream that counts and every one of them is held by its sender: its
// effective direction (the media-level attribute, else the session-level one, else sendrecv) is
// sendonly or inactive, or its effective connection address (media-level c=, else session-level)
// is unspecified (0.0.0.0 or ::, the RFC 2543 form). A recvonly stream is not held: it is the
// answer to a hold, or a party that only listens.
//
// dir is the direction the counting streams share, sendrecv when they differ or there are none.
// fingerprint is a hash of what a change of media would change: the o= line (whose version RFC
// 3264 section 8 says increases with every change, and stays put on a session refresh) and, per
// stream, its media, port, protocol, effective direction and connection address. Two bodies with
// the same fingerprint describe the same media.
type sdpInfo struct {
	held        bool
	dir         direction
	streams     int
	fingerprint uint64
}

// maxMultipartParts bounds the parts of a multipart body looked at for an SDP part.
const maxMultipartParts = 16

// messageSDP reads the session description a message carries, directly (application/sdp) or as
// a part of a multipart body (multipart/mixed with ISUP, say). It reports false, with no error,
// when the message carries no session description.
func messageSDP(msg interface {
	headerer
	Body() []byte
}) (sdpInfo, bool, error) {
	var ct string
	if vs := headerValues(msg, "Content-Type", "c"); len(vs) > 0 {
		ct = strings.Join(vs, ",")
	}
	body, ok, err := sdpBody(ct, msg.Body(), 0)
	if err != nil || !ok {
		return sdpInfo{}, false, err
	}
	info, err := readSDP(body)
	if err != nil {
		return sdpInfo{}, false, err
	}
	return info, true, nil
}

// sdpBody finds the application/sdp content in a body of the given Content-Type. A body without
// a Content-Type is taken as SDP when it starts with "v=".
func sdpBody(contentType string, body []byte, depth int) ([]byte, bool, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, false, nil
	}
	if strings.TrimSpace(contentType) == "" {
		return body, bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("v=")), nil
	}
	if !strings.Contains(contentType, ";") && strings.EqualFold(strings.TrimSpace(contentType), "application/sdp") {
		return body, true, nil // the common case, without mime's map of parameters
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, false, fmt.Errorf("content-type %q: %w", contentType, err)
	}
	switch {
	case mt == "application/sdp":
		return body, true, nil
	case strings.HasPrefix(mt, "multipart/"):
		if depth > 1 {
			return nil, false, nil
		}
		boundary := params["boundary"]
		if boundary == "" {
			return nil, false, fmt.Errorf("content-type %q: multipart without a boundary", contentType)
		}
		mr := multipart.NewReader(bytes.NewReader(body), boundary)
		for range maxMultipartParts {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return nil, false, nil
			}
			if err != nil {
				return nil, false, fmt.Errorf("multipart body: %w", err)
			}
			content, err := io.ReadAll(io.LimitReader(part, int64(len(body))))
			if err != nil {
				return nil, false, fmt.Errorf("multipart body: %w", err)
			}
			if sdp, ok, err := sdpBody(part.Header.Get("Content-Type"), content, depth+1); err == nil && ok {
				return sdp, true, nil
			}
		}
		return nil, false, nil
	}
	return nil, false, nil
}

// stream is one m= section as readSDP sees it.
type stream struct {
	media  string
	port   string
	proto  string
	active bool
	dir    direction
	hasDir bool
	conn   string
	held   bool
	// bundleOnly is a=bundle-only: a port of zero does not make the stream inactive.
	bundleOnly bool
}

// readSDP reads a session description leniently (RFC 4566 line by line): it needs no s= line,
// no final CRLF, accepts LF line ends and stray whitespace, and ignores lines it does not know.
// It fails only when the body has no v=, o= or m= line at all.
func readSDP(body []byte) (sdpInfo, error) {
	var (
		origin   string
		seen     bool
		sessDir  = dirSendRecv
		sessConn string
		buf      [4]stream // most descriptions have one or two streams
		streams  = buf[:0]
		cur      = -1
	)
	// One copy of the body; every value below is a slice of it.
	rest := string(body)
	for len(rest) > 0 {
		var l string
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			l, rest = rest[:nl], rest[nl+1:]
		} else {
			l, rest = rest, ""
		}
		l = trimSpace(l)
		if len(l) < 2 || l[1] != '=' {
			continue
		}
		val := trimSpace(l[2:])
		switch l[0] {
		case 'v':
			seen = true
		case 'o':
			seen = true
			if cur < 0 {
				origin = val
			}
		case 'm':
			seen = true
			var f [3]string
			nf := fields(val, f[:])
			s := stream{dir: dirSendRecv}
			if nf > 0 {
				s.media = strings.ToLower(f[0])
			}
			if nf > 1 {
				s.port = f[1]
				p, _, _ := strings.Cut(f[1], "/")
				n, err := strconv.Atoi(p)
				s.active = err == nil && n > 0
			}
			if nf > 2 {
				s.proto = f[2]
			}
			streams = append(streams, s)
			cur = len(streams) - 1
		case 'c':
			addr := connAddr(val)
			if cur < 0 {
				sessConn = addr
			} else {
				streams[cur].conn = addr
			}
		case 'a':
			name := val
			if c := strings.IndexByte(val, ':'); c >= 0 {
				name = trimSpace(val[:c])
			}
			if n := len(name); n != len("sendrecv") && n != len("bundle-only") {
				continue // rtpmap, fmtp, ptime and the like: most of an SDP (every direction has 8 letters)
			}
			var d direction
			switch {
			case strings.EqualFold(name, "sendrecv"):
				d = dirSendRecv
			case strings.EqualFold(name, "sendonly"):
				d = dirSendOnly
			case strings.EqualFold(name, "recvonly"):
				d = dirRecvOnly
			case strings.EqualFold(name, "inactive"):
				d = dirInactive
			case strings.EqualFold(name, "bundle-only"):
				if cur >= 0 {
					streams[cur].bundleOnly = true
				}
				continue
			default:
				continue
			}
			if cur < 0 {
				sessDir = d
			} else {
				streams[cur].dir, streams[cur].hasDir = d, true
			}
		}
	}
	if !seen {
		return sdpInfo{}, errors.New("not a session description: no v=, o= or m= line")
	}

	// The o= line's fields, whatever the spaces between them, then each stream's.
	h := fnvOffset
	var of [6]string
	for _, f := range of[:fields(origin, of[:])] {
		h = fingerprintField(h, f)
	}
	audio := 0
	for i := range streams {
		s := &streams[i]
		if !s.active && s.bundleOnly {
			s.active = true
		}
		if !s.hasDir {
			s.dir = sessDir
		}
		if s.conn == "" {
			s.conn = sessConn
		}
		s.held = s.dir == dirSendOnly || s.dir == dirInactive || unspecified(s.conn)
		if s.active && s.media == "audio" {
			audio++
		}
		h = fnvByte(h, '\n')
		for _, f := range [...]string{s.media, s.port, s.proto, s.conn} {
			h = fingerprintField(h, f)
		}
		h = fnvByte(h, byte(s.dir))
	}

	info := sdpInfo{fingerprint: h}
	first := true
	for _, s := range streams {
		if !s.active || (audio > 0 && s.media != "audio") {
			continue
		}
		if first {
			info.held, info.dir, first = true, s.dir, false
		}
		info.streams++
		info.held = info.held && s.held
		if s.dir != info.dir {
			info.dir = dirSendRecv
		}
	}
	return info, nil
}

// fingerprintField adds a field to an SDP fingerprint: its bytes, then a byte that ends it. The
// fingerprint is only ever compared with another of the same process, so it need not be the
// event IDs' hash; one byte for the end, rather than the length's eight, halves its cost.
func fingerprintField(h uint64, f string) uint64 {
	for i := 0; i < len(f); i++ {
		h = fnvByte(h, f[i])
	}
	return fnvByte(h, 0)
}

// trimSpace is strings.TrimSpace for ASCII white space only, which is all an SDP line has
// (RFC 4566 section 5): a line's CR, and stray spaces and tabs.
func trimSpace(s string) string {
	for len(s) > 0 && asciiSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && asciiSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

// connAddr returns the address of a c= value ("IN IP4 192.0.2.1/127/3"), without TTL or count.
func connAddr(v string) string {
	var f [3]string
	if fields(v, f[:]) < 3 {
		return ""
	}
	a, _, _ := strings.Cut(f[2], "/")
	return a
}

// fields puts the first len(f) space-separated fields of s into f (strings.Fields without its
// slice) and returns how many there were; a last field runs to the first space after it.
func fields(s string, f []string) int {
	n, i := 0, 0
	for n < len(f) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == len(s) {
			break
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' {
			j++
		}
		f[n], i = s[i:j], j
		n++
	}
	return n
}

// unspecified reports whether an address is 0.0.0.0 or :: (in any spelling).
func unspecified(a string) bool {
	if a == "" || (a[0] != '0' && a[0] != ':') {
		return false // every spelling of either starts so
	}
	ip, err := netip.ParseAddr(a)
	return err == nil && ip.IsUnspecified()
}
