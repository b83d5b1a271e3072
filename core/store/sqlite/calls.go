package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/writeq"
)

// writeStmts are the statements WriteCalls runs, prepared once on the writer connection.
type writeStmts struct {
	ready bool
	// findCall looks a call up by its key.
	findCall *sql.Stmt
	// insertCall creates a call.
	insertCall *sql.Stmt
	// updateCall merges a write into an existing call and returns its client matches.
	updateCall *sql.Stmt
	// findEvent returns the stored ID of an event by its dedupe key.
	findEvent *sql.Stmt
	// checkKey runs a KeyCheck.
	checkKey *sql.Stmt
	// insertEvents[k] appends 1<<k events at once, each unless its dedupe key is on file,
	// returning the call, dedupe key and ID of each stored.
	insertEvents [maxEventRowsLog + 1]*sql.Stmt
}

// maxEventRowsLog bounds the rows of one event insert: 1<<maxEventRowsLog, 64.
const maxEventRowsLog = 6

// insertEventsSQL appends n events, each unless its dedupe key is on file.
func insertEventsSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO call_events (org_id, event_id, call_id, type, dedupe_key, sequence,
		provider_event_id, occurred_at, order_at, received_at, body) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	b.WriteString(` ON CONFLICT (org_id, call_id, dedupe_key) DO NOTHING RETURNING call_id, dedupe_key, event_id`)
	return b.String()
}

