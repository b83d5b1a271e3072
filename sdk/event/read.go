package event

import (
	"strconv"
	"unicode/utf8"
)

// One pass for the bodies that have no problem. Nearly every body a service receives has none,
// and for those, reading the JSON tree (scanTree) and then walking it (decoder) read each body
// twice and built a tree only to drop it. readBody decodes such a body in one pass over its text,
// straight into events, validating each event as it is read. It gives up at the first thing wrong,
// and parseBody then reads the body with the tree, whose decoder is the one that lists problems:
// a body is accepted by one reader exactly when it is by the other, with the same events, and the
// problems of a refused body are listed exactly as the tree's decoder lists them. FuzzParseBody
// holds the two readers to that.

// eventBytes is about the size of an event as reporters send them, most of it the raw record;
// readBody sizes a batch's room by it, up to MaxBatch events. A batch of smaller events grows
// the room as it is read, and a Room keeps what it grew to.
const eventBytes = 400

// readBody decodes data as parseBody does when data holds no problem at all, and ok is false
// otherwise (what it may have written into shared's memory by then is overwritten by the tree's
// decoder, which takes the same room again).
func (s *scanner) readBody(data []byte, shared *Room) (out []Parsed, batch, ok bool) {
	if !utf8.Valid(data) {
		return nil, false, false
	}
	s.text, s.i = string(data), 0
	d := decoder{data: data}
	s.space()
	if !s.at('{') {
		return nil, false, false
	}
	root := s.i
	s.i++
	s.space()
	if s.at('"') {
		key, ok := s.str()
		if !ok {
			return nil, false, false
		}
		if key == "events" {
			out, ok = s.readBatch(&d, shared)
			return out, true, ok && s.end()
		}
	}
	s.i = root
	out, parties := shared.take(1, 3)
	d.parties = &parties
	p, ok := s.readEvent(&d, 1)
	if !ok || !s.end() {
		return nil, false, false
	}
	return append(out, p), false, true
}

// readBatch reads the rest of a batch body from just after its "events" key: the array of 1 to
// MaxBatch events, and the end of the body's object, which may hold nothing else.
func (s *scanner) readBatch(d *decoder, shared *Room) ([]Parsed, bool) {
	if !s.colon() {
		return nil, false
	}
	n := min(MaxBatch, len(s.text)/eventBytes+1)
	out, parties := shared.take(n, 2*n)
	d.parties = &parties
	ok := s.elements(func() bool {
		if len(out) == MaxBatch {
			return false
		}
		p, ok := s.readEvent(d, 3)
		out = append(out, p)
		return ok
	})
	if !ok || len(out) == 0 {
		return nil, false
	}
	shared.hold(out)
	more, ok := s.next('}')
	return out, ok && !more
}

// first records member m of an object in seen, the members of that object read so far, and
// reports whether it was not read before, so that a key given twice is refused. m < 0 is a key
// the object does not have.
func first(seen *uint32, m int) bool {
	if m < 0 || *seen&(1<<m) != 0 {
		return false
	}
	*seen |= 1 << m
	return true
}

// readParty reads a party object, or null.
func (s *scanner) readParty(d *decoder) (*Party, bool) {
	if s.word("null") {
		return nil, true
	}
	if !s.at('{') {
		return nil, false
	}
	pt := d.newParty()
	var seen uint32
	ok := s.members(func(key string) bool {
		m := partyMember(key)
		return first(&seen, m) && s.readPartyMember(pt, m)
	})
	return pt, ok
}

// readStrings reads a non-empty array of strings, or null.
func (s *scanner) readStrings() ([]string, bool) {
	if s.word("null") {
		return nil, true
	}
	var out []string
	ok := s.elements(func() bool {
		v, ok := s.readString()
		out = append(out, v)
		return ok
	})
	return out, ok && len(out) > 0
}

// readString reads a string, or null ("").
func (s *scanner) readString() (string, bool) {
	if s.at('"') {
		return s.str()
	}
	return "", s.word("null")
}

// readNonEmpty reads a string that is not empty, or null (""): the empty provider and the empty
// event id are refused, not taken for absent.
func (s *scanner) readNonEmpty() (string, bool) {
	null := s.at('n')
	v, ok := s.readString()
	return v, ok && (v != "" || null)
}

// as gives a string read by readString as one of the vocabulary's string types.
func as[T ~string](v string, ok bool) (T, bool) {
	return T(v), ok
}

// readNumber reads a number's text, or null ("").
func (s *scanner) readNumber() (string, bool) {
	if s.word("null") {
		return "", true
	}
	start := s.i
	if !s.number() {
		return "", false
	}
	return s.text[start:s.i], true
}

// readFloat reads a number that fits a float64, or null (nil).
func (s *scanner) readFloat() (*float64, bool) {
	t, ok := s.readNumber()
	if !ok || t == "" {
		return nil, ok
	}
	f, err := strconv.ParseFloat(t, 64)
	return &f, err == nil
}

// readWhole reads a whole number that fits an int64, or null (null true).
func (s *scanner) readWhole() (i int64, null, ok bool) {
	t, ok := s.readNumber()
	if !ok || t == "" {
		return 0, ok, ok
	}
	i, err := strconv.ParseInt(t, 10, 64)
	return i, false, err == nil
}

// readInt reads a whole number that fits an int64, or null (nil).
func (s *scanner) readInt() (*int64, bool) {
	i, null, ok := s.readWhole()
	if null || !ok {
		return nil, ok
	}
	return &i, true
}

// readSmallInt reads a whole number that fits an int32, or null (nil).
func (s *scanner) readSmallInt() (*int, bool) {
	i, null, ok := s.readWhole()
	if null || !ok {
		return nil, ok
	}
	v := int(i)
	return &v, i >= -1<<31 && i <= 1<<31-1
}

// readBool reads true, false or null (nil).
func (s *scanner) readBool() (*bool, bool) {
	var b bool
	switch {
	case s.word("true"):
		b = true
	case s.word("false"):
	default:
		return nil, s.word("null")
	}
	return &b, true
}
