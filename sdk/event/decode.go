package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxProblems is the most problems ParseBody lists; past it the last problem says how many more
// there were.
const MaxProblems = 1000

// Parsed is one event decoded from a request body.
type Parsed struct {
	// Event is the decoded event, defaults not applied (see the Effective methods).
	Event Event
	// Body is the event object exactly as it appeared in the request: a subslice of the data
	// given to ParseBody.
	Body []byte
	// Block is the event's call block exactly as it appeared: a subslice of the same data.
	Block []byte
}

// ParseBody decodes a request body the way the ingest endpoint does: either one event object, or
// {"events": [...]} holding 1 to MaxBatch event objects. It returns the events in body order and
// whether the body was a batch. When anything is wrong it returns a *ValidationError listing every
// problem (malformed JSON, wrong types, unknown or duplicate fields, missing or invalid values),
// with paths such as "occurredAt" for a single event and "events[2].call.direction" in a batch.
func ParseBody(data []byte) ([]Parsed, bool, error) {
	var s scanner
	return parseBody(&s, data, nil)
}

// A Parser decodes request bodies as ParseBody does. A body with no problem is read in one pass,
// straight into its events; one with a problem is read again as a JSON tree, so that every
// problem can be listed, and the Parser keeps the tree's memory for its next body (up to about
// 200 KiB), so that a body with a problem does not allocate a tree (BenchmarkParseBody measures
// this). The zero Parser is ready to use. A Parser must not be used by two goroutines at once.
// The events it returns share no memory with it: it may parse the next body while they are in
// use.
type Parser struct {
	s scanner
}

// Parse is ParseBody with p's memory.
func (p *Parser) Parse(data []byte) ([]Parsed, bool, error) {
	defer p.s.reset()
	return parseBody(&p.s, data, nil)
}

// ParseInto is Parse, except that the slice of events it returns and the parties they point to
// (Call.From, Call.To and TransferTo) are r's memory: r's next ParseInto overwrites them and
// r.Forget clears them, so they are valid until then, and nothing may keep them past it.
// Everything else the events hold (their strings, locations, numbers, Raw, Body and Block) is as
// Parse gives it. A service that is done with a body's events before it reads another body into
// the same Room saves allocating them for every body, which leaves little more than the body's
// copy for a body without a problem (BenchmarkParseBody measures this).
func (p *Parser) ParseInto(r *Room, data []byte) ([]Parsed, bool, error) {
	defer p.s.reset()
	return parseBody(&p.s, data, r)
}

// A Room is memory for one body's events, which ParseInto decodes into and keeps for the next
// body: about 30 KB for a batch of 50 events. The zero Room is ready to use. A Room must not be
// used by two goroutines at once.
type Room struct {
	// events and parties are the last body's events, and the parties they point to.
	events  []Parsed
	parties []Party
}

// Forget clears the events ParseInto last decoded into r, and their parties, so that r keeps
// nothing of that body (their strings would keep its text from being collected) while it waits
// for the next. Those events are not valid afterwards.
func (r *Room) Forget() {
	clear(r.events[:cap(r.events)])
	clear(r.parties[:cap(r.parties)])
}

// take returns room for a body's events and their parties, with capacity for events and
// parties of them: r's, grown as needed and kept for its next body, or new ones when r is nil.
func (r *Room) take(events, parties int) ([]Parsed, []Party) {
	if r == nil {
		return make([]Parsed, 0, events), make([]Party, 0, parties)
	}
	r.events, r.parties = slices.Grow(r.events[:0], events), slices.Grow(r.parties[:0], parties)
	return r.events, r.parties
}

// hold keeps events, taken from r and grown past it, as r's memory for its next body.
func (r *Room) hold(events []Parsed) {
	if r != nil {
		r.events = events
	}
}

// parseBody is ParseBody reading with s: in one pass when the body has no problem (readBody),
// else with the tree. With shared, the events and their parties are decoded into shared's memory,
// which keeps them for its next body.
func parseBody(s *scanner, data []byte, shared *Room) ([]Parsed, bool, error) {
	if out, batch, ok := s.readBody(data, shared); ok {
		return out, batch, nil
	}
	return parseBodyTree(s, data, shared)
}

