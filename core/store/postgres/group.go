package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/callwire/callwire/core/store"
)

// Group writes. Every write is a statement, a commit and a round trip of its own, and under load
// most of what PostgreSQL spends on a report of one or two events is that, not its rows. So at
// most Store.gate's capacity writes run at once; WriteCalls queues its write, and whoever starts
// next writes every waiting write that can join the first one waiting (same organization, same
// key, no call in common, within maxGroupWrites and maxGroupEvents) as one write: one statement,
// one transaction. A write that finds a free place and nothing waiting is written alone at once,
// as before, so an idle service pays nothing for this.
//
// Outcomes stay each write's own. When a group's write fails for a reason that may be one of its
// writes' own (a key no longer live, an organization not on file, an ID taken), nothing of the
// group is on file, and each write is then sent alone, with the outcome it would have had alone.
// A failure of the database itself (store.ErrUnavailable) is every write's, and is returned to
// each without sending them again. A write whose context ends before a group takes it is not
// written; once taken, it runs with its group until every write of the group has given up (the
// group's deadline is its writes' latest).

// Bounds of one group: its statement grows with them, and so does the wait of its first write.
// 256 events let up to five batches of 50 share a statement: against 128, PostgreSQL spent 1 to
// 4% more per event than on the raw statement instead of 9 to 17% (docs/benchmarks.md).
const (
	maxGroupWrites = 32
	maxGroupEvents = 256
)

// writeJob is one WriteCalls, queued.
type writeJob struct {
	ctx  context.Context
	w    store.Write
	res  []store.CallResult
	err  error
	done chan struct{} // closed when res and err are final

	taken bool // a group took the job (under writeQueue.mu)
}

// finish makes the outcome final.
func (j *writeJob) finish(res []store.CallResult, err error) {
	j.res, j.err = res, err
	close(j.done)
}

// events returns how many events the job writes.
func (j *writeJob) events() int {
	n := 0
	for i := range j.w.Calls {
		n += len(j.w.Calls[i].Events)
	}
	return n
}

// callKey is the key a call is filed under.
type callKey struct{ provider, providerCallID string }

// writeQueue holds the writes waiting, in arrival order.
type writeQueue struct {
	mu   sync.Mutex
	jobs []*writeJob
}

func (q *writeQueue) push(j *writeJob) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
}

// take removes and returns the first waiting write and every later one that can join it, in
// their order; nil when none waits. The others keep their places.
func (q *writeQueue) take() []*writeJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) == 0 {
		return nil
	}
	first := q.jobs[0]
	first.taken = true
	group := []*writeJob{first}
	events := first.events()
	var keys map[callKey]bool // the group's calls, made once a second write is considered
	kept := q.jobs[:0]
	for _, j := range q.jobs[1:] {
		if len(group) < maxGroupWrites && events < maxGroupEvents && joins(first, j) {
			if keys == nil {
				keys = make(map[callKey]bool, 2*len(first.w.Calls))
				addKeys(keys, first)
			}
			if e := j.events(); events+e <= maxGroupEvents && addKeys(keys, j) {
				group = append(group, j)
				events += e
				j.taken = true
				continue
			}
		}
		kept = append(kept, j)
	}
	clear(q.jobs[len(kept):])
	q.jobs = kept
	return group
}

// joins reports whether j may be written with first: the same organization and the same key.
func joins(first, j *writeJob) bool {
	a, b := first.w.Check, j.w.Check
	return first.w.OrgID == j.w.OrgID && (a == nil) == (b == nil) &&
		(a == nil || a.ClientID == b.ClientID && bytes.Equal(a.SecretHash, b.SecretHash))
}

// addKeys adds j's calls to keys and reports true, unless one of them is in keys already (or
// twice in j), when it leaves keys as they were and reports false.
func addKeys(keys map[callKey]bool, j *writeJob) bool {
	for i, c := range j.w.Calls {
		k := callKey{c.Provider, c.ProviderCallID}
		if keys[k] {
			for _, c := range j.w.Calls[:i] {
				delete(keys, callKey{c.Provider, c.ProviderCallID})
			}
			return false
		}
		keys[k] = true
	}
	return true
}

