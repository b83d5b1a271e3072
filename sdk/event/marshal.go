package event

import (
	"fmt"
	"math"
	"strconv"
)

// The event's canonical JSON, written field by field. encoding/json's reflection over an
// Event, and its two passes of its scanner over the raw (compacting it, then compacting the
// Marshaler's whole output again), cost a translator more per event with a SIP message in its
// raw than translating the message (BenchmarkMarshalJSON measures this encoder). AppendJSON
// writes exactly the bytes json.Marshal writes for the same event
// (TestAppendJSONAgreesWithEncodingJSON, FuzzAppendJSON): HTML characters escaped, a raw
// compacted and checked.

// AppendJSON appends the event's canonical JSON to b and returns the extended buffer: the bytes
// MarshalJSON returns. On error (a raw that is not valid JSON, an occurredAt outside the years 0
// to 9999, a number that is not finite) it returns b unchanged and the error.
func (e *Event) AppendJSON(b []byte) ([]byte, error) {
	return e.appendWhole(b, false)
}

// AppendJSONTrustingRaw is AppendJSON for an event whose maker wrote its Raw in canonical form
// itself: one JSON value with no white space between tokens, and its strings escaped as
// AppendJSONString escapes them with html set. Raw is then copied as it is, unchecked, which
// spares checking and compacting it again (half of what encoding an event with a SIP message in
// its raw costs). For such a Raw the bytes are exactly AppendJSON's; for any other they may be
// invalid JSON, which the agent refuses. Raw from anywhere else must go through AppendJSON.
func (e *Event) AppendJSONTrustingRaw(b []byte) ([]byte, error) {
	return e.appendWhole(b, true)
}

// appendWhole appends the event's JSON, or on error leaves b as it was.
func (e *Event) appendWhole(b []byte, trustRaw bool) ([]byte, error) {
	out, err := e.appendJSON(b, trustRaw)
	if err != nil {
		return b, err
	}
	return out, nil
}

// appendKey appends a member's separator and key. The keys are constants that need no escaping.
func appendKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendField appends a string member left out when empty (omitempty).
func appendField(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(appendKey(b, key), v)
}

func appendBool(b []byte, key string, v *bool) []byte {
	if v == nil {
		return b
	}
	return strconv.AppendBool(appendKey(b, key), *v)
}

// appendFloat appends a number member as encoding/json writes a float64: the shortest decimal
// that reads back the same, in exponent form below 1e-6 and from 1e21.
func appendFloat(b []byte, key string, v *float64) ([]byte, error) {
	if v == nil {
		return b, nil
	}
	f := *v
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, fmt.Errorf("%s: unsupported value: %s", key, strconv.FormatFloat(f, 'g', -1, 64))
	}
	b = appendKey(b, key)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 is written e-7
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

func appendParty(b []byte, p *Party) []byte {
	b = append(b, '{')
	b = appendPartyFields(b, p)
	return append(b, '}')
}

// appendString appends s as a JSON string as encoding/json writes it, HTML escaping included.
func appendString(b []byte, s string) []byte { return AppendJSONString(b, s, true) }

// appendCompact appends raw, one JSON value, as encoding/json's Marshal writes a RawMessage: the
// white space between tokens removed, '<', '>', '&', U+2028 and U+2029 in strings escaped. It
// fails, as Marshal does, when raw is not valid JSON or nests deeper than maxDepth.
func appendCompact(b, raw []byte) ([]byte, error) {
	c := compactor{src: raw, dst: b}
	c.space()
	if !c.value(0) {
		return b, c.fail()
	}
	c.space()
	if c.i != len(raw) {
		return b, c.fail()
	}
	return c.dst, nil
}

// compactor checks one JSON value and copies it compacted.
type compactor struct {
	src []byte
	i   int
	dst []byte
}

func (c *compactor) fail() error {
	return fmt.Errorf("raw is not valid JSON (at byte %d of %d)", c.i, len(c.src))
}

func (c *compactor) space() {
	for c.i < len(c.src) {
		switch c.src[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *compactor) value(depth int) bool {
	if c.i >= len(c.src) {
		return false
	}
	switch ch := c.src[c.i]; {
	case ch == '{':
		return c.container(depth+1, true)
	case ch == '[':
		return c.container(depth+1, false)
	case ch == '"':
		return c.str()
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.number()
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	}
	return false
}

func (c *compactor) literal(word string) bool {
	for k := 0; k < len(word); k++ {
		if c.i >= len(c.src) || c.src[c.i] != word[k] {
			return false
		}
		c.i++
	}
	c.dst = append(c.dst, word...)
	return true
}

// container copies the object (object true) or array at c.i: its members ("key": value) or
// elements, separated by commas, up to its closing byte.
func (c *compactor) container(depth int, object bool) bool {
	if depth > maxDepth {
		return false
	}
	closing := byte(']')
	if object {
		closing = '}'
	}
	c.dst = append(c.dst, c.src[c.i])
	c.i++
	c.space()
	if c.i < len(c.src) && c.src[c.i] == closing {
		c.i++
		c.dst = append(c.dst, closing)
		return true
	}
	for {
		if object {
			if c.i >= len(c.src) || c.src[c.i] != '"' || !c.str() {
				return false
			}
			c.space()
			if c.i >= len(c.src) || c.src[c.i] != ':' {
				return false
			}
			c.i++
			c.dst = append(c.dst, ':')
			c.space()
		}
		if !c.value(depth) {
			return false
		}
		c.space()
		if c.i >= len(c.src) {
			return false
		}
		switch c.src[c.i] {
		case ',':
			c.i++
			c.dst = append(c.dst, ',')
			c.space()
		case closing:
			c.i++
			c.dst = append(c.dst, closing)
			return true
		default:
			return false
		}
	}
}

// number copies the number at c.i (numberEnd).
func (c *compactor) number() bool {
	end := numberEnd(c.src, c.i)
	if end < 0 {
		return false
	}
	c.dst = append(c.dst, c.src[c.i:end]...)
	c.i = end
	return true
}

// str copies a string at c.i (its opening quote), checking its escapes and control characters,
// with '<', '>', '&', U+2028 and U+2029 escaped. Other bytes, valid UTF-8 or not, are copied as
// they are, as encoding/json copies them.
func (c *compactor) str() bool {
	s := c.src
	start := c.i
	i := c.i + 1
	for i < len(s) {
		i = skipPlain(s, i, true)
		if i >= len(s) {
			break
		}
		switch ch := s[i]; {
		case ch == '"':
			c.dst = append(c.dst, s[start:i+1]...)
			c.i = i + 1
			return true
		case ch == '\\':
			i++
			if i >= len(s) {
				c.i = i
				return false
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				for k := 1; k <= 4; k++ {
					if i+k >= len(s) || !isHex(s[i+k]) {
						c.i = min(i+k, len(s))
						return false
					}
				}
				i += 5
			default:
				c.i = i
				return false
			}
		case ch < 0x20:
			c.i = i
			return false
		case ch == '<' || ch == '>' || ch == '&':
			c.dst = append(c.dst, s[start:i]...)
			c.dst = append(c.dst, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xF])
			i++
			start = i
		case ch == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xA8:
			c.dst = append(c.dst, s[start:i]...)
			c.dst = append(c.dst, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xF])
			i += 3
			start = i
		default:
			i++
		}
	}
	c.i = i
	return false
}

func isHex(ch byte) bool {
	return ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F'
}