// parseBodyTree is parseBody reading the body's tree, and the one that lists a body's problems.
func parseBodyTree(s *scanner, data []byte, shared *Room) ([]Parsed, bool, error) {
	root, err := parseTree(s, data)
	if err != nil {
		return nil, false, &ValidationError{Problems: []Problem{{Field: "body", Message: err.Error()}}}
	}
	d := decoder{data: data}
	var out []Parsed
	batch := false
	if root.kind != kindObject {
		d.ps.add("body", "must be a JSON object: one event, or {\"events\": [...]}")
		return nil, false, d.result()
	}
	if ev := root.get("events"); ev != nil {
		batch = true
		d.dupes(root, "")
		for _, f := range root.fields {
			if f.key != "events" {
				d.typeProblem(member("", f.key), "is not a field of a batch body, which holds only \"events\"")
			}
		}
		switch {
		case ev.kind != kindArray:
			d.typeProblem("events", "must be an array of event objects")
		case len(ev.items) == 0:
			d.ps.add("events", "must hold at least one event")
		case len(ev.items) > MaxBatch:
			d.ps.add("events", "must hold at most "+strconv.Itoa(MaxBatch)+" events, got "+strconv.Itoa(len(ev.items)))
		}
		if ev.kind == kindArray && len(ev.items) <= MaxBatch {
			// Most events name both parties.
			var parties []Party
			out, parties = shared.take(len(ev.items), 2*len(ev.items))
			d.parties = &parties
		}
		for i, item := range ev.items {
			if item.kind != kindObject {
				d.event(item, "events["+strconv.Itoa(i)+"]") // reports it
				continue
			}
			// Decoded with paths relative to the item, which are prefixed only when there is a
			// problem: building "events[i].field" for every field of every event cost more
			// than decoding them. An item's paths are its own, so its marks need no sharing.
			sub := decoder{data: d.data, parties: d.parties}
			p, ok := sub.event(item, "")
			if len(sub.ps.list) > 0 {
				prefix := "events[" + strconv.Itoa(i) + "]"
				for _, pr := range sub.ps.list {
					pr.Field = under(prefix, pr.Field)
					d.ps.list = append(d.ps.list, pr)
				}
			}
			if ok {
				out = append(out, p)
			}
		}
	} else {
		// One event names at most three parties.
		var parties []Party
		out, parties = shared.take(1, 3)
		d.parties = &parties
		if p, ok := d.event(root, ""); ok {
			out = append(out, p)
		}
	}
	if err := d.result(); err != nil {
		return nil, batch, err
	}
	return out, batch, nil
}

type decoder struct {
	data []byte
	ps   problems
	// parties, shared by a body's decoders, is room for the parties they decode, so that a
	// body's parties take one allocation; nil or full, each party takes its own.
	parties *[]Party
}

// newParty returns a zero Party that no other party shares memory with.
func (d *decoder) newParty() *Party {
	if d.parties == nil || len(*d.parties) == cap(*d.parties) {
		return new(Party)
	}
	s := (*d.parties)[:len(*d.parties)+1]
	*d.parties = s
	s[len(s)-1] = Party{} // a Room holds the parties of an earlier body
	return &s[len(s)-1]
}

func (d *decoder) result() error {
	if len(d.ps.list) == 0 {
		return nil
	}
	list := d.ps.list
	if len(list) > MaxProblems {
		more := len(list) - MaxProblems + 1
		list = append(list[:MaxProblems-1:MaxProblems-1], Problem{Field: "body", Message: "and " + strconv.Itoa(more) + " more problems"})
	}
	return &ValidationError{Problems: list}
}

// typeProblem records a problem and marks the path so validation does not report it again.
func (d *decoder) typeProblem(field, msg string) {
	d.ps.add(field, msg)
	d.ps.mark(field)
}

// under returns path, relative to an event, as a path from prefix: prefix.call.direction for
// call.direction, prefix["odd key"] for ["odd key"].
func under(prefix, path string) string {
	if strings.HasPrefix(path, "[") {
		return prefix + path
	}
	return join(prefix, path)
}

