package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/event"
)

// preloadEventsPerCall is how many events each preloaded call has: a realistic call's five.
const preloadEventsPerCall = 5

// preloadProvider is the provider the preloaded calls are filed under: the measured calls' own.
const preloadProvider = "sip"

// preloadBlock is every preloaded call's block.
const preloadBlock = `{"direction":"inbound","from":{"number":"+442071234567","name":"Preloaded Caller"},"to":{"number":"+442071234500"}}`

// preloadPlan is the shape of a preload: the store a clinic group has after years, so that
// -preload shows what a write costs once the indexes no longer fit in memory. The rows are
// shaped as the service stores them (call ids from store.CallID, time-ordered event ids, bodies
// of the realistic mix's size). They are filed under the measured calls' provider, with provider
// call ids shaped as the measured ones (random-looking, so spread over the whole key of
// organization, provider and providerCallId, as a PBX's Call-IDs are) but under a label of their
// own, so that no measured call meets them. Both stores' preloads write these rows.
type preloadPlan struct {
	orgID  string
	calls  int64     // calls to store
	events int64     // events to store: preloadEventsPerCall a call, the last call cut short
	base   time.Time // when the first call rang: a year before the preload
}

func newPreloadPlan(orgID string, events int64, now time.Time) preloadPlan {
	return preloadPlan{orgID: orgID, events: events, calls: (events + preloadEventsPerCall - 1) / preloadEventsPerCall,
		base: now.Add(-365 * 24 * time.Hour).UTC()}
}

// callAt returns when call i rang: one call every 3 seconds.
func (p preloadPlan) callAt(i int64) time.Time { return p.base.Add(time.Duration(i) * 3 * time.Second) }

// eventsOf returns how many events call i has.
func (p preloadPlan) eventsOf(i int64) int64 {
	return min(preloadEventsPerCall, p.events-i*preloadEventsPerCall)
}

// preloadEvent is one preloaded event as both stores file it.
type preloadEvent struct {
	id, typ, dedupeKey, providerEventID string
	sequence                            int64
	at                                  time.Time
	body                                []byte
}

// event returns the k-th event (from 0) of call i, whose provider call id is pcid.
func (p preloadPlan) event(i, k int64, pcid string) (preloadEvent, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return preloadEvent{}, err
	}
	t := p.callAt(i).Add(time.Duration(k) * 20 * time.Second)
	typ := string([preloadEventsPerCall]event.Type{event.CallReceived, event.CallAnswered, event.CallEnded,
		event.CallRecorded, event.CallTranscribed}[k])
	body := fmt.Appendf(nil, `{"type":%q,"providerCallId":%q,"occurredAt":%q,"provider":%q,"sequence":%d,`+
		`"call":%s,"locations":["front-desk"],"providerEventId":"%s-%d","raw":{"note":"a preloaded event, about the size of a realistic one"}}`,
		typ, pcid, t.Format(time.RFC3339), preloadProvider, k+1, preloadBlock, pcid, k)
	return preloadEvent{id: id.String(), typ: typ, dedupeKey: typ + ":" + strconv.FormatInt(k+1, 10),
		providerEventID: pcid + "-" + strconv.FormatInt(k, 10), sequence: k + 1, at: t, body: body}, nil
}