const (
	findCallSQL = `SELECT call_id FROM calls WHERE org_id = ? AND provider = ? AND provider_call_id = ?`

	insertCallSQL = `INSERT INTO calls (org_id, call_id, provider, provider_call_id, direction, state,
		block, block_seq, block_at, first_at, last_at, clients, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	// updateCallSQL reads the old row on every right-hand side, as SQLite does for all of an
	// UPDATE's SET expressions. The block moves only when (?2, ?3) is not before
	// (block_seq, block_at); block_seq = max(...) follows from that.
	updateCallSQL = `UPDATE calls SET
		state = max(state, ?1),
		direction = CASE WHEN ?2 > block_seq OR (?2 = block_seq AND ?3 >= block_at) THEN ?4 ELSE direction END,
		block = CASE WHEN ?2 > block_seq OR (?2 = block_seq AND ?3 >= block_at) THEN ?5 ELSE block END,
		block_at = CASE WHEN ?2 > block_seq OR (?2 = block_seq AND ?3 >= block_at) THEN ?3 ELSE block_at END,
		block_seq = max(block_seq, ?2),
		first_at = min(first_at, ?6),
		last_at = max(last_at, ?7),
		clients = coalesce(?8, clients),
		updated_at = ?9
		WHERE org_id = ?10 AND call_id = ?11
		RETURNING clients`

	findEventSQL = `SELECT event_id FROM call_events WHERE org_id = ? AND call_id = ? AND dedupe_key = ?`

	checkKeySQL = `SELECT 1 FROM api_keys WHERE client_id = ? AND secret_hash = ?
		AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`

	// ringingSQL reads, for one call_received, its call's state and whether the event is on file.
	ringingSQL = `SELECT c.state, EXISTS (SELECT 1 FROM call_events e
			WHERE e.org_id = c.org_id AND e.call_id = c.call_id AND e.dedupe_key = ?)
		FROM calls c WHERE c.org_id = ? AND c.provider = ? AND c.provider_call_id = ?`
)

// prepare prepares the statements on db unless they are ready.
func (w *writeStmts) prepare(ctx context.Context, db *sql.DB) error {
	if w.ready {
		return nil
	}
	for _, p := range []struct {
		dst  **sql.Stmt
		text string
	}{
		{&w.findCall, findCallSQL},
		{&w.insertCall, insertCallSQL},
		{&w.updateCall, updateCallSQL},
		{&w.findEvent, findEventSQL},
		{&w.checkKey, checkKeySQL},
	} {
		stmt, err := db.PrepareContext(ctx, p.text)
		if err != nil {
			w.close()
			return fmt.Errorf("prepare: %w", err)
		}
		*p.dst = stmt
	}
	for k := range w.insertEvents {
		stmt, err := db.PrepareContext(ctx, insertEventsSQL(1<<k))
		if err != nil {
			w.close()
			return fmt.Errorf("prepare: %w", err)
		}
		w.insertEvents[k] = stmt
	}
	w.ready = true
	return nil
}

// close closes whichever statements are prepared.
func (w *writeStmts) close() {
	for _, s := range append([]*sql.Stmt{w.findCall, w.insertCall, w.updateCall, w.findEvent, w.checkKey},
		w.insertEvents[:]...) {
		if s != nil {
			_ = s.Close()
		}
	}
	*w = writeStmts{}
}

// WriteCalls applies w atomically, calls in (provider, providerCallId) order, and returns one
// result per call in the order of w.Calls. Writes that wait for the writer together are
// committed together (group.go), each inside a savepoint of its own. See store.Store.
func (s *Store) WriteCalls(ctx context.Context, w store.Write) ([]store.CallResult, error) {
	if w.OrgID == "" {
		return nil, errors.New("sqlite: write calls: empty organization id")
	}
	if len(w.Calls) == 0 {
		return []store.CallResult{}, nil
	}
	return s.writeGrouped(ctx, writeq.NewJob(ctx, w))
}

// txStmts are the writer's prepared statements bound to one transaction.
type txStmts struct {
	findCall, insertCall, updateCall, findEvent, checkKey *sql.Stmt
	insertEvents                                          [maxEventRowsLog + 1]*sql.Stmt
}

// bind returns the statements of w bound to tx.
func (w *writeStmts) bind(ctx context.Context, tx *sql.Tx) txStmts {
	t := txStmts{
		findCall: tx.StmtContext(ctx, w.findCall), insertCall: tx.StmtContext(ctx, w.insertCall),
		updateCall: tx.StmtContext(ctx, w.updateCall), findEvent: tx.StmtContext(ctx, w.findEvent),
		checkKey: tx.StmtContext(ctx, w.checkKey),
	}
	for k, s := range w.insertEvents {
		t.insertEvents[k] = tx.StmtContext(ctx, s)
	}
	return t
}

// writeCalls applies w with the statements of an open transaction. On error, what it wrote must
// be rolled back by the caller.
func writeCalls(ctx context.Context, st txStmts, w store.Write) ([]store.CallResult, error) {
	order := make([]int, len(w.Calls))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := &w.Calls[a], &w.Calls[b]
		return cmp.Or(strings.Compare(ca.Provider, cb.Provider), strings.Compare(ca.ProviderCallID, cb.ProviderCallID))
	})

	results := make([]store.CallResult, len(w.Calls))
	received := encTime(w.ReceivedAt)
	if err := checkKey(ctx, st.checkKey, w.Check); err != nil {
		return nil, err
	}
	findCall, insertCall, updateCall := st.findCall, st.insertCall, st.updateCall
	for _, i := range order {
		c := &w.Calls[i]
		res := store.CallResult{Events: make([]store.EventResult, len(c.Events))}

		err := findCall.QueryRowContext(ctx, w.OrgID, c.Provider, c.ProviderCallID).Scan(&res.ID)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			res.ID, res.Created = c.ID, true
			if c.Clients != nil {
				res.Clients = append([]byte(nil), c.Clients...)
			}
			_, err = insertCall.ExecContext(ctx, w.OrgID, c.ID, c.Provider, c.ProviderCallID, c.Direction,
				int64(c.State), jsonArg(c.Block), c.BlockSequence, encTime(c.BlockAt),
				encTime(c.FirstAt), encTime(c.LastAt), jsonArg(c.Clients), received, received)
			if err != nil {
				return nil, fmt.Errorf("call %s/%s: %w", c.Provider, c.ProviderCallID, err)
			}
		case err != nil:
			return nil, fmt.Errorf("call %s/%s: %w", c.Provider, c.ProviderCallID, err)
		default:
			err = updateCall.QueryRowContext(ctx, int64(c.State), c.BlockSequence, encTime(c.BlockAt),
				c.Direction, jsonArg(c.Block), encTime(c.FirstAt), encTime(c.LastAt), jsonArg(c.Clients),
				received, w.OrgID, res.ID).Scan(jsonCol{(*[]byte)(&res.Clients)})
			if err != nil {
				return nil, fmt.Errorf("call %s/%s: %w", c.Provider, c.ProviderCallID, err)
			}
		}

		results[i] = res
	}
	if err := writeEvents(ctx, st, w, order, results); err != nil {
		return nil, err
	}
	return results, nil
}

// eventRef is an event of a write: of its call i (index into Write.Calls), event j.
type eventRef struct{ i, j int }

// writeEvents appends the events of w, its calls in order, to the calls results hold, and sets
// each event's result: a multi-row insert per run of up to 64 events.
func writeEvents(ctx context.Context, st txStmts, w store.Write, order []int, results []store.CallResult) error {
	var refs []eventRef
	for _, i := range order {
		for j := range w.Calls[i].Events {
			refs = append(refs, eventRef{i, j})
		}
	}
	received := encTime(w.ReceivedAt)
	args := make([]any, 0, 11*min(len(refs), 1<<maxEventRowsLog))
	for len(refs) > 0 {
		k := min(bits.Len(uint(len(refs)))-1, maxEventRowsLog) // the largest run of 1<<k that fits
		run := refs[:1<<k]
		refs = refs[len(run):]
		args = args[:0]
		for _, r := range run {
			e := &w.Calls[r.i].Events[r.j]
			args = append(args, w.OrgID, e.ID, results[r.i].ID, e.Type, e.DedupeKey, e.Sequence,
				e.ProviderEventID, encTime(e.OccurredAt), encTime(e.OrderAt), received, string(e.Body))
		}
		stored, err := storedEvents(ctx, st.insertEvents[k], args)
		if err != nil {
			c := &w.Calls[run[0].i]
			return fmt.Errorf("call %s/%s: events: %w", c.Provider, c.ProviderCallID, err)
		}
		for _, r := range run {
			e, res := &w.Calls[r.i].Events[r.j], &results[r.i].Events[r.j]
			k := [2]string{results[r.i].ID, e.DedupeKey}
			if id, ok := stored[k]; ok {
				// The first of the run with the key is the one stored; a later one is its copy.
				res.ID = id
				delete(stored, k)
				continue
			}
			res.Duplicate = true
			if err := st.findEvent.QueryRowContext(ctx, w.OrgID, results[r.i].ID, e.DedupeKey).Scan(&res.ID); err != nil {
				c := &w.Calls[r.i]
				return fmt.Errorf("call %s/%s: event %q: %w", c.Provider, c.ProviderCallID, e.DedupeKey, err)
			}
		}
	}
	return nil
}

// storedEvents runs a multi-row event insert and returns the IDs of the events it stored, by call
// and dedupe key.
func storedEvents(ctx context.Context, stmt *sql.Stmt, args []any) (map[[2]string]string, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	stored := make(map[[2]string]string, len(args)/11)
	for rows.Next() {
		var call, key, id string
		if err := rows.Scan(&call, &key, &id); err != nil {
			return nil, err
		}
		stored[[2]string{call, key}] = id
	}
	return stored, rows.Err()
}

// knownEventsChunk bounds the references asked in one statement, well inside SQLite's limit on
// bound parameters.
const knownEventsChunk = 500

// KnownEvents reports, for each ref in order, whether that event is on file for the
// organization. See store.Store.
func (s *Store) KnownEvents(ctx context.Context, orgID string, refs []store.EventRef, check *store.KeyCheck) ([]bool, error) {
	if err := s.checkKeyRead(ctx, check); err != nil {
		if errors.Is(err, store.ErrKeyRejected) {
			return nil, fmt.Errorf("sqlite: known events: %w", err)
		}
		return nil, wrapErr(ctx, "known events", err)
	}
	known := make([]bool, len(refs))
	for start := 0; start < len(refs); start += knownEventsChunk {
		chunk := refs[start:min(start+knownEventsChunk, len(refs))]
		var q strings.Builder
		args := make([]any, 0, 4*len(chunk)+1)
		q.WriteString(`WITH refs (i, provider, provider_call_id, dedupe_key) AS (VALUES `)
		for i, r := range chunk {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?)")
			args = append(args, int64(start+i), r.Provider, r.ProviderCallID, r.DedupeKey)
		}
		q.WriteString(`) SELECT refs.i FROM refs
			JOIN calls c ON c.org_id = ? AND c.provider = refs.provider AND c.provider_call_id = refs.provider_call_id
			JOIN call_events e ON e.org_id = c.org_id AND e.call_id = c.call_id AND e.dedupe_key = refs.dedupe_key`)
		args = append(args, orgID)

		rows, err := s.reader.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return nil, wrapErr(ctx, "known events", err)
		}
		for rows.Next() {
			var i int64
			if err := rows.Scan(&i); err != nil {
				rows.Close()
				return nil, wrapErr(ctx, "known events", err)
			}
			known[i] = true
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, wrapErr(ctx, "known events", err)
		}
	}
	return known, nil
}

// GetCall returns the call and its events ordered by (sequence, OrderAt, ReceivedAt, ID), read
// from one snapshot, or store.ErrNotFound. See store.Store.
func (s *Store) GetCall(ctx context.Context, orgID, provider, providerCallID string) (store.Call, []store.Event, error) {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.Call{}, nil, wrapErr(ctx, "get call", err)
	}
	defer func() { _ = tx.Rollback() }()

	c := store.Call{OrgID: orgID, Provider: provider, ProviderCallID: providerCallID}
	var state int64
	err = tx.QueryRowContext(ctx, `SELECT call_id, direction, state, block, block_seq, block_at,
		first_at, last_at, clients, created_at, updated_at
		FROM calls WHERE org_id = ? AND provider = ? AND provider_call_id = ?`,
		orgID, provider, providerCallID).Scan(&c.ID, &c.Direction, &state, jsonCol{(*[]byte)(&c.Block)},
		&c.BlockSequence, timeCol{&c.BlockAt}, timeCol{&c.FirstAt}, timeCol{&c.LastAt},
		jsonCol{(*[]byte)(&c.Clients)}, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return store.Call{}, nil, fmt.Errorf("sqlite: get call %s/%s: %w", provider, providerCallID, store.ErrNotFound)
	}
	if err != nil {
		return store.Call{}, nil, wrapErr(ctx, "get call", err)
	}
	c.State = store.State(state)

	rows, err := tx.QueryContext(ctx, `SELECT event_id, type, dedupe_key, sequence, provider_event_id,
		occurred_at, order_at, received_at, body
		FROM call_events WHERE org_id = ? AND call_id = ?
		ORDER BY sequence, order_at, received_at, event_id`, orgID, c.ID)
	if err != nil {
		return store.Call{}, nil, wrapErr(ctx, "get call events", err)
	}
	defer rows.Close()
	var events []store.Event
	for rows.Next() {
		e := store.Event{CallID: c.ID}
		if err := rows.Scan(&e.ID, &e.Type, &e.DedupeKey, &e.Sequence, &e.ProviderEventID,
			timeCol{&e.OccurredAt}, timeCol{&e.OrderAt}, timeCol{&e.ReceivedAt}, jsonCol{(*[]byte)(&e.Body)}); err != nil {
			return store.Call{}, nil, wrapErr(ctx, "get call events", err)
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return store.Call{}, nil, wrapErr(ctx, "get call events", err)
	}
	return c, events, nil
}

// checkKey runs a KeyCheck, when there is one, with stmt (checkKeySQL, prepared):
// store.ErrKeyRejected unless a live key has the client ID and secret hash.
func checkKey(ctx context.Context, stmt *sql.Stmt, c *store.KeyCheck) error {
	if c == nil {
		return nil
	}
	var one int
	err := stmt.QueryRowContext(ctx, c.ClientID, c.SecretHash, encTime(c.At)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrKeyRejected
	}
	return err
}

// Ringing reports, for each ref in order, whether the event is on file and its call's state, one
// prepared query per ref. See store.Store.
func (s *Store) Ringing(ctx context.Context, orgID string, refs []store.EventRef, check *store.KeyCheck) ([]store.Ringing, error) {
	if err := s.checkKeyRead(ctx, check); err != nil {
		if errors.Is(err, store.ErrKeyRejected) {
			return nil, fmt.Errorf("sqlite: ringing: %w", err)
		}
		return nil, wrapErr(ctx, "ringing", err)
	}
	stmt, err := s.readStmt(ctx, ringingSQL)
	if err != nil {
		return nil, wrapErr(ctx, "ringing", err)
	}
	out := make([]store.Ringing, len(refs))
	for i, r := range refs {
		var state int64
		var known bool
		err := stmt.QueryRowContext(ctx, r.DedupeKey, orgID, r.Provider, r.ProviderCallID).Scan(&state, &known)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, wrapErr(ctx, "ringing", err)
		default:
			out[i] = store.Ringing{Known: known, State: store.State(state)}
		}
	}
	return out, nil
}

// checkKeyRead runs a KeyCheck, when there is one, on the reader pool.
func (s *Store) checkKeyRead(ctx context.Context, check *store.KeyCheck) error {
	if check == nil {
		return nil
	}
	stmt, err := s.readStmt(ctx, checkKeySQL)
	if err != nil {
		return err
	}
	return checkKey(ctx, stmt, check)
}
