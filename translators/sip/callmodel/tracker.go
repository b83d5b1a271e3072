package callmodel

import (
	"container/heap"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/callwire/callwire/sdk/event"
)

// retiredCalls is what the tracker remembers of a Call-ID whose calls it forgot. Like a buried
// call, it holds no pointers.
type retiredCalls struct {
	gen  int                        // the highest suffix number a call on the Call-ID had
	n    int                        // tags held
	tags [maxRetiredTags]retiredTag // the caller's tag of each call, with its suffix number
}

// retiredTag is the caller's tag of a forgotten call (its tagHash) and the call's suffix number.
type retiredTag struct {
	tag uint64
	gen int
}

// tagIndex returns the index in tags of the caller's tag (its tagHash), or -1.
func (r *retiredCalls) tagIndex(tag uint64) int {
	for i := range r.n {
		if r.tags[i].tag == tag {
			return i
		}
	}
	return -1
}

// Bounds on what one call keeps.
const (
	maxRetiredTags = 8   // caller tags remembered per forgotten Call-ID
	maxSeenKeys    = 512 // meaning keys remembered per call for duplicate suppression
	maxPendingRefs = 16  // REFERs awaiting their 2xx
	maxCallIDLen   = 480 // longer Call-IDs are refused: providerCallId is at most 512 bytes
)

// Stats counts what the tracker did with the messages it was given.
type Stats struct {
	// Calls is the number of calls held now, ended ones in their grace included.
	Calls int
	// Messages is every message given to Observe.
	Messages uint64
	// Malformed counts messages that could not be parsed or lack a Call-ID, CSeq, From or To
	// (or a time).
	Malformed uint64
	// Ignored counts messages that belong to no call: out-of-dialog requests other than INVITE
	// (REGISTER, OPTIONS, ...), the PBX's legs to its phones when Trunk is set, and messages
	// of a call that do not concern it (a response from a losing branch, say).
	Ignored uint64
	// Unmatched counts in-dialog requests and responses for a Call-ID the tracker does not hold.
	Unmatched uint64
	// Undirected counts initial INVITEs whose direction could not be told; the dialog is skipped.
	Undirected uint64
	// Duplicates counts copies of a message already seen (retransmissions, second captures).
	Duplicates uint64
	// Evicted counts calls forgotten early to make room, because MaxCalls was reached.
	Evicted uint64
	// Dropped counts new calls refused because MaxCalls was reached and none could be evicted.
	Dropped uint64
	// Inferred counts calls ended by Expire rather than by a message.
	Inferred uint64
	// Forgotten counts ended calls forgotten: after their grace, or earlier to make room.
	Forgotten uint64
}

// Tracker is the SIP observer's dialog tracker: it turns the SIP messages of calls into
// canonical events. It reads no clock and does no I/O; the caller gives it messages (Observe)
// and the time (Expire). It is not safe for concurrent use. The events of one call share the
// parties, diversion hops and locations of their call block: read them, or Clone the block
// before changing it. Every event's Raw is in canonical form (compact, strings escaped as
// json.Marshal escapes them), so events may be encoded with event.Event.AppendJSONTrustingRaw.
type Tracker struct {
	cfg    Config
	pbx    map[netip.AddrPort]bool
	trunk  map[netip.AddrPort]bool
	parser *sip.Parser

	calls map[string]*call // by Call-ID: the latest call that used it
	// fresh holds calls in creation order that had no response when created; the oldest that
	// still has none is the one evicted when the tracker is full.
	fresh callQueue
	// ended holds calls in the order they ended; when the tracker is full and no call waits for
	// a first response, the first that is still held is forgotten early (every ended call is
	// forgotten Grace after its end, so it is the one closest to being forgotten anyway).
	ended callQueue
	// retired remembers, for Call-IDs whose calls were forgotten, how many calls used them and
	// which caller tag started each, so that a later call on the Call-ID gets the next suffix
	// while a replay of a forgotten call gets its own again.
	retired      map[callKey]retiredCalls
	retiredOrder []callKey
	retiredHead  int

	// buried holds the ended calls kept as records without pointers (ended.go), burials their
	// deadlines; seeds key both tables and the retired one.
	buried  map[callKey]endedCall
	burials burials
	seeds   [2]maphash.Seed

	timers timers // the calls' deadlines

	w wire // the message Observe is reading
	// scratch holds the events of the message being read: a reading's events are returned in
	// it (see events), and ObserveAppend copies them out before the next reading.
	scratch [2]event.Event

	recovered int // panics the guard in Observe caught: a bug, which tests look for

	stats Stats
}

