package sqlite

import (
	"context"
	"fmt"
	"sync"

	"github.com/callwire/callwire/core/store"
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

// Bounds of one group: a group's latency is the sum of its writes'.
const (
	maxGroupWrites = 64
	maxGroupEvents = 64
)

// writeJob is one WriteCalls, queued for the writer.
type writeJob struct {
	ctx  context.Context
	w    store.Write
	res  []store.CallResult
	err  error
	done chan struct{} // closed when res and err are final

	taken bool // a group took the job (under writeQueue.mu)
}

// events returns how many events the job writes.
func (j *writeJob) events() int {
	n := 0
	for i := range j.w.Calls {
		n += len(j.w.Calls[i].Events)
	}
	return n
}

// finish makes the outcome final.
func (j *writeJob) finish(res []store.CallResult, err error) {
	j.res, j.err = res, err
	close(j.done)
}

// writeQueue holds the writes waiting for the writer, in arrival order.
type writeQueue struct {
	mu   sync.Mutex
	jobs []*writeJob
}

func (q *writeQueue) push(j *writeJob) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
}

// take removes and returns the first waiting writes, as many as one group holds (at least one
// when any waits).
func (q *writeQueue) take() []*writeJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, events := 0, 0
	for n < len(q.jobs) && n < maxGroupWrites {
		e := q.jobs[n].events()
		if n > 0 && events+e > maxGroupEvents {
			break
		}
		events += e
		q.jobs[n].taken = true
		n++
	}
	out := append([]*writeJob(nil), q.jobs[:n]...)
	clear(q.jobs[:n])
	q.jobs = q.jobs[n:]
	if len(q.jobs) == 0 {
		q.jobs = nil
	}
	return out
}

// requeue puts jobs, untaken, back at the front of the queue in their order.
func (q *writeQueue) requeue(jobs []*writeJob) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range jobs {
		j.taken = false
	}
	q.jobs = append(append([]*writeJob(nil), jobs...), q.jobs...)
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

// writeGrouped queues j and waits for its outcome, writing a group itself whenever it gets the
// writer first.
func (s *Store) writeGrouped(ctx context.Context, j *writeJob) ([]store.CallResult, error) {
	s.queue.push(j)
	ended := ctx.Done()
	for {
		select {
		case <-j.done:
			return j.res, j.err
		case s.gate <- struct{}{}:
			s.writeGroup(ctx)
			s.release()
		case <-ended:
			if s.queue.withdraw(j) {
				return nil, wrapErr(ctx, "write calls", ctx.Err())
			}
			// A group has it and its outcome is on its way, unless the group could not begin
			// and put it back: keep taking the writer until it is done.
			ended = nil
		}
	}
}

// writeGroup writes the waiting writes in one transaction. The caller holds the gate; ctx is its
// own request's.
func (s *Store) writeGroup(ctx context.Context) {
	var live []*writeJob
	for _, j := range s.queue.take() {
		if err := j.ctx.Err(); err != nil {
			j.finish(nil, wrapErr(j.ctx, "write calls", err))
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	failAll := func(jobs []*writeJob, err error) {
		for _, j := range jobs {
			if j.err == nil {
				j.res, j.err = nil, err
			}
			close(j.done)
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
	tx, err := s.writer.BeginTx(lead.ctx, nil)
	if err != nil {
		if lead.ctx.Err() != nil && len(live) > 1 {
			lead.finish(nil, wrapErr(lead.ctx, "write calls", err))
			s.queue.requeue(live[1:])
			return
		}
		failAll(live, wrapErr(lead.ctx, "write calls", err))
		return
	}
	wctx := context.WithoutCancel(lead.ctx)
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
		res, err := writeCalls(wctx, st, j.w)
		if err != nil {
			j.err = wrapErr(j.ctx, "write calls", err)
			if !grouped {
				_ = tx.Rollback()
				close(j.done)
				return
			}
			if err := savepoint("ROLLBACK TO write"); err != nil {
				abort(fmt.Errorf("rollback to savepoint: %w", err))
				return
			}
		} else {
			j.res = res
		}
		if err := savepoint("RELEASE write"); err != nil {
			abort(fmt.Errorf("release savepoint: %w", err))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		for _, j := range live {
			if j.err == nil {
				j.res, j.err = nil, wrapErr(j.ctx, "write calls", err)
			}
			close(j.done)
		}
		return
	}
	for _, j := range live {
		close(j.done)
	}
}
