// Package outbox is a durable first-in, first-out queue of canonical events waiting to be
// delivered to callwire: one SQLite file on local disk (through the pure-Go modernc.org/sqlite),
// opened in WAL mode with synchronous=FULL, so an Add that returned has reached the disk and
// survives a crash of the process or of the machine.
//
// An event leaves the outbox in one of two ways only: Ack, once the server answered 2xx for it,
// or DeadLetter, once the server refused it for good; the dead letter keeps the event and the
// server's answer in a table and in a JSON Lines file beside the outbox.
//
// Next hands out the events ready to send, keeping the order of each call: an event of a call is
// never handed out while an earlier event of the same call is still in the outbox and handed out
// (in flight). Events of different calls may be handed out together or to several senders at
// once.
//
// When the outbox is full, Add refuses new events with ErrFull and never drops stored ones: a
// stored event was promised to its translator, while a refused one is still the translator's to
// keep, retry or report, and a backlog that big means the core has been unreachable for a long
// time, which an operator must hear about rather than discover as a gap in the call history.
package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/filelock"
)

// Defaults for Options.
const (
	// DefaultMaxEvents is the most events an outbox holds when Options.MaxEvents is zero: about
	// a day of a busy clinic's calls.
	DefaultMaxEvents = 100_000
	// DefaultMaxBytes is the most bytes of event JSON an outbox holds when Options.MaxBytes is
	// zero.
	DefaultMaxBytes = 256 << 20
	// MaxEventBytes is the largest single event (its canonical JSON) the outbox takes: the
	// ingest endpoint's default body limit.
	MaxEventBytes = 1 << 20
)

// busyTimeout is how long a statement waits for a lock another process holds.
const busyTimeout = 5 * time.Second

// ErrInUse reports that another process (another agent) has the outbox open. Two agents on one
// outbox would send every event twice and lose track of their counts.
var ErrInUse = errors.New("outbox in use")

// ErrFull is returned (wrapped) by Add when storing the event would pass Options.MaxEvents or
// Options.MaxBytes. Nothing stored is dropped to make room; the event was not taken.
var ErrFull = errors.New("outbox is full")

// ErrTooLarge is returned (wrapped) by Add for an event whose JSON is larger than
// MaxEventBytes: the server would refuse it, so it is not stored.
var ErrTooLarge = errors.New("event is too large")

// ErrClosed is returned (wrapped) by calls made after Close.
var ErrClosed = errors.New("outbox is closed")

// Options tune an Outbox. The zero value is ready to use; each field documents its default.
type Options struct {
	// MaxEvents bounds how many events the outbox holds. Default DefaultMaxEvents.
	MaxEvents int
	// MaxBytes bounds the total size of the stored event JSON. Default DefaultMaxBytes.
	MaxBytes int64
	// DeadLetterPath is the JSON Lines file DeadLetter appends to. Default: the outbox path with
	// its extension replaced by "-dead-letter.jsonl".
	DeadLetterPath string
}

// Item is one stored event, as handed out by Next and Peek.
type Item struct {
	// ID is the event's position in the outbox: later events have greater IDs.
	ID int64
	// Source names who added it (the translator).
	Source string
	// Type is the event's type.
	Type event.Type
	// CallKey identifies the event's call: its provider and providerCallId.
	CallKey string
	// Body is the event's canonical JSON, exactly as stored and to be sent.
	Body []byte
	// Added is when the event was stored.
	Added time.Time
}

// SourceStats counts one source's events.
type SourceStats struct {
	// Queued is how many of its events are in the outbox, in flight included.
	Queued int
	// Bytes is the size of their JSON.
	Bytes int64
	// DeadLettered is how many of its events were ever dead-lettered in this outbox.
	DeadLettered int
	// Oldest is when its oldest queued event was added; zero when none is queued.
	Oldest time.Time
}

