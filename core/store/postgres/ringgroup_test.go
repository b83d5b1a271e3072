package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/groupq"
)

// TestTakeReads checks which waiting ring reads a group takes: those of the first one's
// organization and key, within the bounds, in their order; the others keep their places.
func TestTakeReads(t *testing.T) {
	keyA := &store.KeyCheck{ClientID: "a", SecretHash: []byte{1}}
	keyA2 := &store.KeyCheck{ClientID: "a", SecretHash: []byte{1}, At: time.Unix(5, 0)}
	keyB := &store.KeyCheck{ClientID: "b", SecretHash: []byte{2}}
	type spec struct {
		org   string
		check *store.KeyCheck
		refs  int
	}
	for _, tc := range []struct {
		name      string
		queue     []spec
		group     []int // indexes into queue, in order
		remaining []int
	}{
		{"alone", []spec{{"o", keyA, 1}}, []int{0}, nil},
		{"same org and key", []spec{{"o", keyA, 1}, {"o", keyA2, 10}, {"o", keyA, 1}}, []int{0, 1, 2}, nil},
		{"another organization, another key, no key", []spec{{"o", keyA, 1}, {"p", keyA, 1}, {"o", keyB, 1},
			{"o", nil, 1}, {"o", keyA, 1}}, []int{0, 4}, []int{1, 2, 3}},
		{"no key for all", []spec{{"o", nil, 1}, {"o", nil, 2}}, []int{0, 1}, nil},
		{"refs bound", []spec{{"o", keyA, maxGroupRefs * 3 / 8}, {"o", keyA, maxGroupRefs * 3 / 8},
			{"o", keyA, maxGroupRefs * 3 / 8}, {"o", keyA, maxGroupRefs / 4}, {"o", keyA, 1}},
			[]int{0, 1, 3}, []int{2, 4}},
		{"a first read past the bound goes alone", []spec{{"o", keyA, 2 * maxGroupRefs}, {"o", keyA, 1}}, []int{0}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q readQueue
			var jobs []*readJob
			for _, sp := range tc.queue {
				j := groupq.NewJob[ringRead, []store.Ringing](t.Context(),
					ringRead{orgID: sp.org, refs: make([]store.EventRef, sp.refs), check: sp.check})
				jobs = append(jobs, j)
				q.Push(j)
			}
			index := func(js []*readJob) []int {
				var out []int
				for _, j := range js {
					out = append(out, slices.Index(jobs, j))
				}
				return out
			}
			if got := index(takeReads(&q)); !slices.Equal(got, tc.group) {
				t.Errorf("group %v, want %v", got, tc.group)
			}
			if q.Len() != len(tc.remaining) {
				t.Fatalf("%d reads left waiting, want %d", q.Len(), len(tc.remaining))
			}
			if len(tc.remaining) > 0 {
				if got := index(takeReads(&q)); len(got) == 0 || got[0] != tc.remaining[0] {
					t.Errorf("the next group %v does not start with the first read left, %d", got, tc.remaining[0])
				}
			}
		})
	}
	t.Run("many reads", func(t *testing.T) {
		var q readQueue
		for range maxGroupReads + 3 {
			q.Push(groupq.NewJob[ringRead, []store.Ringing](t.Context(), ringRead{orgID: "o", refs: make([]store.EventRef, 1)}))
		}
		if n := len(takeReads(&q)); n != maxGroupReads {
			t.Errorf("a group took %d reads, want %d", n, maxGroupReads)
		}
		if n := q.Len(); n != 3 {
			t.Errorf("%d reads left waiting, want 3", n)
		}
	})
}

