package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
)

// Which pool serves what. With Options.ReadURL set the store holds two pools: the primary's,
// which serves everything by default, and a streaming replica's, which serves only the reads
// that tolerate the replica's lag. This is the one list of them:
//
//	ListCalls       replica  the call history's pages and the CSV export
//	GetCallByID     replica  a call with its events, as the history shows it
//	ListCallbacks   replica  the to-call-back list
//
// Everything else reads and writes the primary: WriteCalls; the dedupe and the ring's read
// (KnownEvents, Ringing), which decide what is written and whether a popup is published; the
// key checks (KeyByClientID, KeyBySecretHash, and the guard of every write); organizations and
// keys, whose methods promise that the next read sees an update (GetOrg also feeds the caller
// lookup, which keeps the settings it reads for a while, so its reads are few); GetCall;
// DismissCallback, CallbackNeedsAnswer and their writes; PurgeCalls; Migrate; Ping.
//
// A replica read sees the primary as of a moment ago, however long replay is behind: a call
// written a moment before may be missing from a page or have fewer events there. When the
// replica cannot serve a read (it is down, refuses connections or the login, or cancelled the
// read for a conflict with recovery), the read is served by the primary instead, and the
// replica is left alone for replicaRetry before a read tries it again; PingReplica reports its
// state. With Options.ReadMaxLag set, the store also measures how far the replica's replay is
// behind the primary (lag.go), and while it is further behind than that, those reads go to the
// primary too: a replica that answers but no longer replays (its primary connection lost, replay
// paused, or held back by a long read) would otherwise serve an ever older history.
const (
	readListCalls     = readOp("list calls")
	readGetCallByID   = readOp("get call by id")
	readListCallbacks = readOp("list callbacks")
)

// readOp names a read that the replica may serve; see the list above.
type readOp string

// replicaRetry is how long reads leave a replica that failed one before trying it again.
const replicaRetry = 5 * time.Second

// replica is the pool of a streaming replica and what reads know of its state.
type replica struct {
	pool *pgxpool.Pool
	// downUntil is the Unix nanosecond time before which reads go to the primary (0: the
	// replica is believed up).
	downUntil atomic.Int64
	// fallbacks counts the reads served by the primary because the replica failed them.
	fallbacks atomic.Int64
	// lag is the replica's replay lag and what the store does with it; nil when not measured.
	lag *lagWatch
}

// openReplica opens the replica's pool on url with opts's pool size. Like Open, it does not
// connect.
func openReplica(ctx context.Context, url string, opts Options) (*replica, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open read url: %w", err) // pgx redacts the password
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if cfg.MinConns > cfg.MaxConns {
		cfg.MinConns = cfg.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open read url: %w", err)
	}
	return &replica{pool: pool}, nil
}

// up reports whether reads should try the replica now: it is believed up and not too far behind.
func (r *replica) up(now time.Time) bool {
	return now.UnixNano() >= r.downUntil.Load() && !r.lag.tooFar()
}

// markDown sends reads to the primary for replicaRetry from now.
func (r *replica) markDown(now time.Time) {
	r.downUntil.Store(now.Add(replicaRetry).UnixNano())
}

// read runs fn on a connection of the pool that serves op: the replica's when the store has
// one and it is believed up, the primary's otherwise. When no connection to the replica can be
// had (whatever the reason: down, overloaded, or refusing the login), or fn fails on it with an
// error wrapping store.ErrUnavailable, and ctx has not ended, the replica is marked down and fn
// runs again on the primary: fn must be safe to run twice. fn returns errors already
// classified (see classify); read's error is fn's, prefixed with the store and op.
func (s *Store) read(ctx context.Context, op readOp, fn func(conn *pgxpool.Conn) error) error {
	if r := s.replica; r != nil && r.up(time.Now()) {
		conn, err := s.acquireFrom(ctx, r.pool)
		if err == nil {
			err = fn(conn)
			conn.Release()
			if err == nil || !errors.Is(err, store.ErrUnavailable) {
				return wrapRead(op, err)
			}
		}
		if ctx.Err() != nil {
			return wrapRead(op, err)
		}
		r.markDown(time.Now())
		r.fallbacks.Add(1)
	}
	conn, err := s.acquire(ctx)
	if err != nil {
		return wrapRead(op, err)
	}
	defer conn.Release()
	return wrapRead(op, fn(conn))
}

// wrapRead prefixes err, when not nil, with the store and op.
func wrapRead(op readOp, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

// HasReplica reports whether the store was opened with a read URL.
func (s *Store) HasReplica() bool { return s.replica != nil }

// PingReplica reports whether the replica answers now, within the acquire timeout, with the
// errors of Ping. A replica that does not answer is marked down, so that reads go to the
// primary at once; one that answers is marked up. One that answers while its replay lag is
// over Options.ReadMaxLag fails with an error that says so (its reads go to the primary until it
// catches up). Without a replica it returns nil.
func (s *Store) PingReplica(ctx context.Context) error {
	r := s.replica
	if r == nil {
		return nil
	}
	err := s.ping(ctx, r.pool)
	if err != nil {
		if ctx.Err() == nil {
			r.markDown(time.Now())
		}
		return fmt.Errorf("replica: %w", err)
	}
	r.downUntil.Store(0)
	if lag, ok := r.lag.current(); ok && r.lag.tooFar() {
		return fmt.Errorf("replica: replay is %v behind the primary, more than the %v allowed", lag.Round(time.Millisecond), r.lag.max)
	}
	return nil
}

// ReplicaFallbacks returns how many reads the primary served because the replica could not,
// since the store was opened: one per failed attempt on the replica, so a replica that is down
// counts once per retry period. Reads sent to the primary while the replica is too far behind
// are not counted here; ReplicaLag tells that state.
func (s *Store) ReplicaFallbacks() int64 {
	if s.replica == nil {
		return 0
	}
	return s.replica.fallbacks.Load()
}

// ReplicaLag returns the replica's replay lag as last measured, and false when it is not
// measured (no replica, Options.ReadMaxLag zero, or no measurement has succeeded yet).
func (s *Store) ReplicaLag() (time.Duration, bool) {
	if s.replica == nil {
		return 0, false
	}
	return s.replica.lag.current()
}