// Stats describes the outbox at one moment.
type Stats struct {
	// Queued and Bytes count every event in the outbox, in flight included.
	Queued int
	Bytes  int64
	// InFlight is how many events Next handed out that were not yet acknowledged, dead-lettered
	// or released.
	InFlight int
	// DeadLettered counts every dead letter.
	DeadLettered int
	// MaxEvents and MaxBytes are the limits.
	MaxEvents int
	MaxBytes  int64
	// Sources breaks the counts down by source.
	Sources map[string]SourceStats
}

// Outbox is a durable queue of events. It is safe for concurrent use. Open it with Open and
// Close it when done. One process at a time should use an outbox file.
type Outbox struct {
	path     string
	deadPath string
	max      int
	maxBytes int64

	// mu guards db use, the counters and the leases; the database has one connection, so
	// statements run one at a time anyway.
	mu       sync.Mutex
	db       *sql.DB
	count    int
	bytes    int64
	leased   map[int64]string // id → call key
	calls    map[string]int   // call key → events in flight
	changed  chan struct{}
	isClosed bool
	// lock holds the exclusive lock on <path>.lock while the outbox is open.
	lock *os.File
}

const schema = `
CREATE TABLE IF NOT EXISTS outbox (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	source   TEXT    NOT NULL,
	call_key TEXT    NOT NULL,
	type     TEXT    NOT NULL,
	body     BLOB    NOT NULL,
	size     INTEGER NOT NULL,
	added_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_call ON outbox (call_key, id);
CREATE INDEX IF NOT EXISTS outbox_type ON outbox (type, id);
CREATE TABLE IF NOT EXISTS dead_letter (
	id       INTEGER PRIMARY KEY,
	source   TEXT    NOT NULL,
	call_key TEXT    NOT NULL,
	type     TEXT    NOT NULL,
	body     BLOB    NOT NULL,
	added_at INTEGER NOT NULL,
	dead_at  INTEGER NOT NULL,
	status   INTEGER NOT NULL,
	code     TEXT    NOT NULL,
	message  TEXT    NOT NULL,
	trace_id TEXT    NOT NULL
);
PRAGMA user_version = 1;
`

// Open opens the outbox file at path, creating it and its directory when missing, and returns
// it with its stored events ready to be handed out again (nothing is in flight after Open). It
// fails when the file is not an outbox or the options are negative.
func Open(ctx context.Context, path string, o Options) (*Outbox, error) {
	if path == "" {
		return nil, errors.New("outbox: open: empty path")
	}
	if strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("outbox: open %q: path must not contain '?'", path)
	}
	if o.MaxEvents < 0 || o.MaxBytes < 0 {
		return nil, fmt.Errorf("outbox: open %q: limits must not be negative", path)
	}
	if o.MaxEvents == 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("outbox: open %q: %w", path, err)
	}
	if o.DeadLetterPath == "" {
		o.DeadLetterPath = strings.TrimSuffix(abs, filepath.Ext(abs)) + "-dead-letter.jsonl"
	}
	if o.DeadLetterPath, err = filepath.Abs(o.DeadLetterPath); err != nil {
		return nil, fmt.Errorf("outbox: open %q: dead-letter file: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("outbox: open %q: %w", path, err)
	}
	lock, err := filelock.Lock(abs + ".lock")
	if errors.Is(err, filelock.ErrHeld) {
		return nil, fmt.Errorf("outbox: open %q: %w: another process has %s.lock", path, ErrInUse, abs)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: open %q: %w", path, err)
	}
	params := url.Values{
		"_busy_timeout": {fmt.Sprint(busyTimeout.Milliseconds())},
		"_journal_mode": {"WAL"},
		"_synchronous":  {"FULL"},
		"_txlock":       {"immediate"},
	}
	db, err := sql.Open("sqlite", abs+"?"+params.Encode())
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("outbox: open %q: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	fail := func(err error) (*Outbox, error) {
		db.Close()
		lock.Close()
		return nil, fmt.Errorf("outbox: open %q: %w", path, err)
	}
	var mode, syncMode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fail(err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fail(fmt.Errorf("journal mode is %q, want wal", mode))
	}
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncMode); err != nil {
		return fail(err)
	}
	if syncMode != "2" { // FULL
		return fail(fmt.Errorf("synchronous is %s, want 2 (full)", syncMode))
	}
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fail(err)
	}
	if version > 1 {
		return fail(fmt.Errorf("the file is outbox version %d; this build reads version 1", version))
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fail(err)
	}
	ob := &Outbox{path: abs, deadPath: o.DeadLetterPath, max: o.MaxEvents, maxBytes: o.MaxBytes, db: db, lock: lock,
		leased: map[int64]string{}, calls: map[string]int{}, changed: make(chan struct{})}
	if err := db.QueryRowContext(ctx, "SELECT count(*), coalesce(sum(size), 0) FROM outbox").Scan(&ob.count, &ob.bytes); err != nil {
		return fail(err)
	}
	return ob, nil
}