// TestReadGroup reads groups of waiting ring reads as one and checks that each read gets its own
// answers, the answers it gets alone; that a read whose key the group's check refuses, and only
// it, is refused; that a read whose request ended is not run; and that a read no group takes is
// withdrawn when its request ends or its wait passes the acquire timeout.
func TestReadGroup(t *testing.T) {
	const timeout = 200 * time.Millisecond
	s, org := openWithOrg(t, Options{AcquireTimeout: timeout})
	check := liveKey(t, s, org)
	base := time.Now().UTC().Truncate(time.Microsecond)
	var calls []store.CallWrite
	for _, id := range []string{"r-a", "r-b"} {
		calls = append(calls, store.CallWrite{ID: uuid.NewString(), Provider: "sip", ProviderCallID: id,
			Direction: "inbound", State: store.StateRinging, BlockAt: base, FirstAt: base, LastAt: base,
			Events: []store.EventWrite{{ID: uuid.NewString(), Type: "call_received", DedupeKey: "call_received:0",
				OccurredAt: base, OrderAt: base, Body: json.RawMessage(`{"type":"call_received"}`)}}})
	}
	if _, err := s.WriteCalls(t.Context(), store.Write{OrgID: org, ReceivedAt: base, Calls: calls, Check: check}); err != nil {
		t.Fatal(err)
	}
	ref := func(call, key string) store.EventRef {
		return store.EventRef{Provider: "sip", ProviderCallID: call, DedupeKey: key}
	}
	known := store.Ringing{Known: true, State: store.StateRinging}
	rang := store.Ringing{State: store.StateRinging} // the call on file, the event not
	// group queues reads and has one reader take them as one group.
	group := func(ctxs []context.Context, reads ...ringRead) []*readJob {
		var jobs []*readJob
		for i, r := range reads {
			ctx := t.Context()
			if i < len(ctxs) && ctxs[i] != nil {
				ctx = ctxs[i]
			}
			j := groupq.NewJob[ringRead, []store.Ringing](ctx, r)
			jobs = append(jobs, j)
			s.reads.Push(j)
		}
		s.readGroup()
		for i, j := range jobs {
			select {
			case <-j.Done():
			default:
				t.Fatalf("read %d has no answer after its group", i)
			}
		}
		return jobs
	}

	t.Run("answers", func(t *testing.T) {
		reads := []ringRead{
			{org, []store.EventRef{ref("r-a", "call_received:0"), ref("r-new", "call_received:0")}, check},
			{org, []store.EventRef{ref("r-b", "call_received:7")}, check},
			{org, []store.EventRef{ref("r-b", "call_received:0"), ref("r-a", "call_received:0"), ref("r-other", "x")}, check},
		}
		want := [][]store.Ringing{{known, {}}, {rang}, {known, known, {}}}
		for i, j := range group(nil, reads...) {
			if j.Err != nil || !slices.Equal(j.Out, want[i]) {
				t.Errorf("read %d: %+v, %v; want %+v", i, j.Out, j.Err, want[i])
			}
			alone, err := s.Ringing(t.Context(), org, reads[i].refs, check)
			if err != nil || !slices.Equal(alone, want[i]) {
				t.Errorf("read %d alone: %+v, %v; want %+v", i, alone, err, want[i])
			}
		}
	})

	t.Run("a key that expired between two reads", func(t *testing.T) {
		expires := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
		k := store.Key{ClientID: "cw_ci_" + uuid.NewString(), OrgID: org, Scopes: []string{"org.calls.events"},
			SecretHash: []byte(uuid.NewString()), SecretLast8: "abcdefgh", CreatedAt: base, ExpiresAt: &expires}
		if err := s.CreateKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
		before := &store.KeyCheck{ClientID: k.ClientID, SecretHash: k.SecretHash, At: expires.Add(-time.Second)}
		after := &store.KeyCheck{ClientID: k.ClientID, SecretHash: k.SecretHash, At: expires.Add(time.Second)}
		jobs := group(nil,
			ringRead{org, []store.EventRef{ref("r-a", "call_received:0")}, before},
			ringRead{org, []store.EventRef{ref("r-b", "call_received:0")}, after},
			ringRead{org, []store.EventRef{ref("r-new", "call_received:0")}, before})
		if len(takeReadsOf(t, jobs)) != 3 {
			t.Fatal("the three reads were not one group")
		}
		if jobs[0].Err != nil || !slices.Equal(jobs[0].Out, []store.Ringing{known}) {
			t.Errorf("the read before the key expired: %+v, %v; want it answered", jobs[0].Out, jobs[0].Err)
		}
		if !errors.Is(jobs[1].Err, store.ErrKeyRejected) || jobs[1].Out != nil {
			t.Errorf("the read after the key expired: %+v, %v; want ErrKeyRejected", jobs[1].Out, jobs[1].Err)
		}
		if jobs[2].Err != nil || !slices.Equal(jobs[2].Out, []store.Ringing{{}}) {
			t.Errorf("the second read before the key expired: %+v, %v; want it answered", jobs[2].Out, jobs[2].Err)
		}
	})

	t.Run("ended before its group", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		jobs := group([]context.Context{nil, ctx},
			ringRead{org, []store.EventRef{ref("r-a", "call_received:0")}, check},
			ringRead{org, []store.EventRef{ref("r-b", "call_received:0")}, check})
		if jobs[0].Err != nil || !slices.Equal(jobs[0].Out, []store.Ringing{known}) {
			t.Errorf("the read beside it: %+v, %v; want it answered", jobs[0].Out, jobs[0].Err)
		}
		if !errors.Is(jobs[1].Err, context.Canceled) {
			t.Errorf("a read whose request ended: %v, want context.Canceled", jobs[1].Err)
		}
	})

	// With every place taken, a read waits in the queue until its request ends or the acquire
	// timeout passes, and then leaves it.
	for range cap(s.readGate) {
		s.readGate <- struct{}{}
	}
	t.Run("withdrawn when its request ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(20*time.Millisecond, cancel)
		_, err := s.Ringing(ctx, org, []store.EventRef{ref("r-a", "call_received:0")}, check)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a read whose request ended while it waited: %v, want context.Canceled", err)
		}
		if n := s.reads.Len(); n != 0 {
			t.Errorf("%d reads left waiting, want none", n)
		}
	})
	t.Run("withdrawn when no place frees", func(t *testing.T) {
		_, err := s.Ringing(t.Context(), org, []store.EventRef{ref("r-a", "call_received:0")}, check)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("a read that found no place within %v: %v, want ErrUnavailable", timeout, err)
		}
		if n := s.reads.Len(); n != 0 {
			t.Errorf("%d reads left waiting, want none", n)
		}
	})
	for range cap(s.readGate) {
		<-s.readGate
	}
	t.Run("a free place", func(t *testing.T) {
		got, err := s.Ringing(t.Context(), org, []store.EventRef{ref("r-a", "call_received:0")}, check)
		if err != nil || !slices.Equal(got, []store.Ringing{known}) {
			t.Errorf("%+v, %v; want it answered", got, err)
		}
	})
}

// takeReadsOf returns the reads of jobs that takeReads puts in one group with the first.
func takeReadsOf(t *testing.T, jobs []*readJob) []*readJob {
	var q readQueue
	for _, j := range jobs {
		q.Push(groupq.NewJob[ringRead, []store.Ringing](t.Context(), j.In))
	}
	return takeReads(&q)
}
