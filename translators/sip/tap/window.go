package tap

import (
	"container/heap"
	"hash/maphash"
	"net/netip"
	"time"

	"github.com/callwire/callwire/translators/sip/callmodel"
)

// outcome is what the reorder window did with one message given to push.
type outcome int

const (
	held      outcome = iota // kept, to be released in timestamp order
	duplicate                // an exact copy of a message seen within the window: dropped
	late                     // older than a message already released: released at once
	overflow                 // held, but the window was full: its earliest message was released early
)

// item is one held message.
type item struct {
	msg      callmodel.Message
	seq      uint64    // arrival order, the tie-break between equal timestamps
	deadline time.Time // when it has been held for the whole window (arrival + window)
	released bool
	index    int // position in the heap
}

// before orders items by HEP timestamp, then by arrival.
func (a *item) before(b *item) bool {
	if !a.msg.At.Equal(b.msg.At) {
		return a.msg.At.Before(b.msg.At)
	}
	return a.seq < b.seq
}

// byTime is a min-heap of held items by (At, seq).
type byTime []*item

func (h byTime) Len() int           { return len(h) }
func (h byTime) Less(i, j int) bool { return h[i].before(h[j]) }
func (h byTime) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *byTime) Push(x any) {
	it := x.(*item)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *byTime) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

// dupKey identifies a message for exact-duplicate suppression: the same payload bytes between
// the same two addresses.
type dupKey struct {
	sum      uint64
	size     int
	src, dst netip.AddrPort
}

// seenEntry remembers one message for duplicate suppression until expires.
type seenEntry struct {
	key     dupKey
	at      time.Time // its HEP timestamp
	expires time.Time // arrival + window
}

// reorder is the tap's reorder window, a pure type: no goroutines, no clock of its own (every
// method is given the time now). Each message is held for the window after it arrives and is
// released in HEP-timestamp order (ties: arrival order). A message is released before its own
// window ends when a message with a later timestamp is due, so that releases never go back in
// time; a message with a timestamp older than the last one released is released at once (late).
// An exact copy (same payload, same source and destination, timestamps within the window of each
// other) of a message that arrived within the window is dropped. At most maxHeld messages are
// held: a message beyond that releases the earliest held one early. The window remembers at
// most 4×maxHeld messages for duplicate suppression, forgetting the oldest first.
type reorder struct {
	window  time.Duration
	maxHeld int

	heap    byTime
	arrived []*item // held or released items in arrival order, until their deadline passes
	seq     uint64
	dueMax  *item // the latest (by before) item whose deadline has passed; nil when none

	lastAt time.Time // timestamp of the last released message
	anyOut bool

	seed    maphash.Seed
	seen    map[dupKey]time.Time // key to the HEP timestamp of its latest copy
	seenLog []seenEntry          // in arrival order, for expiry
	seenMax int
}

// newReorder returns a window of the given length holding at most maxHeld messages
// (both must be positive).
func newReorder(window time.Duration, maxHeld int) *reorder {
	return &reorder{
		window:  window,
		maxHeld: maxHeld,
		seed:    maphash.MakeSeed(),
		seen:    make(map[dupKey]time.Time),
		seenMax: 4 * maxHeld,
	}
}

// held returns how many messages the window holds.
func (r *reorder) held() int { return len(r.heap) }

// push gives the window one message that arrived at now, after releasing what is due at now.
// Released messages go to emit, in order.
func (r *reorder) push(m callmodel.Message, now time.Time, emit func(callmodel.Message)) outcome {
	r.release(now, emit)
	if r.isDuplicate(m, now) {
		return duplicate
	}
	r.seq++
	it := &item{msg: m, seq: r.seq, deadline: now.Add(r.window)}
	if r.anyOut && (m.At.Before(r.lastAt)) {
		r.out(it, emit)
		return late
	}
	heap.Push(&r.heap, it)
	r.arrived = append(r.arrived, it)
	if len(r.heap) > r.maxHeld {
		r.out(heap.Pop(&r.heap).(*item), emit)
		return overflow
	}
	return held
}

// isDuplicate reports whether m is an exact copy of a message seen within the window, and
// remembers m otherwise.
func (r *reorder) isDuplicate(m callmodel.Message, now time.Time) bool {
	for len(r.seenLog) > 0 && (!now.Before(r.seenLog[0].expires) || len(r.seenLog) >= r.seenMax) {
		e := r.seenLog[0]
		r.seenLog[0] = seenEntry{}
		r.seenLog = r.seenLog[1:]
		if at, ok := r.seen[e.key]; ok && at.Equal(e.at) {
			delete(r.seen, e.key)
		}
	}
	k := dupKey{sum: maphash.Bytes(r.seed, m.Data), size: len(m.Data), src: m.Src, dst: m.Dst}
	if at, ok := r.seen[k]; ok {
		d := m.At.Sub(at)
		if d < 0 {
			d = -d
		}
		if d <= r.window {
			return true
		}
	}
	r.seen[k] = m.At
	r.seenLog = append(r.seenLog, seenEntry{key: k, at: m.At, expires: now.Add(r.window)})
	return false
}

// release emits, in timestamp order, every held message that is due at now, and every held
// message with an earlier timestamp than a due one.
func (r *reorder) release(now time.Time, emit func(callmodel.Message)) {
	for len(r.arrived) > 0 && !now.Before(r.arrived[0].deadline) {
		it := r.arrived[0]
		r.arrived[0] = nil
		r.arrived = r.arrived[1:]
		if !it.released && (r.dueMax == nil || r.dueMax.before(it)) {
			r.dueMax = it
		}
	}
	for len(r.heap) > 0 && r.dueMax != nil && !r.dueMax.before(r.heap[0]) {
		r.out(heap.Pop(&r.heap).(*item), emit)
	}
	if len(r.arrived) == 0 {
		r.arrived = nil // let the backing array go
	}
}

// drain emits every held message in timestamp order, whatever its deadline.
func (r *reorder) drain(emit func(callmodel.Message)) {
	for len(r.heap) > 0 {
		r.out(heap.Pop(&r.heap).(*item), emit)
	}
	clear(r.arrived)
	r.arrived = nil
	r.dueMax = nil
}

// next returns when the next held message falls due, and false when none is held. Messages
// released early are forgotten from the front of the arrival queue on the way, so that repeated
// calls do not walk over them again.
func (r *reorder) next() (time.Time, bool) {
	for len(r.arrived) > 0 && r.arrived[0].released {
		r.arrived[0] = nil
		r.arrived = r.arrived[1:]
	}
	for _, it := range r.arrived {
		if !it.released {
			return it.deadline, true
		}
	}
	r.arrived = nil
	return time.Time{}, false
}

// out releases one item.
func (r *reorder) out(it *item, emit func(callmodel.Message)) {
	it.released = true
	m := it.msg
	it.msg = callmodel.Message{} // an item kept in arrived must not keep the payload alive
	if !r.anyOut || r.lastAt.Before(m.At) {
		r.lastAt = m.At
	}
	r.anyOut = true
	if r.dueMax == it {
		r.dueMax = nil
	}
	emit(m)
}