// Path returns the outbox file's absolute path.
func (o *Outbox) Path() string { return o.path }

// DeadLetterPath returns the dead-letter file's absolute path.
func (o *Outbox) DeadLetterPath() string { return o.deadPath }

// CallKey returns the key Item.CallKey holds for e's call: its provider (default applied) and
// providerCallId.
func CallKey(e *event.Event) string { return e.EffectiveProvider() + "\x00" + e.ProviderCallID }

// Add validates e and stores its canonical JSON as added by source: AddValid of event.Check(e).
// It fails, storing nothing, with a *event.ValidationError for an invalid event, or as AddValid
// does.
func (o *Outbox) Add(ctx context.Context, source string, e event.Event) error {
	v, err := event.Check(e)
	if err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	return o.AddValid(ctx, source, v)
}

// AddValid stores v's JSON, as it is, as added by source. It returns nil only once the event is
// on disk (the transaction committed and the write-ahead log was synced), so that the caller may
// tell whoever handed it the event that it was taken. It fails, storing nothing, with
// ErrTooLarge, ErrFull when the outbox is at one of its limits, ErrClosed, or a database error.
func (o *Outbox) AddValid(ctx context.Context, source string, v event.Valid) error {
	body, e := v.JSON(), v.Event()
	if len(body) == 0 {
		return errors.New("outbox: add: no event (a zero event.Valid)")
	}
	if len(body) > MaxEventBytes {
		return fmt.Errorf("outbox: add: %w: %d bytes, at most %d", ErrTooLarge, len(body), MaxEventBytes)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return fmt.Errorf("outbox: add: %w", ErrClosed)
	}
	if o.count+1 > o.max || o.bytes+int64(len(body)) > o.maxBytes {
		return fmt.Errorf("outbox: add: %w: %d events and %d bytes stored, limits %d and %d",
			ErrFull, o.count, o.bytes, o.max, o.maxBytes)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	// Once begun, the insert runs to its end: a context ending mid-way could otherwise report
	// an insert that did commit as failed, and the event would be stored but not counted.
	_, err := o.db.ExecContext(context.WithoutCancel(ctx), `INSERT INTO outbox (source, call_key, type, body, size, added_at)
		VALUES (?, ?, ?, ?, ?, ?)`, source, CallKey(e), string(e.Type), body, len(body), time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("outbox: add: %w", err)
	}
	o.count++
	o.bytes += int64(len(body))
	o.signal()
	return nil
}

// signal wakes whoever waits on Changed. The caller holds mu.
func (o *Outbox) signal() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// Changed returns a channel that is closed the next time events may have become ready: after
// an Add, a Release, an Ack or a DeadLetter. Call it again after each wake-up.
func (o *Outbox) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// Next hands out, oldest first, up to max events (max from 1 to event.MaxBatch) that may be
// sent now as one request, the way the ingest API advises, and marks them in flight until Ack,
// DeadLetter or Release:
//
//   - A call_received that is the oldest event of its call goes alone, ahead of older events of
//     other calls: a phone is ringing.
//   - Otherwise, the oldest events in the outbox, skipping calls with an event in flight and
//     every event of a call from its first call_received on (which goes alone, later).
//
// It never hands out an event while an earlier event of its call is in flight or still waiting,
// so each call's events reach the server in the order they were added. It returns no items when
// nothing is ready; wait on Changed and call again.
func (o *Outbox) Next(ctx context.Context, max int) ([]Item, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	items, err := o.ready(ctx, max)
	if err != nil {
		return nil, fmt.Errorf("outbox: next: %w", err)
	}
	for _, it := range items {
		o.leased[it.ID] = it.CallKey
		o.calls[it.CallKey]++
	}
	return items, nil
}

// Peek returns what Next would hand out now, without marking it in flight.
func (o *Outbox) Peek(ctx context.Context, max int) ([]Item, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	items, err := o.ready(ctx, max)
	if err != nil {
		return nil, fmt.Errorf("outbox: peek: %w", err)
	}
	return items, nil
}

const itemColumns = "id, source, call_key, type, body, added_at"

func scanItem(rows *sql.Rows) (Item, error) {
	var it Item
	var typ string
	var added int64
	if err := rows.Scan(&it.ID, &it.Source, &it.CallKey, &typ, &it.Body, &added); err != nil {
		return Item{}, err
	}
	it.Type = event.Type(typ)
	it.Added = time.Unix(0, added).UTC()
	return it, nil
}

// ready selects the next request's events. The caller holds mu.
func (o *Outbox) ready(ctx context.Context, max int) ([]Item, error) {
	if o.isClosed {
		return nil, ErrClosed
	}
	if max < 1 || max > event.MaxBatch {
		return nil, fmt.Errorf("max must be 1 to %d, got %d", event.MaxBatch, max)
	}
	if o.count == 0 {
		return nil, nil
	}
	// A ring first, when one heads its call and its call is not in flight.
	rows, err := o.db.QueryContext(ctx, `SELECT `+itemColumns+` FROM outbox o
		WHERE type = ? AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.call_key = o.call_key AND p.id < o.id)
		ORDER BY id LIMIT ?`, string(event.CallReceived), len(o.calls)+1)
	if err != nil {
		return nil, err
	}
	var ring *Item
	for rows.Next() {
		it, err := scanItem(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		if o.calls[it.CallKey] == 0 {
			ring = &it
			break
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	if ring != nil {
		return []Item{*ring}, nil
	}
	// Otherwise the oldest tail events, in pages, skipping blocked calls.
	blocked := map[string]bool{}
	for k := range o.calls {
		blocked[k] = true
	}
	const page = 256
	var items []Item
	after := int64(0)
	for scanned := 0; len(items) < max && scanned < 8*page; {
		rows, err := o.db.QueryContext(ctx, `SELECT `+itemColumns+` FROM outbox WHERE id > ? ORDER BY id LIMIT ?`, after, page)
		if err != nil {
			return nil, err
		}
		n := 0
		for rows.Next() && len(items) < max {
			it, err := scanItem(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			n++
			after = it.ID
			switch {
			case blocked[it.CallKey]:
			case it.Type == event.CallReceived:
				blocked[it.CallKey] = true
			default:
				items = append(items, it)
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
		scanned += n
		if n < page {
			break
		}
	}
	return items, nil
}

// Release ends the flight of the given events without removing them, after a failed attempt:
// Next hands them out again. Unknown ids are ignored.
func (o *Outbox) Release(ids []int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unlease(ids)
	o.signal()
}

// unlease forgets the leases of ids. The caller holds mu.
func (o *Outbox) unlease(ids []int64) {
	for _, id := range ids {
		k, ok := o.leased[id]
		if !ok {
			continue
		}
		delete(o.leased, id)
		if o.calls[k]--; o.calls[k] <= 0 {
			delete(o.calls, k)
		}
	}
}

// Ack removes the given events for good, once the server answered 2xx for them. It returns only
// once the removal is on disk. Ids no longer in the outbox are ignored.
func (o *Outbox) Ack(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return fmt.Errorf("outbox: ack: %w", ErrClosed)
	}
	err := o.tx(ctx, func(tx *sql.Tx) error {
		return o.deleteIDs(ctx, tx, ids)
	})
	if err != nil {
		return fmt.Errorf("outbox: ack: %w", err)
	}
	o.unlease(ids)
	o.signal()
	return nil
}

// deleteIDs removes ids from the outbox table and updates the counters. The caller holds mu.
func (o *Outbox) deleteIDs(ctx context.Context, tx *sql.Tx, ids []int64) error {
	st, err := tx.PrepareContext(ctx, "DELETE FROM outbox WHERE id = ? RETURNING size")
	if err != nil {
		return err
	}
	defer st.Close()
	var n int
	var b int64
	for _, id := range ids {
		var size int64
		switch err := st.QueryRowContext(ctx, id).Scan(&size); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			n++
			b += size
		}
	}
	// A rollback or a failed commit makes tx recount from the table.
	o.count -= n
	o.bytes -= b
	return nil
}

// tx runs fn in one transaction and commits it. On any failure the counters are recounted from
// the table. The caller holds mu.
func (o *Outbox) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	t, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(t); err != nil {
		_ = t.Rollback()
		return errors.Join(err, o.recount(ctx))
	}
	if err := t.Commit(); err != nil {
		return errors.Join(err, o.recount(ctx))
	}
	return nil
}

// recount reads the counters from the table. The caller holds mu.
func (o *Outbox) recount(ctx context.Context) error {
	return o.db.QueryRowContext(context.WithoutCancel(ctx), "SELECT count(*), coalesce(sum(size), 0) FROM outbox").Scan(&o.count, &o.bytes)
}

// Stats counts the outbox's events now.
func (o *Outbox) Stats(ctx context.Context) (Stats, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return Stats{}, fmt.Errorf("outbox: stats: %w", ErrClosed)
	}
	s := Stats{Queued: o.count, Bytes: o.bytes, InFlight: len(o.leased), MaxEvents: o.max, MaxBytes: o.maxBytes,
		Sources: map[string]SourceStats{}}
	rows, err := o.db.QueryContext(ctx, "SELECT source, count(*), sum(size), min(added_at) FROM outbox GROUP BY source")
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	for rows.Next() {
		var src string
		var ss SourceStats
		var oldest int64
		if err := rows.Scan(&src, &ss.Queued, &ss.Bytes, &oldest); err != nil {
			rows.Close()
			return Stats{}, fmt.Errorf("outbox: stats: %w", err)
		}
		ss.Oldest = time.Unix(0, oldest).UTC()
		s.Sources[src] = ss
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	rows, err = o.db.QueryContext(ctx, "SELECT source, count(*) FROM dead_letter GROUP BY source")
	if err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var src string
		var n int
		if err := rows.Scan(&src, &n); err != nil {
			return Stats{}, fmt.Errorf("outbox: stats: %w", err)
		}
		ss := s.Sources[src]
		ss.DeadLettered = n
		s.Sources[src] = ss
		s.DeadLettered += n
	}
	if err := rows.Err(); err != nil {
		return Stats{}, fmt.Errorf("outbox: stats: %w", err)
	}
	return s, nil
}

// Body returns the request body for items: the one event's JSON as stored for a single item,
// otherwise {"events":[...]} around the stored JSON of each, in order. The stored bytes are sent
// exactly.
func Body(items []Item) []byte {
	if len(items) == 1 {
		return items[0].Body
	}
	n := len(`{"events":[]}`)
	for _, it := range items {
		n += len(it.Body) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"events":[`...)
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it.Body...)
	}
	return append(b, "]}"...)
}

// IDs returns the ids of items, in order.
func IDs(items []Item) []int64 {
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

// Close closes the outbox. Calls made after Close fail with ErrClosed; events in flight stay
// stored and are handed out again after the next Open. Closing again does nothing.
func (o *Outbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return nil
	}
	o.isClosed = true
	o.signal()
	err := o.db.Close()
	if o.lock != nil {
		o.lock.Close()
	}
	if err != nil {
		return fmt.Errorf("outbox: close: %w", err)
	}
	return nil
}
