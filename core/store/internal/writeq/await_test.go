package writeq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/callwire/callwire/core/store"
)

// jobOf returns a job named name (its organization) writing one call with events events.
func jobOf(ctx context.Context, name string, events int) *Job {
	return NewJob(ctx, store.Write{OrgID: name, Calls: []store.CallWrite{{ProviderCallID: name, Events: make([]store.EventWrite, events)}}})
}

// TestTakeBoundsModel takes groups from random queues under random bounds, with the two kinds of
// rule the stores use (a write that does not fit is skipped, or it ends the group), and checks
// what a group is: the first write waiting and later ones in their order, never more than
// Bounds.Writes, never more events than Bounds.Events unless the first write is alone, the rule
// told truly whether each write fits, and every write left out was left for a reason (no room,
// it did not fit, or the rule's); the writes left keep their order and places.
func TestTakeBoundsModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		b := Bounds{Writes: 1 + rng.IntN(6), Events: rng.IntN(12)}
		skipping := trial%2 == 0 // else a write that does not fit ends the group
		var q Queue
		var jobs []*Job
		for i := range rng.IntN(12) {
			// Names starting with 'o' are of another organization, which the rule skips.
			name := fmt.Sprint("w", i)
			if rng.IntN(4) == 0 {
				name = fmt.Sprint("o", i)
			}
			j := jobOf(t.Context(), name, rng.IntN(5))
			jobs = append(jobs, j)
			q.Push(j)
		}
		var bad []string
		group := q.Take(b, func(group []*Job, next *Job, fits bool) Verdict {
			n := 0
			for _, j := range group {
				n += j.Events()
			}
			if len(group) >= b.Writes || fits != (n+next.Events() <= b.Events) {
				bad = append(bad, fmt.Sprintf("asked about %s with %d writes and %d events taken: fits %v", next.Write.OrgID, len(group), n, fits))
			}
			switch {
			case next.Write.OrgID[0] == 'o':
				return Skip
			case fits:
				return Join
			case skipping:
				return Skip
			}
			return Stop
		})
		what := fmt.Sprintf("trial %d (bounds %+v, skipping %v)", trial, b, skipping)
		for _, m := range bad {
			t.Errorf("%s: rule %s", what, m)
		}
		if len(jobs) == 0 {
			if group != nil {
				t.Errorf("%s: an empty queue gave %d writes", what, len(group))
			}
			continue
		}
		if group[0] != jobs[0] || len(group) > b.Writes && len(group) > 1 {
			t.Fatalf("%s: group of %d writes, first %s", what, len(group), group[0].Write.OrgID)
		}
		total := 0
		for _, j := range group {
			total += j.Events()
		}
		if len(group) > 1 && total > b.Events {
			t.Errorf("%s: a group of %d writes holds %d events", what, len(group), total)
		}
		// Walk the queue: each write is in the group or left, in order, and each left was left
		// for a reason.
		var left []*Job
		gi, events, stopped := 0, 0, false
		for _, j := range jobs {
			in := gi < len(group) && group[gi] == j
			if q.Taken(j) != in {
				t.Errorf("%s: %s taken %v, in the group %v", what, j.Write.OrgID, q.Taken(j), in)
			}
			if in {
				gi++
				events += j.Events()
				if stopped {
					t.Errorf("%s: %s joined after the group ended", what, j.Write.OrgID)
				}
				continue
			}
			left = append(left, j)
			fits := events+j.Events() <= b.Events
			switch {
			case stopped, j.Write.OrgID[0] == 'o':
			case gi >= b.Writes:
				stopped = true
			case fits:
				t.Errorf("%s: %s fits but was left", what, j.Write.OrgID)
			case !skipping:
				stopped = true
			}
		}
		if gi != len(group) {
			t.Errorf("%s: the group is not in the queue's order", what)
		}
		if q.Len() != len(left) || !slices.Equal(q.jobs, left) {
			t.Errorf("%s: %d left in the queue, want %d in their order", what, q.Len(), len(left))
		}
	}
}

// TestLive: the jobs whose request has ended get the error made for them and are left out; the
// others keep their order.
func TestLive(t *testing.T) {
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	group := []*Job{jobOf(t.Context(), "a", 1), jobOf(ended, "b", 1), jobOf(t.Context(), "c", 1)}
	live := Live(group, func(j *Job, err error) error { return fmt.Errorf("%s: %w", j.Write.OrgID, err) })
	if names(live) != "a c" {
		t.Errorf("live %q, want \"a c\"", names(live))
	}
	select {
	case <-group[1].Done():
		if !errors.Is(group[1].Err, context.Canceled) || group[1].Err.Error() != "b: context canceled" {
			t.Errorf("ended job's error %v", group[1].Err)
		}
	default:
		t.Error("the ended job has no outcome")
	}
}

