package event

import (
	"math/bits"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The request path's JSON reader. encoding/json's Decoder.Token, which parseTreeStd uses,
// allocates for every token and boxes it in an interface; ParseBody spent most of its time
// there. scanTree reads the same tree in one pass over the bytes: the body is copied to a string
// once, and keys, numbers and strings without escapes are slices of that copy; nodes, members
// and elements come from arenas, which a Parser keeps for its next body. It accepts only what
// encoding/json accepts, and gives up on anything else (malformed JSON, nesting past maxDepth),
// so that parseTree can ask parseTreeStd for the exact message. FuzzScanTree holds the two to
// the same trees. Its steps (members, elements, str, skip) are also those of readBody, which reads
// a body with no problem in one pass, without a tree.

// scanner reads one JSON value from text.
type scanner struct {
	text  string
	i     int
	nodes arena[node]
	// The members of the objects and the elements of the arrays being read are gathered on a
	// stack (a nested value's are popped before its parent's next); each object's or array's
	// are then copied, at their exact length, into an arena.
	fstack []field
	fields arena[field]
	istack []*node
	items  arena[*node]
	// scratch is where escaped strings are unescaped, reused from one to the next.
	scratch []byte
}

// The arenas' chunk sizes, and how many chunks of each a Parser keeps for its next body: about
// 200 KiB in all, room for the tree of a batch of 50 events (some 1,300 nodes and as many
// members), so that a body that is nearly all tree cannot leave a pooled Parser holding
// megabytes.
const (
	nodeChunk, nodeChunksKept   = 64, 24
	fieldChunk, fieldChunksKept = 128, 16
	itemChunk, itemChunksKept   = 64, 8
)

// arena hands out runs of values from chunks, which reset keeps, cleared, for the next tree.
// A run never moves: nodes point to each other.
type arena[T any] struct {
	chunks [][]T
	cur    int // the chunk being filled
}

// carve returns a run of n zero values, from a chunk of size values; a run longer than a chunk
// is allocated on its own.
func (a *arena[T]) carve(n, size int) []T {
	if n > size {
		return make([]T, n)
	}
	for ; a.cur < len(a.chunks); a.cur++ {
		if c := a.chunks[a.cur]; cap(c)-len(c) >= n {
			a.chunks[a.cur] = c[:len(c)+n]
			return c[len(c) : len(c)+n : len(c)+n]
		}
	}
	c := make([]T, n, size)
	a.chunks = append(a.chunks, c)
	return c[:n:n]
}

// reset clears every value handed out, so that the chunks hold no pointer into the last body,
// and keeps at most kept chunks for the next tree.
func (a *arena[T]) reset(kept int) {
	for i, c := range a.chunks {
		clear(c)
		a.chunks[i] = c[:0]
	}
	if len(a.chunks) > kept {
		clear(a.chunks[kept:])
		a.chunks = a.chunks[:kept]
	}
	a.cur = 0
}

// reset readies s for another body: its arenas and stacks cleared, its text forgotten.
func (s *scanner) reset() {
	s.text, s.i = "", 0
	s.nodes.reset(nodeChunksKept)
	s.fields.reset(fieldChunksKept)
	s.items.reset(itemChunksKept)
	clear(s.fstack[:cap(s.fstack)])
	clear(s.istack[:cap(s.istack)])
	s.fstack, s.istack = s.fstack[:0], s.istack[:0]
	// An object of thousands of members, or a long escaped string, leaves its stack or scratch
	// large: dropped, rather than kept for bodies that will not need it.
	if cap(s.fstack) > stackKept {
		s.fstack = nil
	}
	if cap(s.istack) > stackKept {
		s.istack = nil
	}
	if cap(s.scratch) > scratchKept {
		s.scratch = nil
	}
}

// The most members or elements a Parser's stacks keep room for, and the most bytes of scratch.
const stackKept, scratchKept = 1024, 16 << 10

// tree returns the tree of data, read with s's arenas, or ok false when data is not one valid
// JSON value with nothing but white space after it, or nests deeper than maxDepth.
func (s *scanner) tree(data []byte) (n *node, ok bool) {
	s.text, s.i = string(data), 0
	n, ok = s.value(0)
	if !ok {
		return nil, false
	}
	s.space()
	return n, s.i == len(s.text)
}

// alloc returns a zeroed node.
func (s *scanner) alloc() *node {
	return &s.nodes.carve(1, nodeChunk)[0]
}

// keep returns a copy of xs carved from a.
func keep[T any](a *arena[T], xs []T, size int) []T {
	out := a.carve(len(xs), size)
	copy(out, xs)
	return out
}

// space reads white space: the four bytes JSON allows, all at or below ' '. Nearly every byte
// it meets is above, and is told apart by one comparison.
func (s *scanner) space() {
	for s.i < len(s.text) {
		if c := s.text[s.i]; c > ' ' || c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return
		}
		s.i++
	}
}

