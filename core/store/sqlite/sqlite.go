// Package sqlite is the embedded store.Store: one SQLite file on local disk, through the pure-Go
// driver modernc.org/sqlite. It is what callwire uses when no database is configured.
//
// The file is opened in WAL mode with synchronous=FULL, so a write that returned has reached the
// disk and survives power loss. Writes go through one connection, taken in arrival order; reads use
// a separate pool and never wait for writes.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/writeq"
)

//go:embed migrations/*.sql
var migrations embed.FS

// busyTimeout is how long a connection waits for a lock another process holds before the
// operation fails with store.ErrUnavailable.
const busyTimeout = 5 * time.Second

// The page caches' sizes, in KiB, as SQLite is told them: the writer's, the checkpointer's
// (which holds little more than the schema: a checkpoint copies pages without caching them), and
// the readers', shared equally among them, each reader's share at least minReaderCacheKiB. In
// memory each takes cacheSlotFactor times that, so the caches take 6 MiB in all with up to 8
// readers.
const (
	writerCacheKiB       = 1024 - checkpointerCacheKiB
	checkpointerCacheKiB = 64
	readersCacheKiB      = 2048
	minReaderCacheKiB    = 256
)

// cacheSlotFactor is what a full page cache takes in memory over its size: SQLite's allocator
// here (modernc.org/memory) serves a request from a slot of the next power of two up to 16 KiB,
// and a cached page is its 4,096 bytes plus SQLite's header for it, so it lands in a slot of
// 8,192 (docs/decisions.md, "The server's memory").
const cacheSlotFactor = 2

// readerCacheKiB returns each reader's page cache, in KiB, when there are n readers.
func readerCacheKiB(n int) int64 {
	return max(minReaderCacheKiB, readersCacheKiB/int64(n))
}