// TestAwaitEachWriteItsOwnOutcome runs many writers at once through a gate of a few places and a
// writer that gives each write of a group its own outcome, some of them failing alone, some
// requests ending on the way. Every write gets exactly its own outcome, or is withdrawn with
// its request's error and never written; every write is written at most once; no more writers
// work at once than the gate has places.
func TestAwaitEachWriteItsOwnOutcome(t *testing.T) {
	const writers, places = 200, 3
	var q Queue
	gate := make(chan struct{}, places)
	var (
		mu      sync.Mutex
		written = map[*Job]int{}
		working atomic.Int32
		most    atomic.Int32
	)
	write := func() {
		n := working.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		defer working.Add(-1)
		group := Live(q.Take(Bounds{Writes: 8, Events: 20}, func(_ []*Job, _ *Job, fits bool) Verdict {
			if fits {
				return Join
			}
			return Skip
		}), func(_ *Job, err error) error { return err })
		for _, j := range group {
			mu.Lock()
			written[j]++
			mu.Unlock()
			var err error
			if j.Write.OrgID[0] == 'f' {
				err = errors.New(j.Write.OrgID)
			}
			j.Finish([]store.CallResult{{ID: j.Write.OrgID}}, err)
		}
	}
	jobs := make([]*Job, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		name := fmt.Sprint("w", i)
		if i%7 == 0 {
			name = fmt.Sprint("f", i) // fails alone
		}
		ctx := t.Context()
		if i%5 == 0 {
			c, cancel := context.WithCancel(ctx)
			ctx = c
			time.AfterFunc(time.Duration(i%3)*time.Millisecond, cancel)
		}
		jobs[i] = jobOf(ctx, name, 1+i%4)
		wg.Go(func() { errs[i] = q.Await(jobs[i], gate, write, 0) })
	}
	wg.Wait()
	if m := most.Load(); m > places {
		t.Errorf("%d writers at once through %d places", m, places)
	}
	if q.Len() != 0 {
		t.Errorf("%d writes left in the queue", q.Len())
	}
	for i, j := range jobs {
		name := j.Write.OrgID
		switch {
		case errs[i] != nil:
			if !errors.Is(errs[i], context.Canceled) || j.Ctx.Err() == nil {
				t.Errorf("%s: withdrawn with %v", name, errs[i])
			}
			if written[j] != 0 {
				t.Errorf("%s: withdrawn, yet written %d times", name, written[j])
			}
		case written[j] == 0: // its request ended before its group wrote
			if !errors.Is(j.Err, context.Canceled) {
				t.Errorf("%s: not written, outcome %v", name, j.Err)
			}
		default:
			if written[j] != 1 {
				t.Errorf("%s: written %d times", name, written[j])
			}
			if len(j.Res) != 1 || j.Res[0].ID != name {
				t.Errorf("%s: result %+v, not its own", name, j.Res)
			}
			if failed := name[0] == 'f'; failed != (j.Err != nil) || failed && j.Err.Error() != name {
				t.Errorf("%s: error %v", name, j.Err)
			}
		}
	}
}

// TestAwaitWritesAloneAtOnce: a write that finds a place free and nothing waiting is written by
// its own caller, alone.
func TestAwaitWritesAloneAtOnce(t *testing.T) {
	var q Queue
	j := jobOf(t.Context(), "a", 1)
	var groups [][]*Job
	write := func() {
		g := q.Take(roomy(), func([]*Job, *Job, bool) Verdict { return Join })
		groups = append(groups, g)
		for _, j := range g {
			j.Finish(nil, nil)
		}
	}
	if err := q.Await(j, make(chan struct{}, 1), write, 0); err != nil || len(groups) != 1 || names(groups[0]) != "a" {
		t.Errorf("Await: %v, groups %d", err, len(groups))
	}
}

// TestAwaitWithdraws: a write waiting for a place is withdrawn unwritten when its request ends
// (with the request's error) or when its patience runs out (with ErrNoPlace).
func TestAwaitWithdraws(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q Queue
		gate := make(chan struct{}, 1)
		gate <- struct{}{} // every place is taken
		write := func() { t.Error("written while no place was free") }

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- q.Await(jobOf(ctx, "a", 1), gate, write, 0) }()
		synctest.Wait()
		if q.Len() != 1 {
			t.Fatalf("%d waiting, want 1", q.Len())
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) || q.Len() != 0 {
			t.Errorf("ended request: %v, %d left waiting", err, q.Len())
		}

		start := time.Now()
		if err := q.Await(jobOf(t.Context(), "b", 1), gate, write, time.Second); !errors.Is(err, ErrNoPlace) || q.Len() != 0 {
			t.Errorf("patience ran out: %v, %d left waiting", err, q.Len())
		}
		if waited := time.Since(start); waited != time.Second {
			t.Errorf("gave up after %v, want 1s", waited)
		}
	})
}

// TestAwaitKeepsATakenWrite: a write a group has taken is not withdrawn when its request ends:
// Await returns once the group gives it its outcome.
func TestAwaitKeepsATakenWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q Queue
		gate := make(chan struct{}, 1)
		gate <- struct{}{}
		proceed := make(chan struct{})
		write := func() {
			g := q.Take(roomy(), func([]*Job, *Job, bool) Verdict { return Join })
			<-proceed
			for _, j := range g {
				j.Finish([]store.CallResult{{ID: j.Write.OrgID}}, nil)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		a, b := jobOf(t.Context(), "a", 1), jobOf(ctx, "b", 1)
		errs := make(chan error, 2)
		go func() { errs <- q.Await(a, gate, write, 0) }()
		synctest.Wait()
		go func() { errs <- q.Await(b, gate, write, 0) }()
		synctest.Wait()
		<-gate // a place frees: one of them takes both
		synctest.Wait()
		if !q.Taken(a) || !q.Taken(b) {
			t.Fatalf("taken: a %v, b %v; want both", q.Taken(a), q.Taken(b))
		}
		cancel()
		synctest.Wait()
		close(proceed)
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("Await: %v", err)
			}
		}
		if b.Err != nil || len(b.Res) != 1 || b.Res[0].ID != "b" {
			t.Errorf("b's outcome %+v, %v", b.Res, b.Err)
		}
	})
}