// preloadPostgres stores events events, in calls of preloadEventsPerCall, for the organization
// the bench measures, in PostgreSQL with COPY (see preloadPlan), then refreshes the planner's
// statistics and checkpoints. It returns the calls and events stored.
func preloadPostgres(ctx context.Context, pool *pgxpool.Pool, orgID string, events int64, logf func(string, ...any)) (calls, stored int64, err error) {
	start := time.Now()
	p := newPreloadPlan(orgID, events, start)
	if p.calls == 0 {
		return 0, 0, nil
	}
	block := []byte(preloadBlock)

	// One COPY draws the calls' numbers in the order of its rows, one after another, after the
	// last number drawn so far; the events are keyed to their call by that number.
	var before int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(max(call_no), 0) FROM calls`).Scan(&before); err != nil {
		return 0, 0, fmt.Errorf("preload: read the calls' numbers: %w", err)
	}
	var i int64
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"calls"},
		[]string{"org_id", "id", "provider", "provider_call_id", "direction", "state", "block", "block_sequence", "block_at",
			"first_at", "last_at", "clients", "created_at", "updated_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i >= p.calls {
				return nil, nil
			}
			pcid := preloadCallID(i)
			t := p.callAt(i)
			row := []any{orgID, store.CallID(orgID, preloadProvider, pcid), preloadProvider, pcid, "inbound", int16(3), block,
				int64(1), t, t, t.Add(95 * time.Second), nil, t, t}
			i++
			return row, nil
		}))
	if err != nil {
		return 0, 0, fmt.Errorf("preload calls: %w", err)
	}
	logf("preload: %d calls in %v", n, time.Since(start).Round(time.Millisecond))

	var first, last, numbered int64
	if err := pool.QueryRow(ctx, `SELECT min(call_no), max(call_no), count(*) FROM calls WHERE call_no > $1`,
		before).Scan(&first, &last, &numbered); err != nil {
		return 0, 0, fmt.Errorf("preload: read the calls' numbers: %w", err)
	}
	if numbered != p.calls || last-first+1 != p.calls {
		return 0, 0, fmt.Errorf("preload: %d calls were numbered %d to %d, not one after another", p.calls, first, last)
	}

	start = time.Now()
	var c, k int64
	n, err = pool.CopyFrom(ctx, pgx.Identifier{"call_events"},
		[]string{"org_id", "id", "call_id", "call_no", "type", "dedupe_key", "sequence", "provider_event_id", "occurred_at", "order_at",
			"received_at", "body"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if c >= p.calls || k >= p.eventsOf(c) {
				return nil, nil
			}
			pcid := preloadCallID(c)
			e, err := p.event(c, k, pcid)
			if err != nil {
				return nil, err
			}
			row := []any{orgID, e.id, store.CallID(orgID, preloadProvider, pcid), first + c, e.typ, e.dedupeKey,
				e.sequence, e.providerEventID, e.at, e.at, e.at, e.body}
			if k++; k == preloadEventsPerCall {
				c, k = c+1, 0
			}
			return row, nil
		}))
	if err != nil {
		return 0, 0, fmt.Errorf("preload events: %w", err)
	}
	logf("preload: %d events in %v", n, time.Since(start).Round(time.Millisecond))
	if _, err := pool.Exec(ctx, "ANALYZE calls; ANALYZE call_events"); err != nil {
		return 0, 0, fmt.Errorf("preload: analyze: %w", err)
	}
	// COPY leaves gigabytes of new pages for PostgreSQL's checkpointer to write out over the
	// next minutes; the first round measured (the service's) met that every time. A store of
	// years is not in the middle of its import, so the rounds start after a checkpoint.
	start = time.Now()
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		logf("preload: CHECKPOINT failed (%v): the first rounds may still be writing out the preload", err)
	} else {
		logf("preload: checkpoint in %v", time.Since(start).Round(time.Millisecond))
	}
	return p.calls, n, nil
}

// preloadCallID returns the provider call id of the i-th preloaded call.
func preloadCallID(i int64) string {
	return callIDStem("preload", i, 0) + "-" + strconv.FormatInt(i, 10) + "@pbx.clinic.example"
}

// preloadSQLiteCallsPerTx is how many preloaded calls, with their events, one transaction of
// the embedded store's preload stores, and preloadSQLiteCallsPerStmt how many one statement does.
const (
	preloadSQLiteCallsPerTx   = 10000
	preloadSQLiteCallsPerStmt = 50
)

// preloadSQLite stores events events, in calls of preloadEventsPerCall, for the organization the
// bench measures, in the embedded store's file at path (see preloadPlan): rows as the store
// writes them, a few dozen calls a statement, in transactions of preloadSQLiteCallsPerTx calls.
// It writes as an import would, on a connection of its own with a large page cache and without
// waiting for the disk at each commit, then checkpoints, so that the write-ahead log is empty, as
// a store of years has long since emptied it. It returns the calls and events stored.
func preloadSQLite(ctx context.Context, path, orgID string, events int64, logf func(string, ...any)) (calls, stored int64, err error) {
	start := time.Now()
	p := newPreloadPlan(orgID, events, start)
	// 256 MiB of page cache, for the import only.
	db, err := sql.Open("sqlite", sqliteDSN(path, "OFF", "cache_size(-262144)"))
	if err != nil {
		return 0, 0, fmt.Errorf("preload: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for from := int64(0); from < p.calls; from += preloadSQLiteCallsPerTx {
		n, err := preloadSQLiteTx(ctx, db, p, from, min(p.calls, from+preloadSQLiteCallsPerTx))
		if err != nil {
			return 0, 0, fmt.Errorf("preload: calls %d on: %w", from, err)
		}
		stored += n
	}
	logf("preload: %d calls and %d events in %v", p.calls, stored, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return 0, 0, fmt.Errorf("preload: checkpoint: %w", err)
	}
	logf("preload: checkpoint in %v", time.Since(start).Round(time.Millisecond))
	// The import ran with synchronous=OFF, so the checkpoint left the file's pages to the
	// kernel, gigabytes of them dirty; written back during the rounds, they would queue every
	// commit's sync behind them. Sync the file now, as PostgreSQL's CHECKPOINT does its own.
	start = time.Now()
	if err := syncFile(path); err != nil {
		return 0, 0, fmt.Errorf("preload: %w", err)
	}
	logf("preload: file synced in %v", time.Since(start).Round(time.Millisecond))
	return p.calls, stored, nil
}

// syncFile flushes the file at path to its disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// preloadSQLiteTx stores calls from to to (not included) and their events in one transaction,
// and returns how many events it stored.
func preloadSQLiteTx(ctx context.Context, db *sql.DB, p preloadPlan, from, to int64) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	enc := func(t time.Time) string { return t.UTC().Format(sqliteTimeLayout) }
	stmts := map[int]*sql.Stmt{} // by row count, calls' (positive) and events' (negative)
	defer func() {
		for _, s := range stmts {
			_ = s.Close()
		}
	}()
	exec := func(key int, sqlText func() string, args []any) error {
		s, ok := stmts[key]
		if !ok {
			var err error
			if s, err = tx.PrepareContext(ctx, sqlText()); err != nil {
				return err
			}
			stmts[key] = s
		}
		_, err := s.ExecContext(ctx, args...)
		return err
	}
	// The calls are numbered here, after the last on file: this connection is the file's only
	// writer while it imports.
	var base int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(call_no), 0) FROM calls`).Scan(&base); err != nil {
		return 0, fmt.Errorf("calls: %w", err)
	}
	var n int64
	ca := make([]any, 0, 11*preloadSQLiteCallsPerStmt)
	ea := make([]any, 0, 12*preloadEventsPerCall*preloadSQLiteCallsPerStmt)
	for first := from; first < to; first += preloadSQLiteCallsPerStmt {
		ca, ea = ca[:0], ea[:0]
		last := min(to, first+preloadSQLiteCallsPerStmt)
		for i := first; i < last; i++ {
			pcid := preloadCallID(i)
			id := store.CallID(p.orgID, preloadProvider, pcid)
			t := enc(p.callAt(i))
			no := base + 1 + i - from
			ca = append(ca, no, p.orgID, id, preloadProvider, pcid, preloadBlock, t, t, enc(p.callAt(i).Add(95*time.Second)), t, t)
			for k := range p.eventsOf(i) {
				e, err := p.event(i, k, pcid)
				if err != nil {
					return 0, err
				}
				at := enc(e.at)
				ea = append(ea, p.orgID, e.id, no, id, e.typ, e.dedupeKey, e.sequence, e.providerEventID, at, at, at, string(e.body))
			}
		}
		nc, ne := int(last-first), len(ea)/12
		if err := exec(nc, func() string {
			return `INSERT INTO calls (call_no, org_id, call_id, provider, provider_call_id, direction, state, block, block_seq,
				block_at, first_at, last_at, clients, created_at, updated_at) VALUES ` +
				valuesRows(nc, "(?, ?, ?, ?, ?, 'inbound', 3, ?, 1, ?, ?, ?, NULL, ?, ?)")
		}, ca); err != nil {
			return 0, fmt.Errorf("calls: %w", err)
		}
		if err := exec(-ne, func() string {
			return `INSERT INTO call_events (org_id, event_id, call_no, call_id, type, dedupe_key, sequence, provider_event_id,
				occurred_at, order_at, received_at, body) VALUES ` + valuesRows(ne, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		}, ea); err != nil {
			return 0, fmt.Errorf("events: %w", err)
		}
		n += int64(ne)
	}
	return n, tx.Commit()
}

// valuesRows returns n copies of row, comma-separated.
func valuesRows(n int, row string) string {
	return strings.Repeat(row+", ", n-1) + row
}
