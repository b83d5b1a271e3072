package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/groupq"
)

// Ring reads in groups. Every request that holds a call_received reads, before anything is
// stored, whether its events are on file (Ringing): a statement, a snapshot and a round trip of
// its own, whose cost under a load of batches was most of what PostgreSQL spent on the service
// beyond the raw statement's rows (docs/benchmarks.md). So, as writes do (group.go), at most
// Store.readGate's capacity ring reads run at once; Ringing queues its read, and whoever starts
// next reads every waiting read that can join the first one waiting (same organization, same key,
// within maxGroupReads and maxGroupRefs) in one statement. A read that finds a free place and
// nothing waiting runs alone at once, so an idle service pays nothing for this, and a popup
// waits for no one.
//
// Answers stay each read's own. The group's key check runs at the latest of its reads' times,
// the strictest of them. When the group's read fails for a reason that may be one read's own (a
// key that expired between two reads' times, for instance), each read runs again alone, with the
// answer it would have had alone; a failure of the database itself (store.ErrUnavailable) is
// every read's. A read whose request ends before a group takes it is not run.

// ringRead is one request's ring read: the events it asks about, for its organization, under
// its key check (nil for none).
type ringRead struct {
	orgID string
	refs  []store.EventRef
	check *store.KeyCheck
}

// A ring read waits in a readQueue as a readJob, for its answers.
type (
	readJob   = groupq.Job[ringRead, []store.Ringing]
	readQueue = groupq.Queue[ringRead, []store.Ringing]
)

// Bounds of one group of reads: the statement's arrays grow with them. A bulk request asks
// about 10 events; a ring, about one.
const (
	maxGroupReads = 32
	maxGroupRefs  = 256
)

// readPlaces is how many ring reads run at once in a pool of maxConns connections: a quarter of
// it, at least one. Half the pool writes (Store.gate); the rest serves everything else.
func readPlaces(maxConns int32) int { return int(max(1, maxConns/4)) }

// takeReads takes the next group of reads from q: the first read waiting, and the later ones of
// its organization and key, within the bounds.
func takeReads(q *readQueue) []*readJob {
	refs := -1
	return q.Take(func(group []*readJob, j *readJob) groupq.Verdict {
		if len(group) >= maxGroupReads {
			return groupq.Stop
		}
		first := group[0].In
		if refs < 0 {
			refs = len(first.refs)
		}
		if refs+len(j.In.refs) > maxGroupRefs || j.In.orgID != first.orgID || !sameKey(first.check, j.In.check) {
			return groupq.Skip
		}
		refs += len(j.In.refs)
		return groupq.Join
	})
}

// ringingGrouped queues r and waits for its answers, reading a group itself whenever it finds a
// free place (awaitGroup).
func (s *Store) ringingGrouped(ctx context.Context, r ringRead) ([]store.Ringing, error) {
	j := groupq.NewJob[ringRead, []store.Ringing](ctx, r)
	if err := awaitGroup(ctx, &s.reads, s.readGate, s.acquireTimeout, j, s.readGroup); err != nil {
		return nil, fmt.Errorf("postgres: ringing: %w", err)
	}
	return j.Out, j.Err
}

// readGroup reads the next group. The caller holds a place at the read gate.
func (s *Store) readGroup() {
	live := startable(takeReads(&s.reads), "ringing")
	switch len(live) {
	case 0:
		return
	case 1:
		j := live[0]
		j.Finish(s.ringing(j.Ctx, j.In))
		return
	}
	ctx, cancel := groupContext(live)
	out, err := s.ringing(ctx, mergeReads(live))
	cancel()
	switch {
	case err == nil:
		for _, j := range live {
			n := len(j.In.refs)
			j.Finish(out[:n:n], nil)
			out = out[n:]
		}
	case errors.Is(err, store.ErrUnavailable):
		for _, j := range live {
			j.Finish(nil, err)
		}
	default:
		// Whichever read is at fault fails alone.
		for _, j := range live {
			j.Finish(s.ringing(j.Ctx, j.In))
		}
	}
}

// mergeReads returns the one read of jobs' refs, in their order, under the key check at the
// latest of their times. The jobs share an organization and a key (takeReads).
func mergeReads(jobs []*readJob) ringRead {
	n := 0
	for _, j := range jobs {
		n += len(j.In.refs)
	}
	r := ringRead{orgID: jobs[0].In.orgID, refs: make([]store.EventRef, 0, n)}
	for _, j := range jobs {
		r.refs = append(r.refs, j.In.refs...)
		if c := j.In.check; c != nil && (r.check == nil || c.At.After(r.check.At)) {
			r.check = c
		}
	}
	return r
}
