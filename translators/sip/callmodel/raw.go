package callmodel

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The raw of an event a message caused is a JSON object:
//
//	{"sip": the message's text, "truncated": true and "sipBytes": its length when the text was
//	 cut to maxRawSIP bytes, "transport", "src", "dst": where it went, "seenAt": when}
//
// It is written straight into one buffer: encoding/json's copies of the text were a fifth of
// what the call model allocated per call.

// renderRaw renders the raw of the message: its text (as seen, else rendered from the parsed
// message), bounded to maxRawSIP bytes, with where it went and when.
func renderRaw(w *wire) json.RawMessage {
	var text string
	var data []byte
	if len(w.m.Data) > 0 {
		data = w.m.Data
	} else if w.m.SIP != nil {
		text = w.m.SIP.String()
	}
	n := len(data) + len(text)
	truncated := n > maxRawSIP
	if truncated {
		if data != nil {
			text, data = string(data[:maxRawSIP]), nil
		} else {
			text = text[:maxRawSIP]
		}
		text = strings.ToValidUTF8(text, "")
	}
	b := make([]byte, 0, min(n, maxRawSIP)+min(n, maxRawSIP)/8+192)
	b = append(b, `{"sip":`...)
	if data != nil {
		b = appendJSONString(b, data)
	} else {
		b = appendJSONString(b, []byte(text))
	}
	if truncated {
		b = append(b, `,"truncated":true,"sipBytes":`...)
		b = strconv.AppendInt(b, int64(n), 10)
	}
	if w.m.Transport != "" {
		b = append(b, `,"transport":`...)
		b = appendJSONString(b, []byte(w.m.Transport))
	}
	if w.m.Src.IsValid() {
		b = append(b, `,"src":"`...)
		b = w.m.Src.AppendTo(b)
		b = append(b, '"')
	}
	if w.m.Dst.IsValid() {
		b = append(b, `,"dst":"`...)
		b = w.m.Dst.AppendTo(b)
		b = append(b, '"')
	}
	b = append(b, `,"seenAt":"`...)
	b = w.m.At.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

// appendJSONString appends s as a JSON string, escaped as encoding/json escapes it but for
// '<', '>' and '&', which it keeps (SIP is full of '<'): quotes, backslashes and control
// characters escaped, U+2028 and U+2029 escaped, and each byte of invalid UTF-8 replaced by
// U+FFFD. Runs of printable ASCII, most of a SIP message, are skipped eight bytes at a time.
func appendJSONString(b []byte, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && plainASCII(binary.LittleEndian.Uint64(s[i:])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainASCII reports whether none of the eight bytes of x needs escaping or decoding: none is
// below 0x20, a quote, a backslash, or outside ASCII.
func plainASCII(x uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	below := (x - 0x20*ones) &^ x // high bit set for a byte below 0x20 (and for bytes >= 0x80)
	quote := x ^ ('"' * ones)
	quote = (quote - ones) &^ quote // high bit set where a byte was '"'
	slash := x ^ ('\\' * ones)
	slash = (slash - ones) &^ slash
	return (below|quote|slash|x)&highs == 0
}