func (s *scanner) value(depth int) (*node, bool) {
	s.space()
	if s.i >= len(s.text) {
		return nil, false
	}
	switch c := s.text[s.i]; {
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		str, esc, ok := s.strValue()
		if !ok {
			return nil, false
		}
		n := s.alloc()
		n.kind, n.str, n.esc = kindString, str, esc
		return n, true
	case c == '-' || (c >= '0' && c <= '9'):
		start := s.i
		if !s.number() {
			return nil, false
		}
		n := s.alloc()
		n.kind, n.str = kindNumber, s.text[start:s.i]
		return n, true
	case c == 't':
		return s.literal("true", kindBool, true)
	case c == 'f':
		return s.literal("false", kindBool, false)
	case c == 'n':
		return s.literal("null", kindNull, false)
	}
	return nil, false
}

func (s *scanner) literal(word string, k kind, b bool) (*node, bool) {
	if !s.word(word) {
		return nil, false
	}
	n := s.alloc()
	n.kind, n.b = k, b
	return n, true
}

func (s *scanner) object(depth int) (*node, bool) {
	if depth > maxDepth {
		return nil, false
	}
	n := s.alloc()
	n.kind, n.start = kindObject, int64(s.i)
	mark := len(s.fstack)
	defer func() { s.fstack = s.fstack[:mark] }()
	var keys keyIndex
	ok := s.members(func(key string) bool {
		val, ok := s.value(depth)
		if ok && keys.keep(s.fstack[mark:], &n.dupKeys, key) {
			s.fstack = append(s.fstack, field{key: key, val: val})
		}
		return ok
	})
	if !ok {
		return nil, false
	}
	n.end = int64(s.i)
	if len(s.fstack) > mark {
		n.fields = keep(&s.fields, s.fstack[mark:], fieldChunk)
	}
	return n, true
}

// next reads what follows a member or an element: a comma (more is true) or close (the end of
// the object or array). ok is false for anything else.
func (s *scanner) next(close byte) (more, ok bool) {
	s.space()
	if s.i >= len(s.text) {
		return false, false
	}
	switch s.text[s.i] {
	case ',':
		s.i++
		return true, true
	case close:
		s.i++
		return false, true
	}
	return false, false
}

func (s *scanner) array(depth int) (*node, bool) {
	if depth > maxDepth {
		return nil, false
	}
	n := s.alloc()
	n.kind = kindArray
	mark := len(s.istack)
	defer func() { s.istack = s.istack[:mark] }()
	ok := s.elements(func() bool {
		it, ok := s.value(depth)
		s.istack = append(s.istack, it)
		return ok
	})
	if !ok {
		return nil, false
	}
	if len(s.istack) > mark {
		n.items = keep(&s.items, s.istack[mark:], itemChunk)
	}
	return n, true
}

// at reports whether the byte at s.i is c.
func (s *scanner) at(c byte) bool {
	return s.i < len(s.text) && s.text[s.i] == c
}

// end reports whether nothing but white space follows s.i.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.text)
}

// colon reads the colon after a key and the white space around it, leaving s.i at the value.
func (s *scanner) colon() bool {
	s.space()
	if !s.at(':') {
		return false
	}
	s.i++
	s.space()
	return true
}

// key reads the key of an object's next member and its colon, leaving s.i at the value.
func (s *scanner) key() (string, bool) {
	s.space()
	if !s.at('"') {
		return "", false
	}
	key, ok := s.str()
	return key, ok && s.colon()
}