// member returns the path of the member key of the object at prefix: prefix.key for a key such as
// "callerName", and prefix["key"] for any other key (empty, or holding dots, brackets or spaces),
// so that a body's own keys can never make a path that looks like another field's.
func member(prefix, key string) string {
	if isIdent(key) {
		return join(prefix, key)
	}
	return prefix + "[" + strconv.Quote(key) + "]"
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || (i > 0 && c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

func (d *decoder) dupes(n *node, p string) {
	if n.dupKeys == nil {
		return
	}
	for _, k := range *n.dupKeys {
		d.typeProblem(member(p, k), "appears more than once")
	}
}

func (d *decoder) str(n *node, path string) string {
	switch n.kind {
	case kindNull:
		return ""
	case kindString:
		return n.text()
	}
	d.typeProblem(path, "must be a string"+nullNote(n))
	return ""
}

func (d *decoder) float(n *node, path string) *float64 {
	switch n.kind {
	case kindNull:
		return nil
	case kindNumber:
		f, err := strconv.ParseFloat(n.str, 64)
		if err != nil {
			d.typeProblem(path, "is out of range")
			return nil
		}
		return &f
	}
	d.typeProblem(path, "must be a number")
	return nil
}

func (d *decoder) integer(n *node, path string) *int64 {
	switch n.kind {
	case kindNull:
		return nil
	case kindNumber:
		i, err := strconv.ParseInt(n.str, 10, 64)
		if err != nil {
			if _, ferr := strconv.ParseFloat(n.str, 64); ferr == nil && !errors.Is(err, strconv.ErrRange) {
				d.typeProblem(path, "must be a whole number")
			} else {
				d.typeProblem(path, "is out of range")
			}
			return nil
		}
		return &i
	}
	d.typeProblem(path, "must be a whole number")
	return nil
}

func (d *decoder) smallInt(n *node, path string) *int {
	i := d.integer(n, path)
	if i == nil {
		return nil
	}
	if *i < -1<<31 || *i > 1<<31-1 {
		d.typeProblem(path, "is out of range")
		return nil
	}
	v := int(*i)
	return &v
}

func (d *decoder) boolean(n *node, path string) *bool {
	switch n.kind {
	case kindNull:
		return nil
	case kindBool:
		b := n.b
		return &b
	}
	d.typeProblem(path, "must be true or false")
	return nil
}

func nullNote(n *node) string {
	if n.kind == kindNumber {
		return " (put it in quotes)"
	}
	return ""
}

func (d *decoder) strings(n *node, path string) []string {
	switch n.kind {
	case kindNull:
		return nil
	case kindArray:
		out := make([]string, 0, len(n.items))
		for i, it := range n.items {
			if it.kind != kindString {
				ip := path + "[" + strconv.Itoa(i) + "]"
				// Keep the place, so that later elements keep their index; the empty string
				// is not reported again, since ip is now skipped.
				d.typeProblem(ip, "must be a string")
				out = append(out, "")
				continue
			}
			out = append(out, it.text())
		}
		return out
	}
	d.typeProblem(path, "must be an array of strings")
	return nil
}

func (d *decoder) party(n *node, p string) *Party {
	switch n.kind {
	case kindNull:
		return nil
	case kindObject:
	default:
		d.typeProblem(p, "must be a party object")
		return nil
	}
	d.dupes(n, p)
	pt := d.newParty()
	for _, f := range n.fields {
		if !d.partyField(pt, f, p) {
			d.typeProblem(member(p, f.key), "is not a field of a party")
		}
	}
	return pt
}

// parseUTC parses an ISO 8601 timestamp in UTC: RFC 3339 with a "Z" or "+00:00" offset.
func parseUTC(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("must be an ISO 8601 timestamp in UTC, such as 2026-03-01T09:30:00Z")
	}
	if _, off := t.Zone(); off != 0 {
		return time.Time{}, errors.New("must be in UTC: end it with Z, not an offset")
	}
	return t.UTC(), nil
}

// The JSON tree: enough to report every problem with paths, spot duplicate keys, and slice the
// verbatim bytes of objects.

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindObject
	kindArray
)

type field struct {
	key string
	val *node
}

type node struct {
	kind kind
	b    bool
	// esc is true for a string with escapes that scanTree read but did not unescape: str is then
	// its JSON text after the opening quote, closing quote included. text gives the value.
	esc    bool
	str    string // string value (see esc), or number text
	fields []field
	// dupKeys are the keys an object repeats, nil when none (nearly always: a pointer, so that
	// every node of a batch's tree is a slice header smaller).
	dupKeys *[]string
	items   []*node
	// start and end are the byte offsets of an object in the input.
	start, end int64
}

// keyIndex follows the keys of one object as they are read.
type keyIndex struct {
	index map[string]bool // every key kept, once the object has indexFrom (before, a scan is cheaper)
	seen  map[string]bool // keys listed in dups
}

