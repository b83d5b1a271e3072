package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/writeq"
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
// 256 events let up to five batches of 50 share a statement, which brings PostgreSQL's cost per
// event near the raw statement's (docs/decisions.md, "PostgreSQL's writes are grouped, up to 32
// writes and 256 events").
const (
	maxGroupWrites = 32
	maxGroupEvents = 256
)

// takeGroup takes the next group from q: the first write waiting, and the later ones of its
// organization and key that share no call with the group, within the bounds. A write that does
// not join is skipped: a later one may.
func takeGroup(q *writeq.Queue) []*writeq.Job {
	var keys map[callKey]bool // the group's calls, made once a second write is considered
	return q.Take(writeq.Bounds{Writes: maxGroupWrites, Events: maxGroupEvents}, func(group []*writeq.Job, j *writeq.Job, fits bool) writeq.Verdict {
		first := group[0]
		if !fits || !joins(first, j) {
			return writeq.Skip
		}
		if keys == nil {
			keys = make(map[callKey]bool, 2*len(first.Write.Calls))
			addKeys(keys, first)
		}
		if addKeys(keys, j) {
			return writeq.Join
		}
		return writeq.Skip
	})
}

// callKey is the key a call is filed under.
type callKey struct{ provider, providerCallID string }

// joins reports whether j may be written with first: the same organization and the same key.
func joins(first, j *writeq.Job) bool {
	a, b := first.Write.Check, j.Write.Check
	return first.Write.OrgID == j.Write.OrgID && (a == nil) == (b == nil) &&
		(a == nil || a.ClientID == b.ClientID && bytes.Equal(a.SecretHash, b.SecretHash))
}

// addKeys adds j's calls to keys and reports true, unless one of them is in keys already (or
// twice in j), when it leaves keys as they were and reports false.
func addKeys(keys map[callKey]bool, j *writeq.Job) bool {
	for i, c := range j.Write.Calls {
		k := callKey{c.Provider, c.ProviderCallID}
		if keys[k] {
			for _, c := range j.Write.Calls[:i] {
				delete(keys, callKey{c.Provider, c.ProviderCallID})
			}
			return false
		}
		keys[k] = true
	}
	return true
}

// writeGrouped queues w and waits for its outcome, writing a group itself whenever it finds a
// free place at the gate. A write that no group has taken within the acquire timeout fails as
// one that got no connection does: the database is overloaded.
func (s *Store) writeGrouped(ctx context.Context, w store.Write) ([]store.CallResult, error) {
	j := writeq.NewJob(ctx, w)
	switch err := s.queue.Await(j, s.gate, s.writeGroup, s.acquireTimeout); {
	case err == nil:
		return j.Res, j.Err
	case errors.Is(err, writeq.ErrNoPlace):
		return nil, fmt.Errorf("postgres: write calls: %w: no database connection within %v", store.ErrUnavailable, s.acquireTimeout)
	default:
		return nil, fmt.Errorf("postgres: write calls: %w", ctxError(err))
	}
}

// writeGroup writes the next group. The caller holds a place at the gate.
func (s *Store) writeGroup() {
	live := writeq.Live(takeGroup(&s.queue), func(_ *writeq.Job, err error) error {
		return fmt.Errorf("postgres: write calls: %w", ctxError(err))
	})
	switch len(live) {
	case 0:
		return
	case 1:
		j := live[0]
		j.Finish(s.write(j.Ctx, j.Write, nil))
		return
	}
	w, received := merge(live)
	ctx, cancel := groupContext(live)
	res, err := s.write(ctx, w, received)
	cancel()
	switch {
	case err == nil:
		for _, j := range live {
			n := len(j.Write.Calls)
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
			j.Finish(s.write(j.Ctx, j.Write, nil))
		}
	}
}

// merge returns the one write of jobs' calls, in their order, and the time each call's write
// arrived. The key check is the group's (joins) at the latest of its writes' times, the
// strictest of them.
func merge(jobs []*writeq.Job) (store.Write, []time.Time) {
	n := 0
	for _, j := range jobs {
		n += len(j.Write.Calls)
	}
	w := store.Write{OrgID: jobs[0].Write.OrgID, ReceivedAt: jobs[0].Write.ReceivedAt, Calls: make([]store.CallWrite, 0, n)}
	received := make([]time.Time, 0, n)
	for _, j := range jobs {
		w.Calls = append(w.Calls, j.Write.Calls...)
		for range j.Write.Calls {
			received = append(received, j.Write.ReceivedAt)
		}
		if c := j.Write.Check; c != nil && (w.Check == nil || c.At.After(w.Check.At)) {
			w.Check = c
		}
	}
	return w, received
}

// groupContext returns the context a group is written under: never cancelled, with the latest
// of its writes' deadlines, or none when one of them has none.
func groupContext(jobs []*writeq.Job) (context.Context, context.CancelFunc) {
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
