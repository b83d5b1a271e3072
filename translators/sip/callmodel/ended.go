package callmodel

import (
	"hash/maphash"
	"slices"
	"time"
)

// An ended call is held for Grace only to absorb late copies of its messages, to number a new
// call on its Call-ID and to be forgotten in order. At a busy proxy's rates those are most of the
// calls held (2,000 calls a second and a 32-second grace: 64,000), and kept as *call records, with
// their strings, times and slices, they were most of what the garbage collector marked in the
// translator's process at every cycle. So a call that ends having seen few messages is buried:
// kept as an endedCall, a record without pointers, in a map keyed by a seeded hash of its
// Call-ID, with its deadline in a heap without pointers either; the collector scans neither. A
// call that saw more messages stays a *call until its grace runs out.

// Bounds of a buried call.
const (
	buriedKeys = 16 // meaning keys a buried call remembers
	buriedRoom = 4  // of which at least this many are free when it is buried, for late copies
)

// callKey identifies a Call-ID in the tracker's tables without pointers: two 64-bit hashes of
// it under the tracker's own random seeds, so that no sender can choose Call-IDs that collide.
type callKey struct{ a, b uint64 }

// keyOf returns the key of a Call-ID.
func (t *Tracker) keyOf(callID string) callKey {
	return callKey{maphash.String(t.seeds[0], callID), maphash.String(t.seeds[1], callID)}
}

// tagHash returns the 64-bit hash a caller's tag is remembered by.
func (t *Tracker) tagHash(tag string) uint64 { return maphash.String(t.seeds[0], tag) }

// endedCall is what the tracker keeps of a buried call.
type endedCall struct {
	forgetAt int64  // when its grace runs out, in Unix nanoseconds
	fromTag  uint64 // tagHash of the caller's tag
	gen      int
	n        int                // keys in seen
	seen     [buriedKeys]uint64 // the meaning keys of the messages seen (wire.key)
}

// burial is a buried call's deadline in the tracker's heap. An entry whose call is no longer
// buried with that deadline (a new call took the Call-ID) is skipped when it comes up.
type burial struct {
	at  int64
	key callKey
	gen int
}

// bury replaces c, which has ended and is held, by a buried record, and reports whether it did:
// a call that saw more than buriedKeys-buriedRoom messages stays as it is.
func (t *Tracker) bury(c *call) bool {
	if !c.ended || c.gone || len(c.seen) > buriedKeys-buriedRoom {
		return false
	}
	e := endedCall{forgetAt: c.forgetAt.UnixNano(), fromTag: t.tagHash(c.fromTag), gen: c.gen, n: len(c.seen)}
	copy(e.seen[:], c.seen)
	k := t.keyOf(c.callID)
	delete(t.calls, c.callID)
	c.gone = true
	t.buried[k] = e
	t.burials.push(burial{e.forgetAt, k, e.gen})
	if len(t.burials) > 2*len(t.buried)+1024 {
		// Entries of calls whose Call-ID a new call took pile up: start again from one per call.
		t.burials = t.burials[:0]
		for k, e := range t.buried {
			t.burials = append(t.burials, burial{e.forgetAt, k, e.gen})
		}
		t.burials.init()
	}
	return true
}

// buriedCall returns the buried record of a Call-ID, if there is one.
func (t *Tracker) buriedCall(k callKey) (endedCall, bool) {
	if len(t.buried) == 0 {
		return endedCall{}, false
	}
	e, ok := t.buried[k]
	return e, ok
}

// seenBuried reports whether the message was seen on the buried call already, and remembers it
// when not and there is room; the caller stores e back.
func (t *Tracker) seenBuried(e *endedCall, w *wire) bool {
	k := w.key()
	if slices.Contains(e.seen[:e.n], k) {
		t.stats.Duplicates++
		return true
	}
	if e.n < buriedKeys {
		e.seen[e.n] = k
		e.n++
	}
	return false
}

// lateToBuried takes an in-dialog request, CANCEL, ACK or response for a Call-ID the tracker
// holds no call for, and reports whether a buried call took it: a copy of a message it saw is
// a duplicate, anything else is ignored, as for an ended call not buried.
func (t *Tracker) lateToBuried(w *wire) bool {
	k := t.keyOf(w.callID)
	e, ok := t.buriedCall(k)
	if !ok {
		return false
	}
	if !t.seenBuried(&e, w) {
		t.buried[k] = e
		t.stats.Ignored++
	}
	return true
}

// liveBurial reports whether b is the deadline of a call still buried.
func (t *Tracker) liveBurial(b burial) bool {
	e, ok := t.buried[b.key]
	return ok && e.forgetAt == b.at && e.gen == b.gen
}

// firstBurial returns the earliest deadline of a call still buried, dropping those of calls
// that are not.
func (t *Tracker) firstBurial() (burial, bool) {
	for len(t.burials) > 0 {
		b := t.burials[0]
		if t.liveBurial(b) {
			return b, true
		}
		t.burials.pop()
	}
	return burial{}, false
}

// forgetBuried forgets the buried call of b, remembering how many calls its Call-ID carried.
func (t *Tracker) forgetBuried(b burial) {
	e := t.buried[b.key]
	delete(t.buried, b.key)
	t.stats.Forgotten++
	t.remember(b.key, e.gen, e.fromTag)
}

// expireBuried forgets the buried calls whose grace ran out as of now.
func (t *Tracker) expireBuried(now time.Time) {
	n := now.UnixNano()
	for {
		b, ok := t.firstBurial()
		if !ok || b.at > n {
			return
		}
		t.burials.pop()
		t.forgetBuried(b)
	}
}

// burials is a min-heap of deadlines by time; it holds no pointers.
type burials []burial

func (h burials) less(i, j int) bool { return h[i].at < h[j].at }

func (h *burials) push(b burial) {
	*h = append(*h, b)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// pop removes the earliest entry; the heap must not be empty.
func (h *burials) pop() {
	s := *h
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	s.down(0)
	*h = s
}

func (h burials) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (h burials) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
