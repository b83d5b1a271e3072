package tap

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/sip/callmodel"
)

var (
	t0   = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) // HEP timestamps
	wall = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) // the tap's clock
	addA = netip.MustParseAddrPort("192.0.2.1:5060")
	addB = netip.MustParseAddrPort("192.0.2.2:5060")
)

// msg is a message named by its payload, captured ms milliseconds after t0, from A to B.
func msg(name string, ms int) callmodel.Message {
	return callmodel.Message{Data: []byte(name), Src: addA, Dst: addB, Transport: "udp", At: t0.Add(time.Duration(ms) * time.Millisecond)}
}

// step is one thing done to the window: push a message arriving at the given time (ms after
// wall), or, with no message, let the clock reach it.
type step struct {
	arrive int
	m      *callmodel.Message
	want   outcome
}

func push(arrive int, m callmodel.Message, want outcome) step {
	return step{arrive: arrive, m: &m, want: want}
}

func tick(at int) step { return step{arrive: at} }

func names(ms []callmodel.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Data)
	}
	return out
}

func TestReorder(t *testing.T) {
	const window = 200 * time.Millisecond
	tests := []struct {
		name     string
		maxHeld  int
		steps    []step
		want     []string // released after the last step (before drain)
		drained  []string // released by drain
		wantHeld int
	}{
		{
			name:  "in order, released after the window",
			steps: []step{push(0, msg("a", 0), held), push(1, msg("b", 1), held), tick(199)},
			want:  nil, drained: []string{"a", "b"}, wantHeld: 2,
		},
		{
			name:  "in order, due",
			steps: []step{push(0, msg("a", 0), held), push(1, msg("b", 1), held), tick(201)},
			want:  []string{"a", "b"},
		},
		{
			name: "out of order within the window is put back in order",
			steps: []step{push(0, msg("c", 30), held), push(5, msg("a", 10), held), push(6, msg("b", 20), held),
				tick(200)},
			want: []string{"a", "b", "c"},
		},
		{
			name: "a due message takes earlier ones with it, later ones wait",
			steps: []step{push(0, msg("b", 20), held), push(100, msg("a", 10), held), push(101, msg("c", 30), held),
				tick(200)},
			want: []string{"a", "b"}, drained: []string{"c"}, wantHeld: 1,
		},
		{
			name:  "equal timestamps keep arrival order",
			steps: []step{push(0, msg("x", 5), held), push(1, msg("y", 5), held), push(2, msg("z", 5), held), tick(300)},
			want:  []string{"x", "y", "z"},
		},
		{
			name: "late message released at once",
			steps: []step{push(0, msg("b", 20), held), tick(250), push(260, msg("a", 10), late),
				push(261, msg("c", 30), held)},
			want: []string{"b", "a"}, drained: []string{"c"}, wantHeld: 1,
		},
		{
			name:  "same timestamp as the last released is not late",
			steps: []step{push(0, msg("a", 20), held), tick(250), push(260, msg("b", 20), held)},
			want:  []string{"a"}, drained: []string{"b"}, wantHeld: 1,
		},
		{
			name: "exact duplicate within the window suppressed",
			steps: []step{push(0, msg("a", 10), held), push(3, msg("a", 11), duplicate), push(4, msg("b", 12), held),
				tick(300)},
			want: []string{"a", "b"},
		},
		{
			name: "duplicate after release still suppressed within the window",
			steps: []step{push(0, msg("a", 10), held), tick(150), push(180, msg("a", 10), duplicate),
				tick(400)},
			want: []string{"a"},
		},
		{
			name: "same bytes after the window are a retransmission, not a duplicate",
			steps: []step{push(0, msg("a", 0), held), tick(250), push(500, msg("a", 500), held),
				tick(800)},
			want: []string{"a", "a"},
		},
		{
			name: "same bytes with timestamps further apart than the window are not duplicates",
			steps: []step{push(0, msg("a", 0), held), push(1, msg("a", 500), held),
				tick(300)},
			want: []string{"a", "a"},
		},
		{
			name: "same bytes between other addresses are not duplicates",
			steps: []step{push(0, msg("a", 0), held),
				push(1, callmodel.Message{Data: []byte("a"), Src: addB, Dst: addA, At: t0.Add(time.Millisecond)}, held),
				tick(300)},
			want: []string{"a", "a"},
		},
		{
			name:    "full window releases its earliest early",
			maxHeld: 2,
			steps: []step{push(0, msg("c", 30), held), push(1, msg("b", 20), held), push(2, msg("a", 10), overflow),
				push(3, msg("d", 40), overflow)},
			want: []string{"a", "b"}, drained: []string{"c", "d"}, wantHeld: 2,
		},
		{
			name:    "after an overflow an older message is late",
			maxHeld: 1,
			steps:   []step{push(0, msg("b", 20), held), push(1, msg("c", 30), overflow), push(2, msg("a", 10), late)},
			want:    []string{"b", "a"}, drained: []string{"c"}, wantHeld: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.maxHeld
			if max == 0 {
				max = 100
			}
			r := newReorder(window, max)
			var got []callmodel.Message
			emit := func(m callmodel.Message) { got = append(got, m) }
			for i, s := range tt.steps {
				now := wall.Add(time.Duration(s.arrive) * time.Millisecond)
				if s.m == nil {
					r.release(now, emit)
					continue
				}
				if o := r.push(*s.m, now, emit); o != s.want {
					t.Errorf("step %d (%s): outcome %d, want %d", i, s.m.Data, o, s.want)
				}
				if r.held() > max {
					t.Errorf("step %d: %d held, over %d", i, r.held(), max)
				}
			}
			if !slices.Equal(names(got), tt.want) {
				t.Errorf("released %q, want %q", names(got), tt.want)
			}
			if r.held() != tt.wantHeld {
				t.Errorf("%d held, want %d", r.held(), tt.wantHeld)
			}
			got = nil
			r.drain(emit)
			if !slices.Equal(names(got), tt.drained) {
				t.Errorf("drained %q, want %q", names(got), tt.drained)
			}
		})
	}
}