// isTaken reports whether a group has taken j.
func (q *writeQueue) isTaken(j *writeJob) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return j.taken
}

// withdraw removes j and reports true when no group has taken it.
func (q *writeQueue) withdraw(j *writeJob) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if j.taken {
		return false
	}
	for i, x := range q.jobs {
		if x == j {
			q.jobs = append(q.jobs[:i], q.jobs[i+1:]...)
			return true
		}
	}
	return false
}

// writeGrouped queues w and waits for its outcome, writing a group itself whenever it finds a
// free place. A write that no group has taken within the acquire timeout fails as one that got
// no connection does: the database is overloaded.
func (s *Store) writeGrouped(ctx context.Context, w store.Write) ([]store.CallResult, error) {
	j := &writeJob{ctx: ctx, w: w, done: make(chan struct{})}
	s.queue.push(j)
	// write takes a place, writes the next group and reports whether j's outcome is final or on
	// its way (going on for places while others are free would spin).
	write := func() bool {
		s.writeGroup()
		<-s.gate
		return s.queue.isTaken(j)
	}
	select {
	case s.gate <- struct{}{}:
		if write() {
			<-j.done
			return j.res, j.err
		}
	default:
	}
	wait := time.NewTimer(s.acquireTimeout)
	defer wait.Stop()
	ended, expired := ctx.Done(), wait.C
	for {
		select {
		case <-j.done:
			return j.res, j.err
		case s.gate <- struct{}{}:
			if write() {
				<-j.done
				return j.res, j.err
			}
		case <-ended:
			if s.queue.withdraw(j) {
				return nil, fmt.Errorf("postgres: write calls: %w", ctxError(ctx.Err()))
			}
			ended = nil // a group has it, and its outcome is on its way
		case <-expired:
			if s.queue.withdraw(j) {
				return nil, fmt.Errorf("postgres: write calls: %w: no database connection within %v", store.ErrUnavailable, s.acquireTimeout)
			}
			expired = nil
		}
	}
}

// writeGroup writes the next group. The caller holds a place at the gate.
func (s *Store) writeGroup() {
	var live []*writeJob
	for _, j := range s.queue.take() {
		if err := j.ctx.Err(); err != nil {
			j.finish(nil, fmt.Errorf("postgres: write calls: %w", ctxError(err)))
			continue
		}
		live = append(live, j)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		j := live[0]
		j.finish(s.write(j.ctx, j.w, nil))
		return
	}
	w, received := merge(live)
	ctx, cancel := groupContext(live)
	res, err := s.write(ctx, w, received)
	cancel()
	switch {
	case err == nil:
		for _, j := range live {
			n := len(j.w.Calls)
			j.finish(res[:n:n], nil)
			res = res[n:]
		}
	case errors.Is(err, store.ErrUnavailable):
		for _, j := range live {
			j.finish(nil, err)
		}
	default:
		// Nothing of the group is on file; whichever write is at fault fails alone.
		for _, j := range live {
			j.finish(s.write(j.ctx, j.w, nil))
		}
	}
}

// merge returns the one write of jobs' calls, in their order, and the time each call's write
// arrived. The key check is the group's (joins) at the latest of its writes' times, the
// strictest of them.
func merge(jobs []*writeJob) (store.Write, []time.Time) {
	n := 0
	for _, j := range jobs {
		n += len(j.w.Calls)
	}
	w := store.Write{OrgID: jobs[0].w.OrgID, ReceivedAt: jobs[0].w.ReceivedAt, Calls: make([]store.CallWrite, 0, n)}
	received := make([]time.Time, 0, n)
	for _, j := range jobs {
		w.Calls = append(w.Calls, j.w.Calls...)
		for range j.w.Calls {
			received = append(received, j.w.ReceivedAt)
		}
		if c := j.w.Check; c != nil && (w.Check == nil || c.At.After(w.Check.At)) {
			w.Check = c
		}
	}
	return w, received
}

// groupContext returns the context a group is written under: never cancelled, with the latest
// of its writes' deadlines, or none when one of them has none.
func groupContext(jobs []*writeJob) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(jobs[0].ctx)
	var latest time.Time
	for _, j := range jobs {
		d, ok := j.ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(ctx, latest)
}
