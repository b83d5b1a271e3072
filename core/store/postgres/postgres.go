// Package postgres is the production store.Store, on PostgreSQL through a pgx connection pool.
//
// Open a store with Open, create or upgrade its tables with Migrate, then use it from any number
// of goroutines and processes. The tables live in the first schema of the connection's
// search_path, so one database can hold several stores side by side (the tests do that).
//
// WriteCalls sends a whole Write as one pipelined batch in a single implicit transaction: one
// network round trip per request once the connection has prepared its statements. Under load,
// the writes waiting for a place are written together, as one (group.go).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/writeq"
)

// DefaultAcquireTimeout is how long a request waits for a pooled connection when
// Options.AcquireTimeout is zero.
const DefaultAcquireTimeout = 2 * time.Second

// Options tunes the connection pool. The zero value is ready to use.
type Options struct {
	// MaxConns caps the pool's connections, a quarter of which (at least one) write at once. Zero
	// keeps the pool_max_conns parameter of the URL when it has one, otherwise pgxpool's
	// default, the greater of 4 and the number of CPUs.
	MaxConns int32
	// AcquireTimeout bounds how long an operation waits for a connection, the time to dial a new
	// one included, and how long a write waits for a place to write (a quarter of the pool
	// writes at once). An operation that waits longer fails with an error wrapping
	// store.ErrUnavailable. Zero means DefaultAcquireTimeout.
	AcquireTimeout time.Duration
	// ReadURL, when not empty, names a streaming replica of the database (a standby that
	// replays the primary's WAL), in the forms Open accepts. The replica serves the reads that
	// tolerate its lag (see replica.go for the list) from a pool of its own, sized and bounded as
	// the primary's; everything else stays on the primary. Such a read does not promise to see a
	// write that returned before it started. While the replica cannot serve, those reads go to
	// the primary.
	ReadURL string
	// ReadMaxLag, when positive and ReadURL is set, bounds the replica's replay lag: the store
	// measures it every LagInterval (lag.go), and while it is over ReadMaxLag the replica's reads
	// go to the primary and PingReplica fails. Zero measures nothing.
	ReadMaxLag time.Duration
	// LagInterval is how often the replica's lag is measured; zero means DefaultLagInterval.
	LagInterval time.Duration
}

// Store is a store.Store on PostgreSQL. It is safe for concurrent use. Create it with Open.
type Store struct {
	pool *pgxpool.Pool
	// replica is the pool of Options.ReadURL, or nil (replica.go).
	replica        *replica
	acquireTimeout time.Duration
	// oneCall[checked][n] is the one-statement write of one call with n events (oneCallSQL).
	oneCall [2][maxEventRows + 1]string
	// writeParams holds the *params of the writes (writeMany, writeOne) no write is using: at
	// most one per place at the gate, which bounds the writes running (see getWriteParams).
	// readParams are the reads' *params (ringingOne, ringingMany), each used by one read at a
	// time.
	writeParams chan *params
	readParams  sync.Pool
	// queue holds the writes waiting; gate holds a place per write running (group.go).
	queue writeq.Queue
	gate  chan struct{}
}

var _ store.Store = (*Store)(nil)

// Open returns a store on the database named by url, a postgres:// URL or a key=value
// connection string as pgx accepts them (a search_path parameter picks the schema). Open checks
// the URL and the options but does not connect: connections are made when first needed, so a
// database that is down shows up as errors wrapping store.ErrUnavailable from the store's
// methods, Ping included. Open does not create the tables; see Migrate.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.MaxConns < 0 {
		return nil, fmt.Errorf("postgres: open: max conns %d is negative", opts.MaxConns)
	}
	if opts.AcquireTimeout < 0 {
		return nil, fmt.Errorf("postgres: open: acquire timeout %v is negative", opts.AcquireTimeout)
	}
	if opts.ReadMaxLag < 0 || opts.LagInterval < 0 {
		return nil, fmt.Errorf("postgres: open: read max lag %v and lag interval %v may not be negative", opts.ReadMaxLag, opts.LagInterval)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err) // pgx redacts the password
	}
	s, err := openConfig(ctx, cfg, opts)
	if err != nil || opts.ReadURL == "" {
		return s, err
	}
	if s.replica, err = openReplica(ctx, opts.ReadURL, opts); err != nil {
		s.pool.Close()
		return nil, err
	}
	if opts.ReadMaxLag > 0 {
		every := opts.LagInterval
		if every == 0 {
			every = DefaultLagInterval
		}
		s.replica.lag = watchLag(ctx, s.pool, s.replica.pool, opts.ReadMaxLag, every, s.acquireTimeout)
	}
	return s, nil
}

// openConfig is Open on a parsed pool configuration, which it may change.
func openConfig(ctx context.Context, cfg *pgxpool.Config, opts Options) (*Store, error) {
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if cfg.MinConns > cfg.MaxConns {
		cfg.MinConns = cfg.MaxConns
	}
	s := &Store{acquireTimeout: opts.AcquireTimeout}
	s.readParams.New = func() any { return new(params) }
	for n := 1; n <= maxEventRows; n++ {
		s.oneCall[0][n], s.oneCall[1][n] = oneCallSQL(n, false), oneCallSQL(n, true)
	}
	if s.acquireTimeout == 0 {
		s.acquireTimeout = DefaultAcquireTimeout
	}
	// A quarter of the pool writes at once; the rest is left to the reads (a ring's read comes
	// before its write). Writes that wait meanwhile are grouped (group.go), and the fewer write
	// at once the more wait and share a commit (docs/decisions.md, "A quarter of PostgreSQL's pool
	// writes at once").
	s.gate = make(chan struct{}, max(1, cfg.MaxConns/4))
	s.writeParams = make(chan *params, cap(s.gate))
	var err error
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return s, nil
}