// TestReorderNext: next reports when the earliest held message falls due, and nothing once
// every message is released.
func TestReorderNext(t *testing.T) {
	r := newReorder(100*time.Millisecond, 10)
	if _, ok := r.next(); ok {
		t.Fatal("empty window has a deadline")
	}
	var got []callmodel.Message
	emit := func(m callmodel.Message) { got = append(got, m) }
	r.push(msg("b", 20), wall, emit)
	r.push(msg("a", 10), wall.Add(10*time.Millisecond), emit)
	at, ok := r.next()
	if !ok || !at.Equal(wall.Add(100*time.Millisecond)) {
		t.Fatalf("next = %v %v, want %v", at, ok, wall.Add(100*time.Millisecond))
	}
	r.release(at, emit)
	// b was due and a, captured earlier, went with it: nothing is left to wait for.
	if _, ok := r.next(); ok || len(got) != 2 {
		t.Fatalf("after release: next ok=%v, released %q", ok, names(got))
	}
}

// TestReorderTimestampsNeverGoBack feeds many messages with jittered timestamps and arrivals
// and checks that, late ones aside, releases never go back in time and nothing is lost.
func TestReorderTimestampsNeverGoBack(t *testing.T) {
	r := newReorder(100*time.Millisecond, 200)
	var got []callmodel.Message
	emit := func(m callmodel.Message) { got = append(got, m) }
	lateN := 0
	const n = 5000
	for i := range n {
		// capture time i ms, with a jitter of up to ±40 ms (80 ms apart at most, within the
		// window); arrivals 1 ms apart.
		jitter := (i*7919)%81 - 40
		m := callmodel.Message{Data: []byte{byte(i), byte(i >> 8)}, Src: addA, Dst: addB, At: t0.Add(time.Duration(i+jitter) * time.Millisecond)}
		if r.push(m, wall.Add(time.Duration(i)*time.Millisecond), emit) == late {
			lateN++
		}
	}
	r.drain(emit)
	if len(got) != n {
		t.Fatalf("released %d, want %d", len(got), n)
	}
	if lateN != 0 {
		t.Errorf("%d late with a jitter smaller than the window", lateN)
	}
	for i := 1; i < len(got); i++ {
		if got[i].At.Before(got[i-1].At) {
			t.Fatalf("release %d at %v before release %d at %v", i, got[i].At, i-1, got[i-1].At)
		}
	}
}

// TestReorderForgetsDuplicatesBounded: the duplicate memory stays within its bound whatever
// arrives.
func TestReorderForgetsDuplicatesBounded(t *testing.T) {
	r := newReorder(time.Hour, 8)
	emit := func(callmodel.Message) {}
	for i := range 1000 {
		r.push(callmodel.Message{Data: []byte{byte(i), byte(i >> 8)}, At: t0}, wall, emit)
		if len(r.seen) > r.seenMax || len(r.seenLog) > r.seenMax {
			t.Fatalf("after %d: %d remembered, %d logged, bound %d", i, len(r.seen), len(r.seenLog), r.seenMax)
		}
		if r.held() > 8 {
			t.Fatalf("%d held", r.held())
		}
	}
}