// NewTracker validates cfg and returns a tracker with no calls.
func NewTracker(cfg Config) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid call model configuration: %w", err)
	}
	cfg = cfg.withDefaults()
	cfg.PBX = slices.Clone(cfg.PBX)
	cfg.Trunk = slices.Clone(cfg.Trunk)
	t := &Tracker{
		cfg:     cfg,
		pbx:     make(map[netip.AddrPort]bool, len(cfg.PBX)),
		trunk:   make(map[netip.AddrPort]bool, len(cfg.Trunk)),
		parser:  newParser(),
		calls:   make(map[string]*call),
		retired: make(map[callKey]retiredCalls),
		buried:  make(map[callKey]endedCall),
		seeds:   [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
	}
	for _, a := range cfg.PBX {
		t.pbx[a] = true
	}
	for _, a := range cfg.Trunk {
		t.trunk[a] = true
	}
	return t, nil
}

// Stats returns the tracker's counters.
func (t *Tracker) Stats() Stats {
	s := t.stats
	s.Calls = len(t.calls) + len(t.buried)
	return s
}

// sipMsg is a parsed message as the tracker reads it.
type sipMsg interface {
	headerer
	Body() []byte
}

// wire is one message's identity as the tracker needs it: who, which dialog, which transaction.
type wire struct {
	m       Message
	msg     sipMsg
	req     *sip.Request
	resp    *sip.Response
	method  string // the request's method, or the CSeq method of a response
	callID  string
	cseq    uint32
	fromTag string
	toTag   string
	status  int
	reason  string
}

// key is the message's meaning, what a retransmission or a second capture repeats exactly, as
// a 64-bit FNV-1a hash of its parts: a request's method, CSeq number and tags; a response's
// status, CSeq and to-tag. A call remembers at most maxSeenKeys of them, so the chance that two
// different messages of one call share a key is below 2^-45.
func (w *wire) key() uint64 {
	h := fnvOffset
	if w.req != nil {
		h = fnvByte(h, 'q')
		h = fnvString(h, w.fromTag)
	} else {
		h = fnvByte(h, 's')
		h = fnvUint(h, uint64(w.status))
	}
	h = fnvString(h, w.method)
	h = fnvUint(h, uint64(w.cseq))
	return fnvString(h, w.toTag)
}

// FNV-1a, 64 bits, computed in place (hash/fnv's hasher would be an allocation per message).
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

// fnvString hashes s and then its length, so that adjacent strings cannot trade bytes.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return fnvUint(h, uint64(len(s)))
}

func fnvUint(h uint64, v uint64) uint64 {
	for range 8 {
		h = fnvByte(h, byte(v))
		v >>= 8
	}
	return h
}

// Observe reads one message and returns the events it causes, in order (usually none). It never
// panics: malformed or irrelevant input is counted in Stats and returns nil. m.SIP, when set, is
// only read.
func (t *Tracker) Observe(m Message) []event.Event {
	return t.ObserveAppend(nil, m)
}

// ObserveAppend is Observe with the events appended to dst, so that a caller that hands them
// on at once can use one slice for every message. It returns the extended slice; dst is
// returned unchanged when the message causes no event.
func (t *Tracker) ObserveAppend(dst []event.Event, m Message) []event.Event {
	out := t.observe(m)
	dst = append(dst, out...)
	clear(out) // the scratch keeps no raw alive
	return dst
}

func (t *Tracker) observe(m Message) (out []event.Event) {
	t.stats.Messages++
	defer func() {
		// A guard, not a path: the readings do not panic, and a bug in them must cost one
		// message, never the proxy that feeds the tracker.
		if r := recover(); r != nil {
			t.stats.Malformed++
			t.recovered++
			out = nil
		}
	}()
	w, ok := t.read(m)
	if !ok {
		t.stats.Malformed++
		return nil
	}
	if w.req != nil {
		out = t.request(w)
	} else {
		out = t.response(w)
	}
	if c := t.calls[w.callID]; c != nil {
		t.settle(c)
	}
	return out
}