// Ping reports whether the database answers now, within the acquire timeout for getting a
// connection. Every failure wraps store.ErrUnavailable, a refused login included, except one
// caused by ctx being cancelled.
func (s *Store) Ping(ctx context.Context) error {
	return s.ping(ctx, s.pool)
}

// ping is Ping on pool.
func (s *Store) ping(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := s.acquireFrom(ctx, pool)
	if err != nil {
		if !errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil {
			return fmt.Errorf("postgres: ping: %w: %w", store.ErrUnavailable, err)
		}
		return fmt.Errorf("postgres: ping: %w", err)
	}
	defer conn.Release()
	if err := conn.Ping(ctx); err != nil {
		if ctx.Err() == nil {
			// Whatever stops a ping from succeeding is the database not serving.
			return fmt.Errorf("postgres: ping: %w: %w", store.ErrUnavailable, err)
		}
		return fmt.Errorf("postgres: ping: %w", classify(ctx, conn, err))
	}
	return nil
}

// Close waits for connections in use to be released, then closes every connection. The store
// must not be used after Close. It always returns nil.
func (s *Store) Close() error {
	if s.replica != nil {
		s.replica.lag.stop()
		s.replica.pool.Close()
	}
	s.pool.Close()
	return nil
}

// acquire takes a connection from the pool, waiting at most the acquire timeout. A failure
// wraps store.ErrUnavailable, unless ctx itself ended first or the server refused the
// connection for a reason that will not pass by itself (bad credentials, no such database).
func (s *Store) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	return s.acquireFrom(ctx, s.pool)
}

// acquireFrom is acquire from pool.
func (s *Store) acquireFrom(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, s.acquireTimeout)
	defer cancel()
	conn, err := pool.Acquire(actx)
	if err == nil {
		return conn, nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, ctxError(cerr)
	}
	if actx.Err() != nil {
		return nil, fmt.Errorf("%w: no database connection within %v: %w", store.ErrUnavailable, s.acquireTimeout, err)
	}
	if code := pgCode(err); code != "" && !isTransientCode(code) {
		// The server refused the connection for good: a wrong password, a missing database.
		return nil, fmt.Errorf("connect: %w", err)
	}
	return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// ctxError returns the error for an operation cut short by its context ending with err. A
// deadline also wraps store.ErrUnavailable: the database did not answer in time, which is the
// overload that callers answer with 503. A cancellation is the caller giving up and wraps only
// context.Canceled.
func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// isTransientCode reports whether code is a SQLSTATE that means "try again later".
func isTransientCode(code string) bool {
	switch code {
	case "40001", // serialization_failure
		"40P01", // deadlock_detected
		"53300", // too_many_connections
		"57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now
		"57014": // query_canceled: a server-side statement_timeout (a cancel of ours is ctx's)
		return true
	}
	return len(code) == 5 && code[:2] == "08" // connection_exception and its kind
}

// classify turns an error from running a statement on conn into what the store returns: a
// transient failure wraps store.ErrUnavailable; a context that ended is reported as such (see
// ctxError); anything else is returned unchanged (PostgreSQL errors stay reachable with
// errors.As). conn may be nil.
func classify(ctx context.Context, conn *pgxpool.Conn, err error) error {
	if conn == nil {
		return classifyConn(ctx, nil, err)
	}
	return classifyConn(ctx, conn.Conn(), err)
}

// classifyConn is classify for a connection outside the pool. conn may be nil.
func classifyConn(ctx context.Context, conn *pgx.Conn, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return ctxError(err)
		}
		return fmt.Errorf("%w: %w", ctxError(cerr), err)
	}
	if errors.Is(err, store.ErrUnavailable) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if isTransientCode(pgErr.Code) {
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
	if isConnectionError(err) || (conn != nil && conn.IsClosed()) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// isConnectionError reports whether err comes from the network or the connection rather than
// from a statement.
func isConnectionError(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// pgCode returns the SQLSTATE of err, or "" when err is not a PostgreSQL error.
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// SQLSTATEs the store maps to contract errors.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
)

// queryRow runs a one-row query on a pooled connection and scans it into dest. No row is
// store.ErrNotFound.
func (s *Store) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if err := conn.QueryRow(ctx, sql, args...).Scan(dest...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		return classify(ctx, conn, err)
	}
	return nil
}

// exec runs a statement on a pooled connection and returns its command tag.
func (s *Store) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer conn.Release()
	tag, err := conn.Exec(ctx, sql, args...)
	return tag, classify(ctx, conn, err)
}

// query runs a query on a pooled connection and hands each row to scan.
func (s *Store) query(ctx context.Context, sql string, args []any, scan func(pgx.Rows) error) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return classify(ctx, conn, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return classify(ctx, conn, rows.Err())
}

// utc returns t in UTC.
func utc(t time.Time) time.Time { return t.UTC() }

// utcPtr returns *t in UTC, or nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nullTime returns nil for the zero time (so that the database default applies), t otherwise.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