// members calls read for each member of the object at s.i, with its key and s.i at its value,
// and reports whether the object was read to its end and every read returned true.
func (s *scanner) members(read func(key string) bool) bool {
	if !s.at('{') {
		return false
	}
	s.i++
	s.space()
	if s.at('}') {
		s.i++
		return true
	}
	for {
		key, ok := s.key()
		if !ok || !read(key) {
			return false
		}
		more, ok := s.next('}')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

// elements calls read for each element of the array at s.i, with s.i at it, and reports whether
// the array was read to its end and every read returned true.
func (s *scanner) elements(read func() bool) bool {
	if !s.at('[') {
		return false
	}
	s.i++
	s.space()
	if s.at(']') {
		s.i++
		return true
	}
	for {
		s.space()
		if !read() {
			return false
		}
		more, ok := s.next(']')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

// word reads w, a literal, at s.i.
func (s *scanner) word(w string) bool {
	if len(s.text)-s.i < len(w) || s.text[s.i:s.i+len(w)] != w {
		return false
	}
	s.i += len(w)
	return true
}

// skip reads the JSON value at s.i as scanTree would, keeping nothing of it; depth is the nesting
// of the object or array that holds it.
func (s *scanner) skip(depth int) bool {
	if s.i >= len(s.text) {
		return false
	}
	switch c := s.text[s.i]; {
	case c == '{', c == '[':
		if depth+1 > maxDepth {
			return false
		}
		if c == '[' {
			return s.elements(func() bool { return s.skip(depth + 1) })
		}
		return s.members(func(string) bool { return s.skip(depth + 1) })
	case c == '"':
		_, _, ok := s.strValue()
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.word("true")
	case c == 'f':
		return s.word("false")
	case c == 'n':
		return s.word("null")
	}
	return false
}

// number reads a number as RFC 8259 writes it (numberEnd).
func (s *scanner) number() bool {
	end := numberEnd(s.text, s.i)
	if end < 0 {
		return false
	}
	s.i = end
	return true
}

// numberEnd returns the end of the number at t[i:] as RFC 8259 writes it,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, or -1 when there is none.
func numberEnd[T string | []byte](t T, i int) int {
	if i < len(t) && t[i] == '-' {
		i++
	}
	switch {
	case i < len(t) && t[i] == '0':
		i++
	case i < len(t) && t[i] >= '1' && t[i] <= '9':
		i = digits(t, i)
	default:
		return -1
	}
	if i < len(t) && t[i] == '.' {
		if i = digits(t, i+1); i < 0 {
			return -1
		}
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		i++
		if i < len(t) && (t[i] == '+' || t[i] == '-') {
			i++
		}
		if i = digits(t, i); i < 0 {
			return -1
		}
	}
	return i
}

// str reads a string at s.i (its opening quote) and returns its value: a slice of the text when
// it has no escapes, else the value unescaped as encoding/json unescapes it. The text is valid
// UTF-8 (parseTree checked it).
func (s *scanner) str() (string, bool) {
	t := s.text
	start := s.i + 1
	if i := plainEnd(t, start); i < len(t) {
		switch t[i] {
		case '"':
			s.i = i + 1
			return t[start:i], true
		case '\\':
			return s.escaped(start, i)
		}
	}
	return "", false // a control byte, or no closing quote
}

// digits returns the end of the run of one or more decimal digits at t[i:], or -1 when there is
// none.
func digits[T string | []byte](t T, i int) int {
	d := i
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == d {
		return -1
	}
	return i
}

// strValue reads a string value at s.i (its opening quote). One without escapes is returned as
// str returns it. One with escapes is checked, not unescaped: str is its text after the opening
// quote, closing quote included, and esc is true (see node.text). Most such strings are in a
// report's raw, which is kept as bytes and whose values are never read.
func (s *scanner) strValue() (str string, esc, ok bool) {
	t := s.text
	start := s.i + 1
	if i := plainEnd(t, start); i < len(t) {
		switch t[i] {
		case '"':
			s.i = i + 1
			return t[start:i], false, true
		case '\\':
			end, ok := escapedEnd(t, i)
			if !ok {
				return "", false, false
			}
			s.i = end
			return t[start:end], true, true
		}
	}
	return "", false, false
}

// escapedEnd checks the rest of a string from an escape at i, as escaped would read it, without
// unescaping it, and returns the index just past its closing quote.
func escapedEnd(t string, i int) (int, bool) {
	for {
		if i = plainEnd(t, i); i >= len(t) {
			return 0, false
		}
		switch t[i] {
		case '"':
			return i + 1, true
		case '\\':
		default:
			return 0, false // a control byte
		}
		if i+1 >= len(t) {
			return 0, false
		}
		switch t[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			// Every \u takes four hex digits; escaped reads a surrogate pair's second half as
			// an escape of its own when the pair does not form a rune, so it takes them too.
			if _, ok := hex4(t, i+2); !ok {
				return 0, false
			}
			i += 6
		default:
			return 0, false
		}
	}
}

// escaped finishes a string that has an escape at esc, unescaping it into s.scratch, and
// returns its value.
func (s *scanner) escaped(start, esc int) (string, bool) {
	t := s.text
	b := append(s.scratch[:0], t[start:esc]...)
	defer func() { s.scratch = b[:0] }()
	i := esc
	for i < len(t) {
		// A run of plain bytes, appended at once.
		j := plainEnd(t, i)
		b = append(b, t[i:j]...)
		if i = j; i >= len(t) {
			break
		}
		switch c := t[i]; {
		case c == '"':
			s.i = i + 1
			return string(b), true
		case c < ' ':
			return "", false
		}
		if i+1 >= len(t) {
			return "", false
		}
		switch t[i+1] {
		case '"', '\\', '/':
			b = append(b, t[i+1])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(t, i+2)
			if !ok {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A pair when a low surrogate follows; else, as encoding/json, U+FFFD.
				if r2, ok := hex4(t, i+2); ok && i+1 < len(t) && t[i] == '\\' && t[i+1] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
						b = utf8.AppendRune(b, d)
						i += 6
						continue
					}
				}
				r = unicode.ReplacementChar
			}
			b = utf8.AppendRune(b, r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return "", false
}

// hex4 reads the four hex digits at t[i:].
func hex4(t string, i int) (rune, bool) {
	if len(t)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(t[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// plainEnd returns the first index from i of t whose byte ends a run of plain string bytes (a
// byte below 0x20, '"' or '\\'), or len(t) when none does. Eight bytes are tested at a time.
func plainEnd(t string, i int) int {
	for i+8 <= len(t) {
		if m := stringStops(load64(t, i)); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(t) && t[i] != '"' && t[i] != '\\' && t[i] >= ' ' {
		i++
	}
	return i
}
