package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/groupq"
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

// A write waits in a writeQueue as a writeJob, for the results of its calls.
type (
	writeJob   = groupq.Job[store.Write, []store.CallResult]
	writeQueue = groupq.Queue[store.Write, []store.CallResult]
)

// newWriteJob returns the job of writing w for a request whose context is ctx.
func newWriteJob(ctx context.Context, w store.Write) *writeJob {
	return groupq.NewJob[store.Write, []store.CallResult](ctx, w)
}

// Bounds of one group: its statement grows with them, and so does the wait of its first write.
// 256 events let up to five batches of 50 share a statement: against 128, PostgreSQL spent 1 to
// 4% more per event than on the raw statement instead of 9 to 17% (docs/benchmarks.md).
const (
	maxGroupWrites = 32
	maxGroupEvents = 256
)

// takeGroup takes the next group from q: the first write waiting, and the later ones of its
// organization and key that share no call with the group, within the bounds.
func takeGroup(q *writeQueue) []*writeJob {
	var keys map[callKey]bool // the group's calls, made once a second write is considered
	events := -1
	return q.Take(func(group []*writeJob, j *writeJob) groupq.Verdict {
		if len(group) >= maxGroupWrites {
			return groupq.Stop
		}
		first := group[0]
		if events < 0 {
			events = first.In.Events()
		}
		if events >= maxGroupEvents || !joins(first, j) {
			return groupq.Skip
		}
		if keys == nil {
			keys = make(map[callKey]bool, 2*len(first.In.Calls))
			addKeys(keys, first)
		}
		if e := j.In.Events(); events+e <= maxGroupEvents && addKeys(keys, j) {
			events += e
			return groupq.Join
		}
		return groupq.Skip
	})
}

// callKey is the key a call is filed under.
type callKey struct{ provider, providerCallID string }

// joins reports whether j may be written with first: the same organization and the same key.
func joins(first, j *writeJob) bool {
	return first.In.OrgID == j.In.OrgID && sameKey(first.In.Check, j.In.Check)
}

// sameKey reports whether a and b check the same key, or are both nil.
func sameKey(a, b *store.KeyCheck) bool {
	return (a == nil) == (b == nil) && (a == nil || a.ClientID == b.ClientID && bytes.Equal(a.SecretHash, b.SecretHash))
}

// addKeys adds j's calls to keys and reports true, unless one of them is in keys already (or
// twice in j), when it leaves keys as they were and reports false.
func addKeys(keys map[callKey]bool, j *writeJob) bool {
	for i, c := range j.In.Calls {
		k := callKey{c.Provider, c.ProviderCallID}
		if keys[k] {
			for _, c := range j.In.Calls[:i] {
				delete(keys, callKey{c.Provider, c.ProviderCallID})
			}
			return false
		}
		keys[k] = true
	}
	return true
}

// writeGrouped queues w and waits for its outcome, writing a group itself whenever it finds a
// free place (awaitGroup).
func (s *Store) writeGrouped(ctx context.Context, w store.Write) ([]store.CallResult, error) {
	j := newWriteJob(ctx, w)
	if err := awaitGroup(ctx, &s.queue, s.gate, s.acquireTimeout, j, s.writeGroup); err != nil {
		return nil, fmt.Errorf("postgres: write calls: %w", err)
	}
	return j.Out, j.Err
}

// awaitGroup queues j on q and waits for its outcome, running the next group itself (run, which
// holds a place at gate while it runs) whenever it finds a place free. Once a group has taken j
// it waits for j's outcome rather than run more groups (going on for places while others are
// free would spin). It returns nil once j has its outcome, in j.Out and j.Err. Otherwise j was
// withdrawn unrun, and the error says why: ctx ended, or no group took j within timeout (an error
// wrapping store.ErrUnavailable, as for a connection not had in time: the database is
// overloaded).
func awaitGroup[In, Out any](ctx context.Context, q *groupq.Queue[In, Out], gate chan struct{}, timeout time.Duration, j *groupq.Job[In, Out], run func()) error {
	q.Push(j)
	// runs, called holding a place, runs the next group, gives the place back, and reports
	// whether j has its outcome.
	runs := func() bool {
		run()
		<-gate
		if !q.Taken(j) {
			return false
		}
		<-j.Done()
		return true
	}
	select {
	case gate <- struct{}{}:
		if runs() {
			return nil
		}
	default:
	}
	wait := time.NewTimer(timeout)
	defer wait.Stop()
	ended, expired := ctx.Done(), wait.C
	for {
		select {
		case <-j.Done():
			return nil
		case gate <- struct{}{}:
			if runs() {
				return nil
			}
		case <-ended:
			if q.Withdraw(j) {
				return ctxError(ctx.Err())
			}
			ended = nil // a group has it, and its outcome is on its way
		case <-expired:
			if q.Withdraw(j) {
				return fmt.Errorf("%w: no database connection within %v", store.ErrUnavailable, timeout)
			}
			expired = nil
		}
	}
}

// startable returns the jobs of group whose requests have not ended; the others it finishes with
// their context's error, as the operation op.
func startable[In, Out any](group []*groupq.Job[In, Out], op string) []*groupq.Job[In, Out] {
	live := group[:0]
	for _, j := range group {
		if err := j.Ctx.Err(); err != nil {
			var none Out
			j.Finish(none, fmt.Errorf("postgres: %s: %w", op, ctxError(err)))
			continue
		}
		live = append(live, j)
	}
	return live
}

// writeGroup writes the next group. The caller holds a place at the gate.
func (s *Store) writeGroup() {
	live := startable(takeGroup(&s.queue), "write calls")
	switch len(live) {
	case 0:
		return
	case 1:
		j := live[0]
		j.Finish(s.write(j.Ctx, j.In, nil))
		return
	}
	w, received := merge(live)
	ctx, cancel := groupContext(live)
	res, err := s.write(ctx, w, received)
	cancel()
	switch {
	case err == nil:
		for _, j := range live {
			n := len(j.In.Calls)
			j.Finish(res[:n:n], nil)
			res = res[n:]
		}
	case errors.Is(err, store.ErrUnavailable):
		for _, j := range live {
			j.Finish(nil, err)
		}
	default:
		// Nothing of the group is on file; whichever write is at fault fails alone.
		for _, j := range live {
			j.Finish(s.write(j.Ctx, j.In, nil))
		}
	}
}

// merge returns the one write of jobs' calls, in their order, and the time each call's write
// arrived. The key check is the group's (joins) at the latest of its writes' times, the
// strictest of them.
func merge(jobs []*writeJob) (store.Write, []time.Time) {
	n := 0
	for _, j := range jobs {
		n += len(j.In.Calls)
	}
	w := store.Write{OrgID: jobs[0].In.OrgID, ReceivedAt: jobs[0].In.ReceivedAt, Calls: make([]store.CallWrite, 0, n)}
	received := make([]time.Time, 0, n)
	for _, j := range jobs {
		w.Calls = append(w.Calls, j.In.Calls...)
		for range j.In.Calls {
			received = append(received, j.In.ReceivedAt)
		}
		if c := j.In.Check; c != nil && (w.Check == nil || c.At.After(w.Check.At)) {
			w.Check = c
		}
	}
	return w, received
}

// groupContext returns the context a group runs under: never cancelled, with the latest of its
// jobs' deadlines, or none when one of them has none.
func groupContext[In, Out any](jobs []*groupq.Job[In, Out]) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(jobs[0].Ctx)
	var latest time.Time
	for _, j := range jobs {
		d, ok := j.Ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(ctx, latest)
}
