package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/writeq"
)

// TestTakeGroups checks which waiting writes a group takes: those of the first one's
// organization and key with no call in common with the group, within the bounds, in their order;
// the others keep their places.
func TestTakeGroups(t *testing.T) {
	keyA := &store.KeyCheck{ClientID: "a", SecretHash: []byte{1}}
	keyA2 := &store.KeyCheck{ClientID: "a", SecretHash: []byte{1}, At: time.Unix(5, 0)}
	keyB := &store.KeyCheck{ClientID: "b", SecretHash: []byte{2}}
	type spec struct {
		org    string
		check  *store.KeyCheck
		calls  []string // providerCallIds
		events int      // per call
	}
	for _, tc := range []struct {
		name      string
		queue     []spec
		group     []int // indexes into queue, in order
		remaining []int
	}{
		{"alone", []spec{{"o", keyA, []string{"x"}, 1}}, []int{0}, nil},
		{"same org and key", []spec{{"o", keyA, []string{"x"}, 1}, {"o", keyA2, []string{"y"}, 1}, {"o", keyA, []string{"z"}, 3}},
			[]int{0, 1, 2}, nil},
		{"another organization, another key, no key", []spec{{"o", keyA, []string{"x"}, 1}, {"p", keyA, []string{"y"}, 1},
			{"o", keyB, []string{"z"}, 1}, {"o", nil, []string{"w"}, 1}, {"o", keyA, []string{"v"}, 1}},
			[]int{0, 4}, []int{1, 2, 3}},
		{"no key for all", []spec{{"o", nil, []string{"x"}, 1}, {"o", nil, []string{"y"}, 1}}, []int{0, 1}, nil},
		{"a call in common waits", []spec{{"o", keyA, []string{"x", "y"}, 1}, {"o", keyA, []string{"z", "y"}, 1},
			{"o", keyA, []string{"z"}, 1}, {"o", keyA, []string{"z"}, 1}},
			[]int{0, 2}, []int{1, 3}},
		{"a write with one call twice waits", []spec{{"o", keyA, []string{"x"}, 1}, {"o", keyA, []string{"y", "y"}, 1},
			{"o", keyA, []string{"y"}, 1}},
			[]int{0, 2}, []int{1}},
		{"events bound", []spec{{"o", keyA, []string{"a"}, maxGroupEvents * 3 / 8}, {"o", keyA, []string{"b"}, maxGroupEvents * 3 / 8},
			{"o", keyA, []string{"c"}, maxGroupEvents * 3 / 8}, {"o", keyA, []string{"d"}, maxGroupEvents / 4}, {"o", keyA, []string{"e"}, 1}},
			[]int{0, 1, 3}, []int{2, 4}},
		{"a first write past the bound goes alone", []spec{{"o", keyA, []string{"a"}, 2 * maxGroupEvents}, {"o", keyA, []string{"b"}, 1}},
			[]int{0}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q writeq.Queue
			var jobs []*writeq.Job
			for _, sp := range tc.queue {
				w := store.Write{OrgID: sp.org, Check: sp.check}
				for _, id := range sp.calls {
					w.Calls = append(w.Calls, store.CallWrite{Provider: "sip", ProviderCallID: id, Events: make([]store.EventWrite, sp.events)})
				}
				j := writeq.NewJob(t.Context(), w)
				jobs = append(jobs, j)
				q.Push(j)
			}
			index := func(js []*writeq.Job) []int {
				var out []int
				for _, j := range js {
					out = append(out, slices.Index(jobs, j))
				}
				return out
			}
			if got := index(takeGroup(&q)); !slices.Equal(got, tc.group) {
				t.Errorf("group %v, want %v", got, tc.group)
			}
			var left []int
			for i, j := range jobs {
				if q.Taken(j) != slices.Contains(tc.group, i) {
					t.Errorf("write %d taken %v", i, q.Taken(j))
				}
				if !q.Taken(j) {
					left = append(left, i)
				}
			}
			if n := q.Len(); n != len(tc.remaining) || !slices.Equal(left, tc.remaining) {
				t.Errorf("left waiting %v (%d), want %v", left, n, tc.remaining)
			}
			if got := index(takeGroup(&q)); len(tc.remaining) > 0 && (len(got) == 0 || got[0] != tc.remaining[0]) {
				t.Errorf("the next group %v does not start with the first write left, %d", got, tc.remaining[0])
			}
		})
	}
	t.Run("many writes", func(t *testing.T) {
		var q writeq.Queue
		for i := range maxGroupWrites + 3 {
			q.Push(writeq.NewJob(t.Context(), store.Write{OrgID: "o", Calls: []store.CallWrite{{ProviderCallID: fmt.Sprint(i)}}}))
		}
		if n := len(takeGroup(&q)); n != maxGroupWrites {
			t.Errorf("a group took %d writes, want %d", n, maxGroupWrites)
		}
		if n := q.Len(); n != 3 {
			t.Errorf("%d writes left waiting, want 3", n)
		}
	})
}

