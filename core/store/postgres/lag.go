package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Replay lag. PostgreSQL tells a standby's position in the primary's WAL, not its age, and the
// usual age, now() - pg_last_xact_replay_timestamp() on the standby, grows while the primary
// writes nothing and says nothing once the standby stops receiving. So the store measures lag
// against the primary itself: every lagInterval it notes the primary's WAL position with the
// time, and reads how far the replica has replayed. The lag is the age of the oldest noted
// position the replica has not replayed yet, zero when it has replayed them all: a primary that
// writes nothing leaves nothing to replay, and a replica that stops receiving grows older by
// the clock. The measure is at most one interval short of the truth.

// DefaultLagInterval is how often the store measures the replica's lag when
// Options.LagInterval is zero.
const DefaultLagInterval = time.Second

// maxLagMarks bounds the positions kept while a replica is behind: once that many are waiting,
// new ones are not noted, and the oldest, which the lag is measured from, stays.
const maxLagMarks = 4096

// lagMark is the primary's WAL position at a moment.
type lagMark struct {
	at  time.Time
	lsn int64
}

// lagWatch measures a replica's replay lag in the background and says whether it is over max.
// The nil *lagWatch measures nothing and is never too far behind.
type lagWatch struct {
	max time.Duration
	// lag is the last measured lag in nanoseconds, -1 before the first measurement succeeds.
	lag    atomic.Int64
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// watchLag starts measuring the lag of the replica pool behind primary every interval, until
// stop; reads go to the primary while it is over max.
func watchLag(ctx context.Context, primary, replica *pgxpool.Pool, max, interval time.Duration, timeout time.Duration) *lagWatch {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &lagWatch{max: max, cancel: cancel}
	w.lag.Store(-1)
	w.done.Add(1)
	go func() {
		defer w.done.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		var marks []lagMark
		for {
			marks = w.measure(ctx, primary, replica, marks, timeout)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// measure notes the primary's position, reads the replica's, and stores the lag; marks are the
// positions not yet replayed, oldest first, and measure returns them updated. A measurement
// that cannot be made (either server down or slow) changes nothing: the reads' own fallback
// deals with a replica that does not answer.
func (w *lagWatch) measure(ctx context.Context, primary, replica *pgxpool.Pool, marks []lagMark, timeout time.Duration) []lagMark {
	at := time.Now()
	if lsn, ok := walPosition(ctx, primary, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`, timeout); ok {
		if n := len(marks); (n == 0 || marks[n-1].lsn < lsn) && n < maxLagMarks {
			marks = append(marks, lagMark{at: at, lsn: lsn})
		}
	}
	replayed, ok := walPosition(ctx, replica, `SELECT coalesce(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint, -1)`, timeout)
	if !ok {
		return marks
	}
	if replayed < 0 {
		// Not a standby (the read URL names a primary): it has every write.
		marks = marks[:0]
	}
	i := 0
	for i < len(marks) && marks[i].lsn <= replayed {
		i++
	}
	marks = append(marks[:0], marks[i:]...)
	var lag time.Duration
	if len(marks) > 0 {
		lag = time.Since(marks[0].at)
	}
	w.lag.Store(int64(lag))
	return marks
}

// walPosition runs query, which returns one bigint, on pool within timeout.
func walPosition(ctx context.Context, pool *pgxpool.Pool, query string, timeout time.Duration) (int64, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var v int64
	err := pool.QueryRow(ctx, query).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false
	}
	return v, err == nil
}

// current returns the last measured lag, and false when none has been measured.
func (w *lagWatch) current() (time.Duration, bool) {
	if w == nil {
		return 0, false
	}
	v := w.lag.Load()
	return time.Duration(v), v >= 0
}

// tooFar reports whether the last measured lag is over max.
func (w *lagWatch) tooFar() bool {
	lag, ok := w.current()
	return ok && lag > w.max
}

// stop ends the measuring and waits for it.
func (w *lagWatch) stop() {
	if w == nil {
		return
	}
	w.cancel()
	w.done.Wait()
}
