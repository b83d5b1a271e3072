package event

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
	"unicode/utf8"
)

// The event's canonical JSON, written field by field. encoding/json's reflection over an
// Event, and its two passes of its scanner over the raw (compacting it, then compacting the
// Marshaler's whole output again), cost a translator about 25 µs per event with a SIP message in
// its raw, more than translating the message. AppendJSON writes exactly the bytes json.Marshal
// writes for the same event (TestAppendJSONAgreesWithEncodingJSON, FuzzAppendJSON): HTML
// characters escaped, a raw compacted and checked.

// AppendJSON appends the event's canonical JSON to b and returns the extended buffer: the bytes
// MarshalJSON returns. On error (a raw that is not valid JSON, an occurredAt outside the years 0
// to 9999, a number that is not finite) it returns b unchanged and the error.
func (e *Event) AppendJSON(b []byte) ([]byte, error) {
	n := len(b)
	out, err := e.appendJSON(b)
	if err != nil {
		return b[:n], err
	}
	return out, nil
}

func (e *Event) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"type":`...)
	b = appendString(b, string(e.Type))
	b = append(b, `,"providerCallId":`...)
	b = appendString(b, e.ProviderCallID)
	b = append(b, `,"occurredAt":`...)
	at := e.OccurredAt.UTC()
	if y := at.Year(); y < 0 || y > 9999 {
		return b, errors.New("occurredAt: year outside of range [0,9999]")
	}
	b = append(b, '"')
	b = at.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = append(b, `,"call":{"direction":`...)
	b = appendString(b, string(e.Call.Direction))
	if e.Call.From != nil {
		b = append(b, `,"from":`...)
		b = appendParty(b, e.Call.From)
	}
	if e.Call.To != nil {
		b = append(b, `,"to":`...)
		b = appendParty(b, e.Call.To)
	}
	b = appendField(b, "trunk", e.Call.Trunk)
	if len(e.Call.Diversion) > 0 {
		b = append(b, `,"diversion":[`...)
		for i := range e.Call.Diversion {
			d := &e.Call.Diversion[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			b = appendPartyFields(b, &d.Party)
			b = appendField(b, "reason", d.Reason)
			if d.Counter != nil {
				b = appendKey(b, "counter")
				b = strconv.AppendInt(b, int64(*d.Counter), 10)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	b = appendField(b, "provider", e.Provider)
	if e.Sequence != 0 {
		b = append(b, `,"sequence":`...)
		b = strconv.AppendInt(b, e.Sequence, 10)
	}
	b = appendField(b, "providerEventId", e.ProviderEventID)
	b = appendField(b, "observer", string(e.Observer))
	if len(e.Locations) > 0 {
		b = append(b, `,"locations":[`...)
		for i, l := range e.Locations {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, l)
		}
		b = append(b, ']')
	}
	if len(e.Raw) > 0 {
		b = append(b, `,"raw":`...)
		if b, err = appendCompact(b, e.Raw); err != nil {
			return b, err
		}
	}
	b = appendField(b, "answeredBy", e.AnsweredBy)
	b = appendField(b, "disposition", string(e.Disposition))
	if b, err = appendFloat(b, "duration", e.Duration); err != nil {
		return b, err
	}
	if b, err = appendFloat(b, "talkTime", e.TalkTime); err != nil {
		return b, err
	}
	b = appendBool(b, "answeredElsewhere", e.AnsweredElsewhere)
	if e.SIPCode != nil {
		b = append(b, `,"sipCode":`...)
		b = strconv.AppendInt(b, int64(*e.SIPCode), 10)
	}
	b = appendField(b, "sipReason", e.SIPReason)
	b = appendBool(b, "released", e.Released)
	if e.TransferTo != nil {
		b = append(b, `,"to":`...)
		b = appendParty(b, e.TransferTo)
	}
	b = appendField(b, "mode", string(e.Mode))
	b = appendField(b, "url", e.URL)
	b = appendField(b, "mimeType", e.MIMEType)
	if e.Bytes != nil {
		b = append(b, `,"bytes":`...)
		b = strconv.AppendInt(b, *e.Bytes, 10)
	}
	b = appendField(b, "text", e.Text)
	b = appendField(b, "language", e.Language)
	if b, err = appendFloat(b, "confidence", e.Confidence); err != nil {
		return b, err
	}
	return append(b, '}'), nil
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

func appendPartyFields(b []byte, p *Party) []byte {
	b = appendField(b, "kind", string(p.Kind))
	b = appendField(b, "number", p.Number)
	b = appendField(b, "name", p.Name)
	b = appendField(b, "extension", p.Extension)
	return appendField(b, "uri", p.URI)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json writes it with its default
// HTML escaping: '"', '\\', control characters, '<', '>' and '&' escaped, each byte of invalid
// UTF-8 replaced by U+FFFD, U+2028 and U+2029 escaped. Runs of bytes that need none of that are
// skipped eight at a time.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) {
			if m := flagged(load64(s, i)); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
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
		r, size := utf8.DecodeRuneInString(s[i:])
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

// load64 reads the eight bytes of s from i, little-endian.
func load64[T string | []byte](s T, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// flagged returns the high bit of each of the eight bytes of x that a JSON string may have to
// escape or decode: a byte below 0x20, '"', '\\', '<', '>', '&', or one outside ASCII. These are
// the has-less-than and has-zero-byte tests on every byte at once, which can only err on a byte
// beyond one that qualifies, so the lowest bit set is always a byte that does.
func flagged(x uint64) uint64 {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	zero := func(y uint64) uint64 { return (y - ones) &^ y }
	m := (x - 0x20*ones) &^ x
	m |= zero(x^('"'*ones)) | zero(x^('\\'*ones)) | zero(x^('<'*ones)) | zero(x^('>'*ones)) | zero(x^('&'*ones))
	return (m | x) & highs
}

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
		return c.object(depth + 1)
	case ch == '[':
		return c.array(depth + 1)
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

func (c *compactor) object(depth int) bool {
	if depth > maxDepth {
		return false
	}
	c.i++
	c.dst = append(c.dst, '{')
	c.space()
	if c.i < len(c.src) && c.src[c.i] == '}' {
		c.i++
		c.dst = append(c.dst, '}')
		return true
	}
	for {
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
		case '}':
			c.i++
			c.dst = append(c.dst, '}')
			return true
		default:
			return false
		}
	}
}

func (c *compactor) array(depth int) bool {
	if depth > maxDepth {
		return false
	}
	c.i++
	c.dst = append(c.dst, '[')
	c.space()
	if c.i < len(c.src) && c.src[c.i] == ']' {
		c.i++
		c.dst = append(c.dst, ']')
		return true
	}
	for {
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
		case ']':
			c.i++
			c.dst = append(c.dst, ']')
			return true
		default:
			return false
		}
	}
}

// number copies a number as RFC 8259 writes it: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *compactor) number() bool {
	s, i := c.src, c.i
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = digits(s, i)
	default:
		c.i = i
		return false
	}
	if i < len(s) && s[i] == '.' {
		if i = digits(s, i+1); i < 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i = digits(s, i); i < 0 {
			return false
		}
	}
	c.dst = append(c.dst, s[c.i:i]...)
	c.i = i
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
		for i+8 <= len(s) {
			if m := flagged(load64(s, i)); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
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