// TestWriteGroup writes groups of waiting writes as one and checks that each write gets its own
// outcome: its calls' results, its own received time on its events, and, when one write of the
// group is at fault, an error of its own while the others are stored.
func TestWriteGroup(t *testing.T) {
	s, org := openWithOrg(t, Options{})
	check := liveKey(t, s, org)
	base := time.Now().UTC().Truncate(time.Microsecond)
	write := func(received time.Time, calls ...string) store.Write {
		w := store.Write{OrgID: org, ReceivedAt: received, Check: check}
		for _, id := range calls {
			w.Calls = append(w.Calls, store.CallWrite{Provider: "sip", ProviderCallID: id,
				Direction: "inbound", State: store.StateRinging, BlockAt: base, FirstAt: base, LastAt: base,
				Events: []store.EventWrite{{ID: uuid.NewString(), Type: "call_received", DedupeKey: "call_received:0",
					OccurredAt: base, OrderAt: base, Body: json.RawMessage(`{"type":"call_received"}`)}}})
		}
		return w
	}
	// group queues the writes and has one writer take them as one group.
	group := func(ws ...store.Write) []*writeq.Job {
		var jobs []*writeq.Job
		for _, w := range ws {
			j := writeq.NewJob(t.Context(), w)
			jobs = append(jobs, j)
			s.queue.Push(j)
		}
		s.writeGroup()
		for i, j := range jobs {
			select {
			case <-j.Done():
			default:
				t.Fatalf("write %d has no outcome after its group", i)
			}
		}
		return jobs
	}

	t.Run("stored", func(t *testing.T) {
		ws := []store.Write{write(base, "g1-a", "g1-b"), write(base.Add(time.Millisecond), "g1-c"), write(base.Add(2*time.Millisecond), "g1-d")}
		for i, j := range group(ws...) {
			if j.Err != nil {
				t.Fatalf("write %d: %v", i, j.Err)
			}
			if len(j.Res) != len(ws[i].Calls) {
				t.Fatalf("write %d: %d results for %d calls", i, len(j.Res), len(ws[i].Calls))
			}
			for k, r := range j.Res {
				c := ws[i].Calls[k]
				if r.ID != store.CallID(org, c.Provider, c.ProviderCallID) || !r.Created || len(r.Events) != 1 || r.Events[0].ID != c.Events[0].ID || r.Events[0].Duplicate {
					t.Errorf("write %d call %s: result %+v", i, c.ProviderCallID, r)
				}
				_, events, err := s.GetCall(t.Context(), org, "sip", c.ProviderCallID)
				if err != nil {
					t.Fatal(err)
				}
				if len(events) != 1 || !events[0].ReceivedAt.Equal(ws[i].ReceivedAt) {
					t.Errorf("write %d call %s: events %+v, want one received at %v", i, c.ProviderCallID, events, ws[i].ReceivedAt)
				}
			}
		}
	})

	t.Run("resent as a group", func(t *testing.T) {
		ws := []store.Write{write(base, "g2-a"), write(base, "g2-b")}
		group(ws...)
		for i, j := range group(ws...) {
			if j.Err != nil {
				t.Fatalf("write %d: %v", i, j.Err)
			}
			r := j.Res[0]
			if r.ID != store.CallID(org, "sip", ws[i].Calls[0].ProviderCallID) || r.Created || !r.Events[0].Duplicate || r.Events[0].ID != ws[i].Calls[0].Events[0].ID {
				t.Errorf("write %d resent: result %+v, want the call and its event on file", i, r)
			}
		}
	})

	t.Run("one write at fault", func(t *testing.T) {
		taken := write(base, "g3-taken")
		if _, err := s.WriteCalls(t.Context(), taken); err != nil {
			t.Fatal(err)
		}
		bad := write(base, "g3-b")
		bad.Calls[0].Events[0].ID = taken.Calls[0].Events[0].ID // an event ID on file for another call
		jobs := group(write(base, "g3-a"), bad, write(base, "g3-c"))
		if !errors.Is(jobs[1].Err, store.ErrConflict) {
			t.Errorf("the write whose event ID is taken: %v, want ErrConflict", jobs[1].Err)
		}
		for _, i := range []int{0, 2} {
			if jobs[i].Err != nil || !jobs[i].Res[0].Created {
				t.Errorf("write %d beside it: %+v, %v; want it stored", i, jobs[i].Res, jobs[i].Err)
			}
		}
		if _, _, err := s.GetCall(t.Context(), org, "sip", "g3-b"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the refused write's call: %v, want ErrNotFound (nothing of it on file)", err)
		}
	})

	t.Run("ended before its group", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		j := writeq.NewJob(ctx, write(base, "g4-a"))
		s.queue.Push(j)
		s.writeGroup()
		<-j.Done()
		if !errors.Is(j.Err, context.Canceled) {
			t.Errorf("a write whose request ended: %v, want context.Canceled", j.Err)
		}
		if _, _, err := s.GetCall(t.Context(), org, "sip", "g4-a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("its call: %v, want ErrNotFound", err)
		}
	})
}