// Store is the SQLite store.Store. It is safe for concurrent use by many goroutines; several
// processes may share the file, in which case their writes wait for one another up to a busy
// timeout. Create it with Open.
type Store struct {
	// writer holds the one connection all writes use.
	writer *sql.DB
	// gate admits writers to the writer connection one at a time, in the order they arrived.
	gate chan struct{}
	// queue holds the WriteCalls waiting to be written in a group (group.go).
	queue writeq.Queue
	// reader is the pool reads use.
	reader *sql.DB
	// cacheBytes is the most the page caches of the writer and the readers take.
	cacheBytes int64
	// stmts are the writer connection's prepared statements, prepared on first use. Only the
	// holder of gate touches them.
	stmts writeStmts
	// reads are the reader pool's prepared statements of the hot read paths, by text, prepared
	// on first use: preparing a statement was more than a tenth of a request's CPU.
	readsMu sync.Mutex
	reads   map[string]*sql.Stmt

	// ringingTexts[k] is ringingSQL(1<<k), the ring's read of a run of refs, written once: the
	// reader pool's statements are found by their text.
	ringingTexts [maxRowsLog + 1]string
	// checkedRingingTexts[k] is checkedRingingSQL(1<<k), the same read guarded by a key check.
	checkedRingingTexts [maxRowsLog + 1]string

	// checkpoints copies the WAL's pages into the database file, beside the writes.
	checkpoints *checkpointer

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens the database file at path, creating it and its parent directory when missing. It does
// not apply migrations; call Migrate before first use. The caller must Close the store.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite: open: empty path")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("sqlite: open %q: path must not contain '?'", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}

	ms := busyTimeout.Milliseconds()
	writerParams := url.Values{
		"_busy_timeout": {fmt.Sprint(ms)},
		"_journal_mode": {"WAL"},
		"_synchronous":  {"FULL"},
		"_foreign_keys": {"1"},
		"_txlock":       {"immediate"},
		// temp_store=MEMORY keeps each statement's journal in memory. A statement that may
		// fail partway inside a transaction (a multi-row insert, with its constraints)
		// journals the pages it changes so that its failure undoes only itself; with the
		// default, that journal spills to a temporary file past 64 KiB, and a batch's
		// inserts spent a tenth of the writer's time creating, writing and closing such files.
		// A statement's journal holds at most the pages that one statement changes, a run of
		// at most 64 rows, so it stays small.
		"_pragma": {fmt.Sprintf("cache_size(-%d)", writerCacheKiB), "temp_store(MEMORY)"},
	}
	checkpointParams := url.Values{
		"_busy_timeout": {fmt.Sprint(ms)},
		"_synchronous":  {"FULL"},
		"_pragma":       {fmt.Sprintf("cache_size(-%d)", checkpointerCacheKiB)},
	}
	// One reader per core, at least four, sharing their page cache.
	n := max(4, runtime.GOMAXPROCS(0))
	perReader := readerCacheKiB(n)
	readerParams := url.Values{
		"_busy_timeout": {fmt.Sprint(ms)},
		"_foreign_keys": {"1"},
		"_query_only":   {"1"},
		// 512 KiB of page cache per reader with four of them (SQLite's default is 2 MiB): the
		// reads are point lookups by key, whose pages (the indexes' upper levels) the caches
		// keep, and the file's pages are in the system's cache anyway. It keeps the server
		// within its memory target.
		"_pragma": {fmt.Sprintf("cache_size(-%d)", perReader)},
	}

	writer, err := sql.Open("sqlite", abs+"?"+writerParams.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	oneConnection(writer)

	// The writer connection comes first: it creates the file and switches it to WAL, which
	// every later connection then finds in place.
	var mode string
	if err := writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		writer.Close()
		return nil, wrapErr(ctx, fmt.Sprintf("open %q", path), err)
	}
	if !strings.EqualFold(mode, "wal") {
		writer.Close()
		return nil, fmt.Errorf("sqlite: open %q: journal mode is %q, want wal", path, mode)
	}

	reader, err := sql.Open("sqlite", abs+"?"+readerParams.Encode())
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	reader.SetMaxOpenConns(n)
	reader.SetMaxIdleConns(n)

	checkpoints, err := sql.Open("sqlite", abs+"?"+checkpointParams.Encode())
	if err != nil {
		writer.Close()
		reader.Close()
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	oneConnection(checkpoints)

	cache := cacheSlotFactor * (writerCacheKiB + checkpointerCacheKiB + int64(n)*perReader) << 10
	s := &Store{writer: writer, reader: reader, cacheBytes: cache, gate: make(chan struct{}, 1)}
	for k := range s.ringingTexts {
		s.ringingTexts[k] = ringingSQL(1 << k)
		s.checkedRingingTexts[k] = checkedRingingSQL(1 << k)
	}
	s.checkpoints = startCheckpointer(ctx, checkpoints)
	return s, nil
}

// oneConnection makes db a pool of one connection, never closed for its age or while idle: the
// writer and the checkpointer each work on one connection of their own.
func oneConnection(db *sql.DB) {
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
}

// CacheBudget returns the most memory, in bytes, that the store's page caches take once full:
// SQLite's memory, which the Go runtime neither sees nor counts against its memory limit.
func (s *Store) CacheBudget() int64 {
	return s.cacheBytes
}

// Migrate applies every embedded migration the database has not had yet. It is safe to call on
// an up-to-date database, where it does nothing.
func (s *Store) Migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.writer, sub)
	if err != nil {
		return fmt.Errorf("sqlite: migrate: %w", err)
	}
	if err := s.acquire(ctx); err != nil {
		return wrapErr(ctx, "migrate", err)
	}
	defer s.release()
	// The statements are prepared against the schema, so they go before it changes.
	s.stmts.close()
	s.closeReads()
	// A migration's statement may change every page of a table, and its journal would then
	// hold the table in memory: migrations journal to temporary files, as SQLite does by
	// default, and the writes that follow in memory again.
	//
	// Foreign keys are off while migrations run, as SQLite's procedure for changing a table asks:
	// a migration that rebuilds a table others refer to drops the old table and renames its copy
	// in its place, and with them on the drop would first delete the old table's rows, which the
	// rows referring to them forbid. Such a migration checks the references itself before it
	// commits (migration 9).
	for _, pragma := range []string{"PRAGMA temp_store = FILE", "PRAGMA foreign_keys = OFF"} {
		if _, err := s.writer.ExecContext(ctx, pragma); err != nil {
			return wrapErr(ctx, "migrate", err)
		}
	}
	_, err = p.Up(ctx)
	for _, pragma := range []string{"PRAGMA temp_store = MEMORY", "PRAGMA foreign_keys = ON"} {
		if _, rerr := s.writer.ExecContext(context.WithoutCancel(ctx), pragma); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return wrapErr(ctx, "migrate", err)
	}
	return nil
}

// Ping reports whether the database can be read now.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.reader.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return wrapErr(ctx, "ping", err)
	}
	return nil
}

// Close closes the database. A write in progress finishes first; calls made after Close fail.
// Closing again does nothing and returns the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.gate <- struct{}{}
		defer s.release()
		s.stmts.close()
		s.closeReads()
		s.closeErr = errors.Join(s.checkpoints.stop(), s.reader.Close(), s.writer.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("sqlite: close: %w", s.closeErr)
		}
	})
	return s.closeErr
}

// readStmt returns the reader pool's prepared statement of text, preparing it on first use.
func (s *Store) readStmt(ctx context.Context, text string) (*sql.Stmt, error) {
	s.readsMu.Lock()
	defer s.readsMu.Unlock()
	if st := s.reads[text]; st != nil {
		return st, nil
	}
	st, err := s.reader.PrepareContext(ctx, text)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if s.reads == nil {
		s.reads = map[string]*sql.Stmt{}
	}
	s.reads[text] = st
	return st, nil
}

