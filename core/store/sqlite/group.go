package sqlite

import (
	"context"
	"fmt"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/writeq"
)

// Group commit. SQLite has one writer, and with synchronous=FULL every commit writes its pages
// to the WAL and syncs it: at the rates of many small requests (a ring, an answer) the commit was
// a quarter of the server's CPU and what bounded its throughput. So WriteCalls queues its write;
// whoever takes the writer connection next writes every write waiting (up to maxGroupWrites and
// maxGroupEvents) in one transaction, each inside a savepoint of its own, and commits once.
//
// Each write keeps its own outcome and its own atomicity: one that fails (its key was revoked,
// its organization does not exist) is rolled back to its savepoint and fails alone, the others
// go on. If the transaction itself cannot begin or commit, nothing of any write is on file and
// each fails with that error. A write whose context ends before the group starts on it is not
// written and fails with ErrUnavailable; once started it runs to its end with the group (no
// statement of the group is interrupted, as SQLite would then roll the whole transaction back).
// Writes run in the order they were queued, as the gate admitted them before.

// Bounds of one group: a group's latency is the sum of its writes'. A batch may hold 50 events,
// so a group holds up to five of them: at 64 events each batch was a group of its own, and a
// sync of its own, and the writer spent as long waiting on syncs as the raw ceiling's one
// transaction a request (docs/decisions.md, "The embedded store commits in groups of up to 64
// writes and 256 events"). The latency of a full group is a few milliseconds.
const (
	maxGroupWrites = 64
	maxGroupEvents = 256
)

// takeGroup takes the next group from q: the writes waiting first, as many as one group holds
// (at least one when any waits). The first write that does not fit ends the group, so that
// writes run in the order they were queued.
func takeGroup(q *writeq.Queue) []*writeq.Job {
	return q.Take(writeq.Bounds{Writes: maxGroupWrites, Events: maxGroupEvents}, func(_ []*writeq.Job, _ *writeq.Job, fits bool) writeq.Verdict {
		if fits {
			return writeq.Join
		}
		return writeq.Stop
	})
}

// writeGrouped queues j and waits for its outcome, writing a group itself whenever it gets the
// writer first.
func (s *Store) writeGrouped(ctx context.Context, j *writeq.Job) ([]store.CallResult, error) {
	if err := s.queue.Await(j, s.gate, func() { s.writeGroup(ctx) }, 0); err != nil {
		return nil, wrapErr(ctx, "write calls", err)
	}
	return j.Res, j.Err
}

// writeGroup writes the waiting writes in one transaction. The caller holds the gate; ctx is its
// own request's.
func (s *Store) writeGroup(ctx context.Context) {
	live := writeq.Live(takeGroup(&s.queue), func(j *writeq.Job, err error) error {
		return wrapErr(j.Ctx, "write calls", err)
	})
	if len(live) == 0 {
		return
	}
	failAll := func(jobs []*writeq.Job, err error) {
		for _, j := range jobs {
			if j.Err == nil {
				j.Res, j.Err = nil, err
			}
			j.Close()
		}
	}
	// Preparing waits for nothing (the gate's holder has the writer connection to itself), and
	// the writes queued must not fail because the request that happens to hold the gate ended.
	if err := s.stmts.prepare(context.WithoutCancel(ctx), s.writer); err != nil {
		failAll(live, wrapErr(ctx, "write calls", err))
		return
	}
	// Beginning takes the file's write lock, which another process may hold: that wait is the
	// first write's to give up, and the others then wait for the next group.
	lead := live[0]
	tx, err := s.writer.BeginTx(lead.Ctx, nil)
	if err != nil {
		if lead.Ctx.Err() != nil && len(live) > 1 {
			lead.Finish(nil, wrapErr(lead.Ctx, "write calls", err))
			s.queue.Requeue(live[1:])
			return
		}
		failAll(live, wrapErr(lead.Ctx, "write calls", err))
		return
	}
	wctx := context.WithoutCancel(lead.Ctx)
	st := s.stmts.bind(wctx, tx)
	abort := func(err error) {
		_ = tx.Rollback()
		failAll(live, wrapErr(wctx, "write calls", err))
	}
	// A lone write needs no savepoint: its failure rolls the transaction back.
	grouped := len(live) > 1
	savepoint := func(stmt string) error {
		if !grouped {
			return nil
		}
		_, err := tx.ExecContext(wctx, stmt)
		return err
	}
	for _, j := range live {
		if err := savepoint("SAVEPOINT write"); err != nil {
			abort(fmt.Errorf("savepoint: %w", err))
			return
		}
		res, err := writeCalls(wctx, st, j.Write)
		if err != nil {
			j.Err = wrapErr(j.Ctx, "write calls", err)
			if !grouped {
				_ = tx.Rollback()
				j.Close()
				return
			}
			if err := savepoint("ROLLBACK TO write"); err != nil {
				abort(fmt.Errorf("rollback to savepoint: %w", err))
				return
			}
		} else {
			j.Res = res
		}
		if err := savepoint("RELEASE write"); err != nil {
			abort(fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		for _, j := range live {
			if j.Err == nil {
				j.Res, j.Err = nil, wrapErr(j.Ctx, "write calls", err)
			}
			j.Close()
		}
		return
	}
	s.checkpoints.committed()
	for _, j := range live {
		j.Close()
	}
}