// read parses the message (when not parsed yet) and reads its dialog identity.
func (t *Tracker) read(m Message) (*wire, bool) {
	if m.At.IsZero() {
		return nil, false
	}
	// The wire lives in the tracker: one per message would be most of what reading costs, and
	// no wire outlives the Observe that read it.
	w := &t.w
	*w = wire{m: m}
	msg := m.SIP
	if msg == nil {
		if len(m.Data) == 0 {
			return nil, false
		}
		p, err := t.parser.ParseSIP(m.Data)
		if err != nil {
			return nil, false
		}
		msg = p
	}
	switch x := msg.(type) {
	case *sip.Request:
		if x == nil {
			return nil, false
		}
		w.req, w.msg = x, x
		w.method = strings.ToUpper(string(x.Method))
	case *sip.Response:
		if x == nil {
			return nil, false
		}
		w.resp, w.msg = x, x
		w.status, w.reason = x.StatusCode, x.Reason
		if w.status < 100 || w.status > 699 {
			return nil, false
		}
	default:
		return nil, false
	}
	typed := readTyped(w.msg)
	id, cseqNo, method := typed.callID, typed.cseqNo, typed.cseqMethod
	if !typed.ids {
		ids := headerValues(w.msg, "Call-ID", "i")
		if len(ids) != 1 {
			return nil, false
		}
		id = ids[0]
		cs := headerValues(w.msg, "CSeq")
		if len(cs) != 1 {
			return nil, false
		}
		num, m, ok := strings.Cut(strings.TrimSpace(cs[0]), " ")
		n, err := strconv.ParseUint(num, 10, 32)
		if !ok || err != nil {
			return nil, false
		}
		cseqNo, method = uint32(n), m
	}
	w.callID = strings.TrimSpace(id)
	if w.callID == "" || len(w.callID) > maxCallIDLen || hasControl(w.callID) {
		return nil, false
	}
	w.cseq = cseqNo
	method = strings.ToUpper(strings.TrimSpace(method))
	if w.req != nil && method != w.method || method == "" {
		return nil, false
	}
	w.method = method
	var okFrom, okTo bool
	if typed.from {
		w.fromTag, okFrom = typed.fromTag, true
	} else {
		w.fromTag, okFrom = tagOf(w.msg, "From", "f")
	}
	if typed.to {
		w.toTag, okTo = typed.toTag, true
	} else {
		w.toTag, okTo = tagOf(w.msg, "To", "t")
	}
	if !okFrom || !okTo {
		return nil, false
	}
	return w, true
}

// tagOf reads the tag parameter of the From or To header; false when the header is missing or
// does not parse.
func tagOf(msg headerer, names ...string) (string, bool) {
	nas, errs := nameAddrs(msg, names...)
	if len(nas) != 1 || len(errs) != 0 {
		return "", false
	}
	na := nas[0]
	tag, _ := paramFold(na.params, "tag")
	return tag, true
}

// typedHeaders is what read needs of a message, taken from the headers its parser read into
// their typed forms (it does for Call-ID, CSeq, From and To, full or compact), in one walk over
// the headers: rendering them back to text and parsing them again was a fifth of the model's time.
type typedHeaders struct {
	callID, cseqMethod, fromTag, toTag string
	cseqNo                             uint32
	// ids, from and to are set when that part was read from exactly one typed header and no
	// header of the same name stayed text; otherwise read takes the general path for it.
	ids, from, to bool
}