// closeReads closes the reader pool's prepared statements.
func (s *Store) closeReads() {
	s.readsMu.Lock()
	defer s.readsMu.Unlock()
	for _, st := range s.reads {
		_ = st.Close()
	}
	s.reads = nil
}

// acquire waits, in arrival order, for the right to use the writer connection. Each successful
// acquire must be followed by one release.
func (s *Store) acquire(ctx context.Context) error {
	// Goroutines blocked sending on a channel are woken first in, first out, which makes this
	// a fair lock; database/sql's own wait for a pooled connection is not ordered.
	select {
	case s.gate <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release gives up the writer connection taken with acquire.
func (s *Store) release() { <-s.gate }

// withWriteTx runs fn in one IMMEDIATE transaction on the writer connection and commits it. Any
// error from fn rolls the transaction back. The prepared statements in s.stmts are ready while
// fn runs.
func (s *Store) withWriteTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if err := s.acquire(ctx); err != nil {
		return wrapErr(ctx, op, err)
	}
	defer s.release()
	// The writer has one connection: statements are prepared before the transaction takes it.
	if err := s.stmts.prepare(ctx, s.writer); err != nil {
		return wrapErr(ctx, op, err)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return wrapErr(ctx, op, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return wrapErr(ctx, op, err)
	}
	if err := tx.Commit(); err != nil {
		return wrapErr(ctx, op, err)
	}
	s.checkpoints.committed()
	return nil
}

// wrapErr prefixes err with the package and operation and classifies it: a lock held too long,
// an interruption or a done context becomes store.ErrUnavailable, a uniqueness violation
// store.ErrConflict, a dangling organization store.ErrNotFound. Errors already classified keep
// their class.
func wrapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrUnavailable):
		return fmt.Errorf("sqlite: %s: %w", op, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
		return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrUnavailable, err)
	case errors.Is(err, sql.ErrConnDone):
		return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrUnavailable, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code()
		switch code & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_PROTOCOL:
			return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrUnavailable, err)
		}
		switch code {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrNotFound, err)
		}
	}
	return fmt.Errorf("sqlite: %s: %w", op, err)
}

// timeLayout is how times are stored: UTC, fixed width, nanoseconds, so that text order is time
// order for every year from 0001 to 9999.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// encTime returns t as stored.
func encTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// encTimePtr returns t as stored, or NULL for nil.
func encTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return encTime(*t)
}

// timeCol scans a stored time into *dst, in UTC.
type timeCol struct{ dst *time.Time }

// Scan implements sql.Scanner.
func (c timeCol) Scan(v any) error {
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case []byte:
		s = string(x)
	default:
		return fmt.Errorf("stored time has type %T, want text", v)
	}
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return fmt.Errorf("stored time %q: %w", s, err)
	}
	*c.dst = t.UTC()
	return nil
}

// timePtrCol scans a nullable stored time into *dst: nil for NULL.
type timePtrCol struct{ dst **time.Time }

// Scan implements sql.Scanner.
func (c timePtrCol) Scan(v any) error {
	if v == nil {
		*c.dst = nil
		return nil
	}
	var t time.Time
	if err := (timeCol{&t}).Scan(v); err != nil {
		return err
	}
	*c.dst = &t
	return nil
}

// jsonCol scans nullable JSON text into *dst as a fresh byte slice: nil for NULL.
type jsonCol struct{ dst *[]byte }

// Scan implements sql.Scanner.
func (c jsonCol) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*c.dst = nil
	case string:
		*c.dst = []byte(x)
	case []byte:
		*c.dst = append([]byte(nil), x...)
	default:
		return fmt.Errorf("stored JSON has type %T, want text", v)
	}
	return nil
}

// jsonArg returns raw as a TEXT argument, or NULL for nil.
func jsonArg(raw []byte) any {
	if raw == nil {
		return nil
	}
	return string(raw)
}

// textOrNull returns s as a TEXT argument, or NULL for "".
func textOrNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullText scans nullable text into *dst: "" for NULL.
type nullText struct{ dst *string }

// Scan implements sql.Scanner.
func (c nullText) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*c.dst = ""
	case string:
		*c.dst = x
	case []byte:
		*c.dst = string(x)
	default:
		return fmt.Errorf("stored text has type %T, want text", v)
	}
	return nil
}

// dirCol scans a stored direction into *dst: whether it is "inbound".
type dirCol struct{ inbound *bool }

// Scan implements sql.Scanner.
func (c dirCol) Scan(v any) error {
	switch x := v.(type) {
	case string:
		*c.inbound = x == "inbound"
	case []byte:
		*c.inbound = string(x) == "inbound"
	default:
		return fmt.Errorf("stored direction has type %T, want text", v)
	}
	return nil
}
