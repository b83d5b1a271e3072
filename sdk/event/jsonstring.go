package event

import (
	"math/bits"
	"unicode/utf8"
)

// The one JSON string writer of the module: the canonical encoder (AppendJSON), the ingestion
// endpoint's success body and the SIP observer's raw all build JSON text field by field, because
// encoding/json's reflection and copies cost too much there.

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s to b as a JSON string, byte for byte as encoding/json writes it:
// '"', '\\' and control characters escaped, each byte of invalid UTF-8 replaced by U+FFFD, U+2028
// and U+2029 escaped so that the text is also valid JavaScript, and, when escapeHTML is true,
// '<', '>' and '&' escaped as \u003c, \u003e and \u0026 (encoding/json's default; false is
// Encoder.SetEscapeHTML(false)). It allocates only when b has too little room.
func AppendJSONString[T string | []byte](b []byte, s T, escapeHTML bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		i = skipPlain(s, i, escapeHTML)
		if i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				if i+1 < len(s) && s[i+1] == '\n' { // a line end, once a line
					b = append(b, '\\', 'r', '\\', 'n')
					i++
					break
				}
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// skipPlain returns the first index from i of s whose byte flagged marks, or, when none is, of
// the last run of fewer than eight bytes: runs of bytes that need nothing are skipped eight at
// a time.
func skipPlain[T string | []byte](s T, i int, html bool) int {
	for i+8 <= len(s) {
		if m := flagged(load64(s, i), html); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// load64 reads the eight bytes of s from i, little-endian, in one load.
func load64[T string | []byte](s T, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// flagged returns the high bit of each of the eight bytes of x that a JSON string may have to
// escape or decode: those stringStops marks, one outside ASCII, and with html '<', '>' and '&'.
// Like stringStops, it can only err on a byte beyond one that qualifies.
func flagged(x uint64, html bool) uint64 {
	m := stringStops(x) | x&highBits
	if html {
		m |= (zeroBytes(x^('<'*oneBits)) | zeroBytes(x^('>'*oneBits)) | zeroBytes(x^('&'*oneBits))) & highBits
	}
	return m
}

// stringStops returns the high bit of each of the eight bytes of x that ends a run of plain
// bytes inside a JSON string: a byte below 0x20, '"' and '\\'. These are the has-less-than and
// has-zero-byte tests on every byte at once, which can only err on a byte beyond one that
// qualifies (a borrow runs upwards), so the lowest bit set is always a byte that does. A byte
// outside ASCII is never marked.
func stringStops(x uint64) uint64 {
	m := (x - 0x20*oneBits) &^ x
	m |= zeroBytes(x^('"'*oneBits)) | zeroBytes(x^('\\'*oneBits))
	return m & highBits
}

// Eight bytes' low and high bits.
const (
	oneBits  = 0x0101010101010101
	highBits = 0x8080808080808080
)

// zeroBytes marks, in the high bit, each zero byte of y (and may mark bytes beyond one).
func zeroBytes(y uint64) uint64 { return (y - oneBits) &^ y }

func decodeRune[T string | []byte](s T) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.RuneError, 1
}