// indexFrom is how many members an object keeps before keyIndex looks keys up in a map rather
// than by scanning them: an event has a dozen or so, and an object of thousands of keys must not
// cost a scan each.
const indexFrom = 32

// keep reports whether key, about to be read into an object whose members so far are fields, is
// new: the first of duplicate keys wins. A key seen again is listed once in *dups. The caller
// appends the kept member to the object's fields.
func (k *keyIndex) keep(fields []field, dups **[]string, key string) bool {
	if k.index == nil && len(fields) >= indexFrom {
		k.index = make(map[string]bool, 2*len(fields))
		for _, f := range fields {
			k.index[f.key] = true
		}
	}
	dup := false
	if k.index != nil {
		dup = k.index[key]
	} else {
		for _, f := range fields {
			if f.key == key {
				dup = true
				break
			}
		}
	}
	if dup {
		if k.seen == nil {
			k.seen = map[string]bool{}
		}
		if !k.seen[key] {
			if *dups == nil {
				*dups = new([]string)
			}
			**dups = append(**dups, key)
			k.seen[key] = true
		}
		return false
	}
	if k.index != nil {
		k.index[key] = true
	}
	return true
}

// text returns a string node's value.
func (n *node) text() string {
	if !n.esc {
		return n.str
	}
	s := scanner{text: n.str}
	v, _ := s.escaped(0, strings.IndexByte(n.str, '\\')) // scanTree checked it
	return v
}

func (n *node) get(key string) *node {
	for _, f := range n.fields {
		if f.key == key {
			return f.val
		}
	}
	return nil
}

// parseTree reads data's JSON tree: with scanTree, or, when that gives up, with parseTreeStd,
// whose error says what is wrong as encoding/json says it.
func parseTree(s *scanner, data []byte) (*node, error) {
	if len(bytes.Trim(data, " \t\r\n")) == 0 {
		return nil, errors.New("is empty: send one event object, or {\"events\": [...]}")
	}
	if !utf8.Valid(data) {
		return nil, errors.New("is not valid UTF-8")
	}
	if n, ok := s.tree(data); ok {
		return n, nil
	}
	return parseTreeStd(data)
}

// parseTreeStd reads data's JSON tree with encoding/json's tokenizer.
func parseTreeStd(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseValue(dec, 0)
	if err != nil {
		return nil, syntaxMessage(err, dec)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("must hold one JSON value; found more after it at byte " + strconv.FormatInt(dec.InputOffset(), 10))
	}
	return n, nil
}

func syntaxMessage(err error, dec *json.Decoder) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return errors.New("is not valid JSON: " + se.Error() + " (at byte " + strconv.FormatInt(se.Offset, 10) + ")")
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("is not valid JSON: it ends too soon")
	}
	return errors.New("is not valid JSON: " + err.Error() + " (at byte " + strconv.FormatInt(dec.InputOffset(), 10) + ")")
}

// maxDepth is the deepest nesting of objects and arrays ParseBody accepts, the limit encoding/json
// applies. The tree is built recursively, so without it a body of brackets would exhaust the stack
// and end the process.
const maxDepth = 10000

var errTooDeep = errors.New("nested more than " + strconv.Itoa(maxDepth) + " levels deep")

func parseValue(dec *json.Decoder, depth int) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	return parseFrom(dec, tok, depth)
}

func parseFrom(dec *json.Decoder, tok json.Token, depth int) (*node, error) {
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		depth++
		if depth > maxDepth {
			return nil, errTooDeep
		}
	}
	switch v := tok.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case bool:
		return &node{kind: kindBool, b: v}, nil
	case json.Number:
		return &node{kind: kindNumber, str: string(v)}, nil
	case string:
		return &node{kind: kindString, str: v}, nil
	case json.Delim:
		switch v {
		case '{':
			n := &node{kind: kindObject, start: dec.InputOffset() - 1}
			var keys keyIndex
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				val, err := parseValue(dec, depth)
				if err != nil {
					return nil, err
				}
				if keys.keep(n.fields, &n.dupKeys, key) {
					n.fields = append(n.fields, field{key: key, val: val})
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			n.end = dec.InputOffset()
			return n, nil
		case '[':
			n := &node{kind: kindArray}
			for dec.More() {
				it, err := parseValue(dec, depth)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, it)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		}
	}
	return nil, errors.New("unexpected token")
}