func readTyped(msg headerer) typedHeaders {
	var t typedHeaders
	nID, nSeq, nFrom, nTo := 0, 0, 0, 0
	textIDs, textFrom, textTo := false, false, false
	for _, h := range msg.Headers() {
		switch v := h.(type) {
		case *sip.CallIDHeader:
			nID++
			t.callID = string(*v)
		case *sip.CSeqHeader:
			nSeq++
			t.cseqNo, t.cseqMethod = v.SeqNo, string(v.MethodName)
		case *sip.FromHeader:
			nFrom++
			t.fromTag, _ = paramFold(v.Params, "tag")
		case *sip.ToHeader:
			nTo++
			t.toTag, _ = paramFold(v.Params, "tag")
		default:
			switch name := h.Name(); {
			case nameIn(name, []string{"Call-ID", "i", "CSeq"}):
				textIDs = true
			case nameIn(name, []string{"From", "f"}):
				textFrom = true
			case nameIn(name, []string{"To", "t"}):
				textTo = true
			}
		}
	}
	t.ids = !textIDs && nID == 1 && nSeq == 1
	t.from = !textFrom && nFrom == 1
	t.to = !textTo && nTo == 1
	return t
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// request handles a request.
func (t *Tracker) request(w *wire) []event.Event {
	c := t.calls[w.callID]
	if w.method == "INVITE" && w.toTag == "" {
		return t.initialInvite(c, w)
	}
	if c == nil {
		if t.lateToBuried(w) {
			return nil
		}
		if w.toTag == "" && w.method != "CANCEL" && w.method != "ACK" {
			t.stats.Ignored++ // out-of-dialog OPTIONS, REGISTER, MESSAGE, SUBSCRIBE...
		} else {
			t.stats.Unmatched++
		}
		return nil
	}
	if t.duplicate(c, w) {
		return nil
	}
	return c.request(t, w)
}

// response handles a response.
func (t *Tracker) response(w *wire) []event.Event {
	c := t.calls[w.callID]
	if c == nil {
		if !t.lateToBuried(w) {
			t.stats.Unmatched++
		}
		return nil
	}
	if c.pending && !c.ended && w.m.Dst == c.callerHop && w.method == "INVITE" && w.status == c.pendingCode && !retryable(w.status) {
		t.duplicate(c, w)
		return c.finalCopy(t, w)
	}
	if t.duplicate(c, w) {
		return nil
	}
	return c.response(t, w)
}

// duplicate reports whether the message's meaning was seen on the call already, and remembers
// it when not.
func (t *Tracker) duplicate(c *call, w *wire) bool {
	k := w.key()
	if slices.Contains(c.seen, k) {
		t.stats.Duplicates++
		return true
	}
	if len(c.seen) < maxSeenKeys {
		c.seen = append(c.seen, k)
	}
	c.seenAt = later(c.seenAt, w.m.At)
	return false
}

// initialInvite handles an INVITE without a to-tag: a new call, the retry of a challenged or
// redirected one, or a copy.
func (t *Tracker) initialInvite(c *call, w *wire) []event.Event {
	gen := 1
	var seen []uint64
	var out []event.Event
	var key callKey
	buried := false
	if c == nil {
		key = t.keyOf(w.callID)
	}
	if c != nil {
		if t.duplicate(c, w) {
			return nil
		}
		if !c.ended && c.answered && w.fromTag != c.fromTag {
			// Another caller's INVITE on the Call-ID of an answered call: a new call, and the
			// old one's BYE was lost.
			if _, ok := t.peekCall(w); ok {
				out = append(out, c.supersede(t, w.m.At)...) // a copy: start reuses the scratch
				t.stats.Inferred++
			}
		}
		if !c.ended {
			// A retry after 401/407/422/3xx, a serial fork's next branch or a new CSeq for
			// the same attempt: the same call.
			c.retry(t, w)
			return nil
		}
		gen, seen = c.gen+1, c.seen
	} else if e, ok := t.buriedCall(key); ok {
		// A new call on the Call-ID of a buried one, or a copy of one of its messages.
		if t.seenBuried(&e, w) {
			return nil
		}
		t.buried[key] = e
		gen, seen, buried = e.gen+1, slices.Clone(e.seen[:e.n]), true
	} else if r, ok := t.retired[key]; ok {
		gen = r.gen + 1
		if i := r.tagIndex(t.tagHash(w.fromTag)); i >= 0 {
			// The same caller's INVITE again, after its call was forgotten: a replay (of a
			// capture, or by a sender that kept retrying), which must land on the same call.
			gen = r.tags[i].gen
		}
	}
	nc, ok := t.newCall(w, gen, seen)
	if !ok {
		return out
	}
	if c == nil && !buried && !t.makeRoom() {
		t.stats.Dropped++
		return nil
	}
	nc.seen = append(nc.seen, w.key())
	if c != nil {
		c.gone = true // the new call takes the Call-ID
	}
	if buried {
		delete(t.buried, key) // its burial is skipped when it comes up
	}
	t.calls[w.callID] = nc
	t.fresh.push(t, nc, stillFresh)
	return append(out, nc.start(t, w)...)
}

// peekCall reports whether an initial INVITE would make a call, without counting anything.
func (t *Tracker) peekCall(w *wire) (*call, bool) {
	saved := t.stats
	c, ok := t.newCall(w, 1, nil)
	t.stats = saved
	return c, ok
}

// makeRoom reports whether a new call may be held. When the tracker is full it forgets the ended
// call whose grace runs out first, else evicts the oldest call that never got a response. Ended
// calls go first: they are held only to absorb late copies, and at a proxy's rates they are most
// of what the tracker holds, so evicting the newest calls first would lose live ones (an INVITE
// whose 100 Trying is a millisecond away) at every call, under nothing worse than steady load.
func (t *Tracker) makeRoom() bool {
	if len(t.calls)+len(t.buried) < t.cfg.MaxCalls {
		return true
	}
	// The first buried, or the first of the ended queue still held (calls end in the order the
	// tracker sees them end), whichever runs out first.
	b, isBuried := t.firstBurial()
	if c := t.ended.peek(t, held); c != nil && (!isBuried || c.forgetAt.UnixNano() < b.at) {
		t.ended.popFirst(t, held)
		t.retire(c)
		return true
	}
	if isBuried {
		t.burials.pop()
		t.forgetBuried(b)
		return true
	}
	// Every call held is live: evict the oldest that never got a response (a flood of INVITEs
	// that nobody answers, say).
	if c := t.fresh.popFirst(t, stillFresh); c != nil {
		delete(t.calls, c.callID)
		c.gone = true
		t.stats.Evicted++
		return true
	}
	return false
}

// settle finishes with the call a message concerned: an ended call is buried when it can be,
// else queued for makeRoom; a call held has its deadline queued.
func (t *Tracker) settle(c *call) {
	if t.bury(c) {
		return
	}
	t.queueEnded(c)
	t.schedule(c)
}

// queueEnded queues c for makeRoom, once, when it has ended and was not buried.
func (t *Tracker) queueEnded(c *call) {
	if c.ended && !c.endQueued && !c.gone {
		c.endQueued = true
		t.ended.push(t, c, held)
	}
}

// held reports whether c is the call the tracker holds for its Call-ID. It reads a flag rather
// than the calls map: the queues and the deadlines ask for every entry they pass, and at a busy
// proxy's rates a map lookup of a cold Call-ID for each was a tenth of what the model cost.
func held(_ *Tracker, c *call) bool { return !c.gone }

// stillFresh reports whether c is held and still waits for its first response.
func stillFresh(t *Tracker, c *call) bool { return !c.responded && !c.ended && held(t, c) }

// callQueue is a queue of calls in the order they were pushed, from which calls are removed
// lazily: an entry whose call no longer qualifies (keep) is skipped when popFirst meets it and
// dropped when the queue is compacted.
type callQueue struct {
	items []*call
	head  int
}

// push appends c. When more than twice as many entries as calls held (and 1,024) wait, most of
// them no longer qualify: the queue keeps only those that do, a pass paid for by the pushes
// since the last one.
func (q *callQueue) push(t *Tracker, c *call, keep func(*Tracker, *call) bool) {
	q.items = append(q.items, c)
	if len(q.items)-q.head > 2*len(t.calls)+1024 {
		q.filter(t, keep)
	}
}

// peek returns the first call that qualifies, or nil when none does, dropping the entries before
// it.
func (q *callQueue) peek(t *Tracker, keep func(*Tracker, *call) bool) *call {
	for q.head < len(q.items) {
		if c := q.items[q.head]; keep(t, c) {
			return c
		}
		q.items[q.head] = nil
		q.head++
	}
	return nil
}

// popFirst removes and returns the first call that qualifies, or nil when none does, and then
// compacts the queue once its consumed head is half of it (at least 1,024 entries), so that each
// compaction is paid for by the pops since the last one.
func (q *callQueue) popFirst(t *Tracker, keep func(*Tracker, *call) bool) *call {
	var found *call
	for q.head < len(q.items) {
		c := q.items[q.head]
		q.items[q.head] = nil
		q.head++
		if keep(t, c) {
			found = c
			break
		}
	}
	if q.head == len(q.items) || q.head >= 1024 && q.head*2 >= len(q.items) {
		q.filter(t, keep)
	}
	return found
}

// filter keeps, in order, the waiting entries that qualify.
func (q *callQueue) filter(t *Tracker, keep func(*Tracker, *call) bool) {
	out := q.items[:0]
	for _, c := range q.items[q.head:] {
		if c != nil && keep(t, c) {
			out = append(out, c)
		}
	}
	clear(q.items[len(out):])
	q.items, q.head = out, 0
}

// retire forgets a call, remembering how many calls its Call-ID carried.
func (t *Tracker) retire(c *call) {
	if !c.gone {
		delete(t.calls, c.callID)
		c.gone = true
	}
	t.stats.Forgotten++
	t.remember(t.keyOf(c.callID), c.gen, t.tagHash(c.fromTag))
}

// remember notes that a call with suffix number gen, started by the caller's tag (its
// tagHash), was forgotten on the Call-ID of k.
func (t *Tracker) remember(k callKey, gen int, tag uint64) {
	r, ok := t.retired[k]
	if !ok {
		t.retiredOrder = append(t.retiredOrder, k)
	}
	r.gen = max(r.gen, gen)
	if i := r.tagIndex(tag); i >= 0 {
		r.tags[i].gen = gen
	} else if r.n < maxRetiredTags {
		r.tags[r.n] = retiredTag{tag, gen}
		r.n++
	}
	t.retired[k] = r
	for len(t.retired) > t.cfg.MaxCalls && t.retiredHead < len(t.retiredOrder) {
		delete(t.retired, t.retiredOrder[t.retiredHead])
		t.retiredOrder[t.retiredHead] = callKey{}
		t.retiredHead++
	}
	if t.retiredHead > 1024 && t.retiredHead*2 > len(t.retiredOrder) {
		t.retiredOrder = slices.Clone(t.retiredOrder[t.retiredHead:])
		t.retiredHead = 0
	}
}

// Expire ends the calls whose time ran out as of now (ring timeout, a challenge never retried,
// an answered call gone silent) and forgets the calls whose grace passed. It returns the events
// of those ends, ordered by their time (then by providerCallId).
func (t *Tracker) Expire(now time.Time) []event.Event {
	var out []event.Event
	for t.timers.Len() > 0 {
		top := t.timers.items[0]
		if top.at.After(now) {
			break
		}
		heap.Pop(&t.timers)
		c := top.c
		if !held(t, c) || !top.at.Equal(c.queuedAt) {
			continue // a forgotten call, or an entry superseded by an earlier one
		}
		if d := c.deadline(t); !d.Equal(top.at) {
			c.queuedAt = d // the deadline moved later since: wait for it, in time order
			heap.Push(&t.timers, timer{d, c})
			continue
		}
		if !c.ended {
			out = append(out, c.expire(t, top.at)...)
			t.stats.Inferred++
			if !t.bury(c) {
				t.queueEnded(c)
				c.queuedAt = c.deadline(t)
				heap.Push(&t.timers, timer{c.queuedAt, c})
			}
			continue
		}
		t.retire(c)
	}
	t.expireBuried(now) // those buried before and by the loop above
	clear(t.scratch[:])
	return out
}

// NextExpiry returns the earliest time Expire has something to do, or the zero time when no call
// is held.
func (t *Tracker) NextExpiry() time.Time {
	var next time.Time
	for t.timers.Len() > 0 {
		top := t.timers.items[0]
		c := top.c
		if !held(t, c) || !top.at.Equal(c.queuedAt) {
			heap.Pop(&t.timers)
			continue
		}
		if d := c.deadline(t); !d.Equal(top.at) {
			heap.Pop(&t.timers)
			c.queuedAt = d
			heap.Push(&t.timers, timer{d, c})
			continue
		}
		next = top.at
		break
	}
	if b, ok := t.firstBurial(); ok && (next.IsZero() || b.at < next.UnixNano()) {
		next = time.Unix(0, b.at)
	}
	return next
}

// schedule makes sure the call's deadline is queued. Deadlines that move later are left to be
// found when their old entry comes up (Expire and NextExpiry requeue it); one that moves earlier
// is queued anew, leaving the old entry to be skipped.
func (t *Tracker) schedule(c *call) {
	d := c.deadline(t)
	if c.queuedAt.IsZero() || d.Before(c.queuedAt) {
		c.queuedAt = d
		heap.Push(&t.timers, timer{d, c})
	}
	if len(t.timers.items) > 2*len(t.calls)+1024 {
		// Superseded entries and those of evicted calls pile up under a flood: start again
		// from one entry per call held.
		items := t.timers.items[:0]
		for _, c := range t.calls {
			c.queuedAt = c.deadline(t)
			items = append(items, timer{c.queuedAt, c})
		}
		clear(t.timers.items[len(items):])
		t.timers.items = items
		heap.Init(&t.timers)
	}
}

// timer is one queued deadline.
type timer struct {
	at time.Time
	c  *call
}

// timers is a min-heap of deadlines, by time, then providerCallId.
type timers struct{ items []timer }

func (h *timers) Len() int { return len(h.items) }
func (h *timers) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.c.id < b.c.id
}
func (h *timers) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *timers) Push(x any)    { h.items = append(h.items, x.(timer)) }
func (h *timers) Pop() any {
	n := len(h.items) - 1
	x := h.items[n]
	h.items[n] = timer{}
	h.items = h.items[:n]
	return x
}
