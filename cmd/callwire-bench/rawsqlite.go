package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the embedded store's driver, for its raw-SQL ceiling
)

// The raw-SQL ceiling of the embedded store: the fewest statements that store a request's rows
// in the SQLite file the server writes, with the service's guarantees. SQLite has no
// data-modifying WITH, so that is one transaction of two statements: a multi-row upsert of the
// calls (state climbing the ladder, the block following the latest event, as
// core/store/sqlite's update does) and a multi-row insert of the events that skips those on
// file, payloads verbatim. The connection is opened as the store opens its writer (WAL,
// synchronous=FULL, IMMEDIATE transactions, statement journals in memory), and, as there, one
// transaction writes at a time.

// sqliteTimeLayout is how the embedded store writes times: fixed-width UTC text.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000000Z"

// sqliteRaw writes requests' rows on one connection to the file.
type sqliteRaw struct {
	db    *sql.DB
	mu    sync.Mutex              // one transaction at a time, as the store's writer
	stmts map[[2]int][2]*sql.Stmt // by (calls, events): the two statements, prepared once per shape
}

// openSQLiteRaw opens the file at path as the embedded store opens its writer connection.
func openSQLiteRaw(path string) (*sqliteRaw, error) {
	db, err := sql.Open("sqlite", sqliteDSN(path, "FULL", "temp_store(MEMORY)"))
	if err != nil {
		return nil, fmt.Errorf("raw ceiling: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return &sqliteRaw{db: db, stmts: map[[2]int][2]*sql.Stmt{}}, nil
}

// sqliteDSN names the file at path opened as the embedded store opens its writer (WAL, foreign
// keys, IMMEDIATE transactions, a busy timeout of 5 s), with the given synchronous mode and
// pragmas.
func sqliteDSN(path, synchronous string, pragmas ...string) string {
	params := url.Values{
		"_busy_timeout": {"5000"},
		"_journal_mode": {"WAL"},
		"_synchronous":  {synchronous},
		"_foreign_keys": {"1"},
		"_txlock":       {"immediate"},
		"_pragma":       pragmas,
	}
	return path + "?" + params.Encode()
}

func (r *sqliteRaw) close() error {
	for _, s := range r.stmts {
		_ = s[0].Close()
		_ = s[1].Close()
	}
	return r.db.Close()
}

// statements returns the two statements for nc calls and ne events, prepared on first use.
func (r *sqliteRaw) statements(ctx context.Context, nc, ne int) ([2]*sql.Stmt, error) {
	k := [2]int{nc, ne}
	if s, ok := r.stmts[k]; ok {
		return s, nil
	}
	// A call's key is unique through the index of its id (derived from the key) since the
	// store's migration 9, and through a constraint on the key itself before: the upsert
	// arbitrates on the one the file has, so that the bench measures servers of either.
	target := "org_id, provider, provider_call_id"
	var byID bool
	if err := r.db.QueryRowContext(ctx, `SELECT count(*) > 0 FROM sqlite_master WHERE name = 'calls_id_key'`).Scan(&byID); err != nil {
		return [2]*sql.Stmt{}, fmt.Errorf("raw ceiling: read schema: %w", err)
	}
	if byID {
		target = "org_id, call_id"
	}
	var c strings.Builder
	c.WriteString(`INSERT INTO calls AS c (org_id, call_id, provider, provider_call_id, direction, state,
		block, block_seq, block_at, first_at, last_at, clients, created_at, updated_at) VALUES `)
	for i := range nc {
		if i > 0 {
			c.WriteString(", ")
		}
		c.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)")
	}
	c.WriteString(` ON CONFLICT (` + target + `) DO UPDATE SET
		state = max(c.state, excluded.state),
		direction = CASE WHEN excluded.block_seq > c.block_seq OR (excluded.block_seq = c.block_seq AND excluded.block_at >= c.block_at)
			THEN excluded.direction ELSE c.direction END,
		block = CASE WHEN excluded.block_seq > c.block_seq OR (excluded.block_seq = c.block_seq AND excluded.block_at >= c.block_at)
			THEN excluded.block ELSE c.block END,
		block_at = CASE WHEN excluded.block_seq > c.block_seq OR (excluded.block_seq = c.block_seq AND excluded.block_at >= c.block_at)
			THEN excluded.block_at ELSE c.block_at END,
		block_seq = max(c.block_seq, excluded.block_seq),
		first_at = min(c.first_at, excluded.first_at),
		last_at = max(c.last_at, excluded.last_at),
		updated_at = excluded.updated_at
		RETURNING call_id, call_no`)
	var e strings.Builder
	e.WriteString(`INSERT INTO call_events (org_id, event_id, call_no, call_id, type, dedupe_key, sequence,
		provider_event_id, occurred_at, order_at, received_at, body) VALUES `)
	for i := range ne {
		if i > 0 {
			e.WriteString(", ")
		}
		e.WriteString("(?, ?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?)")
	}
	e.WriteString(` ON CONFLICT (org_id, call_no, dedupe_key) DO NOTHING`)
	cs, err := r.db.PrepareContext(ctx, c.String())
	if err != nil {
		return [2]*sql.Stmt{}, fmt.Errorf("prepare calls: %w", err)
	}
	es, err := r.db.PrepareContext(ctx, e.String())
	if err != nil {
		cs.Close()
		return [2]*sql.Stmt{}, fmt.Errorf("prepare events: %w", err)
	}
	r.stmts[k] = [2]*sql.Stmt{cs, es}
	return r.stmts[k], nil
}

// write stores w in one transaction and reports how many events it stored.
func (r *sqliteRaw) write(ctx context.Context, w *rawWrite) (int64, error) {
	now := time.Now().UTC()
	enc := func(t time.Time) string {
		if t.After(now) {
			t = now // clamped for ordering, as the service clamps a time in the future
		}
		return t.UTC().Format(sqliteTimeLayout)
	}
	recv := now.Format(sqliteTimeLayout)
	nc, ne := len(w.callIDs), len(w.eventIDs)
	ca := make([]any, 0, 13*nc)
	for i := range nc {
		var block any
		if len(w.blocks[i]) > 0 {
			block = string(w.blocks[i])
		}
		ca = append(ca, w.orgID, w.callIDs[i], w.providers[i], w.providerCallIDs[i], w.directions[i],
			int64(w.states[i]), block, w.blockSeqs[i], enc(w.blockAts[i]), enc(w.firstAts[i]), enc(w.lastAts[i]), recv, recv)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := r.statements(ctx, nc, ne)
	if err != nil {
		return 0, err
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	// The upsert returns every call's number, created or found: the key of its events.
	nos := make(map[string]int64, nc)
	rows, err := tx.StmtContext(ctx, st[0]).QueryContext(ctx, ca...)
	if err != nil {
		return 0, fmt.Errorf("calls: %w", err)
	}
	for rows.Next() {
		var id string
		var no int64
		if err := rows.Scan(&id, &no); err != nil {
			rows.Close()
			return 0, fmt.Errorf("calls: %w", err)
		}
		nos[id] = no
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, fmt.Errorf("calls: %w", err)
	}
	ea := make([]any, 0, 11*ne)
	for i := range ne {
		no, ok := nos[w.eventCallIDs[i]]
		if !ok {
			return 0, fmt.Errorf("events: no call %s", w.eventCallIDs[i])
		}
		at := enc(w.occurredAts[i])
		ea = append(ea, w.orgID, w.eventIDs[i], no, w.eventCallIDs[i], w.types[i], w.dedupeKeys[i], w.sequences[i],
			w.occurredAts[i].UTC().Format(sqliteTimeLayout), at, recv, string(w.bodies[i]))
	}
	res, err := tx.StmtContext(ctx, st[1]).ExecContext(ctx, ea...)
	if err != nil {
		return 0, fmt.Errorf("events: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

// sqliteRawDoer stores each request with r. Every event of a request the bench sends is new, so
// the transaction must store every one.
func sqliteRawDoer(r *sqliteRaw) doer {
	return func(ctx context.Context, req request) error {
		w := req.raw
		if w == nil {
			return errors.New("raw ceiling: request without parameters")
		}
		n, err := r.write(ctx, w)
		if err != nil {
			return fmt.Errorf("raw ceiling: %w", err)
		}
		if n != int64(len(w.eventIDs)) {
			return fmt.Errorf("raw ceiling: stored %d of %d events", n, len(w.eventIDs))
		}
		return nil
	}
}

// countSQLite returns how many calls and events the file holds.
func countSQLite(ctx context.Context, r *sqliteRaw) (calls, events int64, err error) {
	err = r.db.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM calls), (SELECT count(*) FROM call_events)").Scan(&calls, &events)
	if err != nil {
		return 0, 0, fmt.Errorf("count: %w", err)
	}
	return calls, events, nil
}
