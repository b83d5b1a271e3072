package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/writeq"
)

// writeStmts are the statements WriteCalls runs, prepared once on the writer connection. The
// multi-row ones come in runs of 1<<k rows, k up to maxRowsLog: a write of n rows runs the
// largest that fit, then the next, the binary digits of n.
type writeStmts struct {
	ready bool
	// updateCall merges a write into an existing call and returns its client matches;
	// updateCallKept does so for a write that changes no indexed column (see updateCallKeptSQL).
	updateCall, updateCallKept *sql.Stmt
	// findEvent returns the stored ID of an event by its dedupe key.
	findEvent *sql.Stmt
	// findCalls[k] returns the ID of each of 1<<k calls on file, by key.
	findCalls [maxRowsLog + 1]*sql.Stmt
	// checkedFindCalls[k] is findCalls[k] with a key check's row.
	checkedFindCalls [maxRowsLog + 1]*sql.Stmt
	// insertCalls[k] creates 1<<k calls, none of them on file.
	insertCalls [maxRowsLog + 1]*sql.Stmt
	// insertEvents[k] appends 1<<k events at once, each unless its dedupe key is on file,
	// returning the call, dedupe key and ID of each stored.
	insertEvents [maxRowsLog + 1]*sql.Stmt
	// appendEvents[k] appends 1<<k events none of whose keys is on file, returning nothing.
	appendEvents [maxRowsLog + 1]*sql.Stmt
}

// maxRowsLog bounds the rows of one multi-row statement: 1<<maxRowsLog, 64.
const maxRowsLog = 6

// eachRun calls fn with items in runs of 1<<k, the largest that fits first (k up to
// maxRowsLog), in order, and stops at fn's first error.
func eachRun[T any](items []T, fn func(k int, run []T) error) error {
	for len(items) > 0 {
		k := min(bits.Len(uint(len(items)))-1, maxRowsLog)
		if err := fn(k, items[:1<<k]); err != nil {
			return err
		}
		items = items[1<<k:]
	}
	return nil
}

// rowsSQL writes n parenthesized rows of m parameters each, comma-separated.
func rowsSQL(b *strings.Builder, n, m int) {
	row := "(?" + strings.Repeat(", ?", m-1) + ")"
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
}

// findCallsSQL returns, for n keys (each its index, call ID, provider and provider call ID), the
// index, call ID and call number of each key on file, for the organization bound last. A call is
// found by its ID through calls_id_key (migration 9), and its key is checked.
func findCallsSQL(n int) string {
	var b strings.Builder
	b.WriteString(`WITH k (i, call_id, provider, provider_call_id) AS (VALUES `)
	rowsSQL(&b, n, 4)
	b.WriteString(`) SELECT k.i, c.call_id, c.call_no FROM k
		JOIN calls c ON c.org_id = ? AND c.call_id = k.call_id
			AND c.provider = k.provider AND c.provider_call_id = k.provider_call_id`)
	return b.String()
}

// checkedFindCallsSQL is findCallsSQL(n) withKeyCheck: one more row, keyCheckRow, an empty call
// ID and number 0, for a live key.
func checkedFindCallsSQL(n int) string { return withKeyCheck(findCallsSQL(n), "'', 0") }

// insertCallsSQL creates n calls, none of which may be on file: one that is fails the statement.
// It returns the number, provider and provider call ID of each.
func insertCallsSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO calls (org_id, call_id, provider, provider_call_id, direction, state,
		block, block_seq, block_at, first_at, last_at, clients, created_at, updated_at,
		answered_at, answered_by, ended_at, flags, from_key, to_key, from_ext, to_ext, locations, cb_number) VALUES `)
	rowsSQL(&b, n, callColumns)
	b.WriteString(` RETURNING call_no, provider, provider_call_id, ` + hasItemSQL)
	return b.String()
}

// callColumns is the number of columns insertCallsSQL writes per call.
const callColumns = 24

// hasItemSQL, in a RETURNING clause of a statement on calls, is whether the number the call
// counts toward has a to-call-back item the call may change: an open one, or a closed one that
// closed at or after the call's start. A call that starts after an item closed settles nothing
// of it (store.CallbackOf takes the calls in the order they started, and an item closes at or
// after the start of the step that closes it), so only a miss could: see upkeepCallbacks.
const hasItemSQL = `CASE WHEN cb_number IS NULL THEN 0
		ELSE EXISTS (SELECT 1 FROM callbacks b WHERE b.org_id = calls.org_id AND b.number = calls.cb_number
			AND (b.open OR calls.first_at <= b.closed_at)) END`

// insertEventsSQL appends n events, each unless its dedupe key is on file, and returns the call's
// number, the dedupe key and the ID of each stored.
func insertEventsSQL(n int) string {
	return appendEventsSQL(n) + ` ON CONFLICT (org_id, call_no, dedupe_key) DO NOTHING RETURNING call_no, dedupe_key, event_id`
}

// appendEventsSQL appends n events, none of whose keys may be on file: one that is fails the
// statement.
func appendEventsSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO call_events (org_id, event_id, call_no, call_id, type, dedupe_key, sequence,
		provider_event_id, occurred_at, order_at, received_at, body) VALUES `)
	rowsSQL(&b, n, eventColumns)
	return b.String()
}

// eventColumns is the number of columns appendEventsSQL writes per event.
const eventColumns = 12

// blockMovesSQL is true when a write's block, at (?2, ?3), is not before the stored one at
// (block_seq, block_at): then the block and everything that describes it move.
const blockMovesSQL = `(?2 > block_seq OR (?2 = block_seq AND ?3 >= block_at))`

// updateCallSetSQL assigns the columns of a call that no index of calls holds, for both updates
// below. Every right-hand side reads the old row, as SQLite does for all of an UPDATE's SET
// expressions; block_seq = max(...) follows from the block's rule.
const updateCallSetSQL = `
		state = max(state, ?1),
		block = CASE WHEN ` + blockMovesSQL + ` THEN ?5 ELSE block END,
		block_at = CASE WHEN ` + blockMovesSQL + ` THEN ?3 ELSE block_at END,
		block_seq = max(block_seq, ?2),
		last_at = max(last_at, ?7),
		clients = coalesce(?8, clients),
		updated_at = ?9,
		answered_by = CASE WHEN ?12 < answered_at OR (answered_at IS NULL AND ?12 IS NOT NULL) THEN ?13 ELSE answered_by END,
		answered_at = coalesce(min(answered_at, ?12), answered_at, ?12),
		ended_at = coalesce(min(ended_at, ?14), ended_at, ?14),
		flags = flags | ?15,
		from_ext = CASE WHEN ` + blockMovesSQL + ` THEN ?18 ELSE from_ext END,
		to_ext = CASE WHEN ` + blockMovesSQL + ` THEN ?19 ELSE to_ext END,
		locations = CASE WHEN ` + blockMovesSQL + ` THEN coalesce(?20, locations) ELSE locations END,`

// updateCallReturningSQL is what both updates return of the call.
const updateCallReturningSQL = `
		RETURNING clients, cb_number, cb_moved_from, direction, state, flags, ` + hasItemSQL

const (
	// updateCallSQL merges a write into a stored call, the columns indexes hold included.
	// cb_moved_from is the number the call counted toward before this statement when it moved
	// the call to another (NULL otherwise): set by every update, read only by its own
	// RETURNING, which sees new values.
	updateCallSQL = `UPDATE calls SET` + updateCallSetSQL + `
		direction = CASE WHEN ` + blockMovesSQL + ` THEN ?4 ELSE direction END,
		first_at = min(first_at, ?6),
		from_key = CASE WHEN ` + blockMovesSQL + ` THEN ?16 ELSE from_key END,
		to_key = CASE WHEN ` + blockMovesSQL + ` THEN ?17 ELSE to_key END,
		cb_moved_from = CASE WHEN ` + blockMovesSQL + ` AND cb_number IS NOT ?21 THEN cb_number END,
		cb_number = CASE WHEN ` + blockMovesSQL + ` THEN ?21 ELSE cb_number END
		WHERE org_id = ?10 AND call_no = ?11` + updateCallReturningSQL

	// updateCallKeptSQL is updateCallSQL for a write that changes no column an index of calls
	// holds (first_at, from_key, to_key, cb_number, and direction, which calls_cb_text_idx's
	// condition reads): its WHERE finds the row only then, and its SET leaves those columns out.
	// SQLite rewrites the entries of every index on a column an UPDATE assigns, even to the same
	// value; most writes (an answer or an end of a call already on file, whose later block names
	// the same parties) change none, and this update spares them four index entries' delete and
	// insert. A write it does not find its row for runs updateCallSQL.
	updateCallKeptSQL = `UPDATE calls SET` + updateCallSetSQL + `
		cb_moved_from = NULL
		WHERE org_id = ?10 AND call_no = ?11 AND first_at <= ?6
			AND (NOT ` + blockMovesSQL + `
				OR (direction = ?4 AND from_key = ?16 AND to_key = ?17 AND cb_number IS ?21))` + updateCallReturningSQL

	findEventSQL = `SELECT event_id FROM call_events WHERE org_id = ? AND call_no = ? AND dedupe_key = ?`

	checkKeySQL = `SELECT 1 FROM api_keys WHERE client_id = ? AND secret_hash = ?
		AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`
)

// prepare prepares the statements on db unless they are ready.
func (w *writeStmts) prepare(ctx context.Context, db *sql.DB) error {
	if w.ready {
		return nil
	}
	type text struct {
		dst  **sql.Stmt
		text string
	}
	texts := []text{{&w.updateCall, updateCallSQL}, {&w.updateCallKept, updateCallKeptSQL}, {&w.findEvent, findEventSQL}}
	for k := range maxRowsLog + 1 {
		texts = append(texts, text{&w.findCalls[k], findCallsSQL(1 << k)}, text{&w.checkedFindCalls[k], checkedFindCallsSQL(1 << k)},
			text{&w.insertCalls[k], insertCallsSQL(1 << k)},
			text{&w.insertEvents[k], insertEventsSQL(1 << k)}, text{&w.appendEvents[k], appendEventsSQL(1 << k)})
	}
	for _, t := range texts {
		stmt, err := db.PrepareContext(ctx, t.text)
		if err != nil {
			w.close()
			return fmt.Errorf("prepare: %w", err)
		}
		*t.dst = stmt
	}
	w.ready = true
	return nil
}

// close closes whichever statements are prepared.
func (w *writeStmts) close() {
	for _, s := range slices.Concat([]*sql.Stmt{w.updateCall, w.updateCallKept, w.findEvent},
		w.findCalls[:], w.checkedFindCalls[:], w.insertCalls[:], w.insertEvents[:], w.appendEvents[:]) {
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

// txStmts are the writer's prepared statements for one transaction, each bound to it when first
// used: a write runs a few of them.
type txStmts struct {
	ctx   context.Context
	tx    *sql.Tx
	src   *writeStmts
	bound map[*sql.Stmt]*sql.Stmt
}

// bind returns the statements of w for tx.
func (w *writeStmts) bind(ctx context.Context, tx *sql.Tx) *txStmts {
	return &txStmts{ctx: ctx, tx: tx, src: w, bound: make(map[*sql.Stmt]*sql.Stmt, 8)}
}

// get returns stmt, one of the writer's prepared statements, bound to the transaction.
func (t *txStmts) get(stmt *sql.Stmt) *sql.Stmt {
	b := t.bound[stmt]
	if b == nil {
		b = t.tx.StmtContext(t.ctx, stmt)
		t.bound[stmt] = b
	}
	return b
}

// writeCalls applies w with the statements of an open transaction. On error, what it wrote must
// be rolled back by the caller.
func writeCalls(ctx context.Context, st *txStmts, w store.Write) ([]store.CallResult, error) {
	order := make([]int, len(w.Calls))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := &w.Calls[a], &w.Calls[b]
		return cmp.Or(strings.Compare(ca.Provider, cb.Provider), strings.Compare(ca.ProviderCallID, cb.ProviderCallID))
	})

	results := make([]store.CallResult, len(w.Calls))
	// nos holds each call's number, the key of its events.
	nos := make([]int64, len(w.Calls))
	if err := findCalls(ctx, st, w, order, results, nos); err != nil {
		return nil, err
	}
	// The calls not on file are created, together; a key the write repeats (its calls are in
	// key order, so the repeat follows) is the call its first created.
	var created []int
	for n, i := range order {
		c, res := &w.Calls[i], &results[i]
		res.Events = make([]store.EventResult, len(c.Events))
		switch {
		case res.ID != "":
		case n > 0 && sameKey(c, &w.Calls[order[n-1]]):
			res.ID = results[order[n-1]].ID
		default:
			res.ID, res.Created = store.CallID(w.OrgID, c.Provider, c.ProviderCallID), true
			if c.Clients != nil {
				res.Clients = append([]byte(nil), c.Clients...)
			}
			created = append(created, i)
		}
	}
	received := encTime(w.ReceivedAt)
	touches := make([]cbTouch, len(w.Calls))
	if err := insertCalls(ctx, st, w, created, results, nos, touches, received); err != nil {
		return nil, err
	}
	for n, i := range order {
		c, res := &w.Calls[i], &results[i]
		if res.Created {
			continue
		}
		if nos[i] == 0 { // a repeat of the call before it, which is now on file
			nos[i] = nos[order[n-1]]
		}
		args := []any{int64(c.State), c.BlockSequence, encTime(c.BlockAt),
			c.Direction, jsonArg(c.Block), encTime(c.FirstAt), encTime(c.LastAt), jsonArg(c.Clients),
			received, w.OrgID, nos[i], encZeroNull(c.Summary.AnsweredAt), c.Summary.AnsweredBy,
			encZeroNull(c.Summary.EndedAt), int64(c.Summary.Flags), c.Summary.FromKey, c.Summary.ToKey,
			c.Summary.FromExt, c.Summary.ToExt, jsonArg(c.Summary.Locations), textOrNull(c.Summary.Callback)}
		dest := append([]any{jsonCol{(*[]byte)(&res.Clients)}}, touches[i].scanDest()...)
		// Most writes leave every indexed column as it is: the cheaper update, which does not
		// touch the indexes, finds its row; otherwise the full one runs.
		err := st.get(st.src.updateCallKept).QueryRowContext(ctx, args...).Scan(dest...)
		if errors.Is(err, sql.ErrNoRows) {
			err = st.get(st.src.updateCall).QueryRowContext(ctx, args...).Scan(dest...)
		}
		if err != nil {
			return nil, fmt.Errorf("call %s/%s: %w", c.Provider, c.ProviderCallID, err)
		}
	}
	if err := writeEvents(ctx, st, w, order, results, nos, received); err != nil {
		return nil, err
	}
	if err := upkeepCallbacks(ctx, st.tx, w.OrgID, touches, results); err != nil {
		return nil, err
	}
	return results, nil
}

// sameKey reports whether a and b name the same call.
func sameKey(a, b *store.CallWrite) bool {
	return a.Provider == b.Provider && a.ProviderCallID == b.ProviderCallID
}

// findCalls sets the ID of each call of w on file in results and its number in nos, asking for
// the keys in order, up to 64 in one statement, and makes w's key check, when it has one, in the
// first: it fails with store.ErrKeyRejected before anything is written.
func findCalls(ctx context.Context, st *txStmts, w store.Write, order []int, results []store.CallResult, nos []int64) error {
	args := make([]any, 0, 4*min(len(order), 1<<maxRowsLog)+4)
	first := true
	return eachRun(order, func(k int, run []int) error {
		args = args[:0]
		for _, i := range run {
			c := &w.Calls[i]
			args = append(args, int64(i), store.CallID(w.OrgID, c.Provider, c.ProviderCallID), c.Provider, c.ProviderCallID)
		}
		args = append(args, w.OrgID)
		stmt := st.src.findCalls[k]
		checked := first && w.Check != nil
		if checked {
			stmt = st.src.checkedFindCalls[k]
			args = append(args, w.Check.ClientID, w.Check.SecretHash, encTime(w.Check.At))
		}
		first = false
		rows, err := st.get(stmt).QueryContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("find calls: %w", err)
		}
		keyLive := false
		for rows.Next() {
			var i, no int64
			var id string
			if err := rows.Scan(&i, &id, &no); err != nil {
				rows.Close()
				return fmt.Errorf("find calls: %w", err)
			}
			if i == keyCheckRow {
				keyLive = true
				continue
			}
			if i < 0 || i >= int64(len(results)) {
				rows.Close()
				return fmt.Errorf("find calls: call %d of %d", i, len(results))
			}
			results[i].ID, nos[i] = id, no
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("find calls: %w", err)
		}
		if checked && !keyLive {
			return store.ErrKeyRejected
		}
		return nil
	})
}

// insertCalls creates the calls of w with the indexes in created, none of them on file and no
// two with one key, up to 64 in one statement, and sets their numbers in nos; received is
// w.ReceivedAt as stored.
func insertCalls(ctx context.Context, st *txStmts, w store.Write, created []int, results []store.CallResult, nos []int64, touches []cbTouch, received string) error {
	args := make([]any, 0, callColumns*min(len(created), 1<<maxRowsLog))
	return eachRun(created, func(k int, run []int) error {
		args = args[:0]
		for _, i := range run {
			c := &w.Calls[i]
			args = append(args, w.OrgID, results[i].ID, c.Provider, c.ProviderCallID, c.Direction,
				int64(c.State), jsonArg(c.Block), c.BlockSequence, encTime(c.BlockAt),
				encTime(c.FirstAt), encTime(c.LastAt), jsonArg(c.Clients), received, received,
				encZeroNull(c.Summary.AnsweredAt), c.Summary.AnsweredBy, encZeroNull(c.Summary.EndedAt),
				int64(c.Summary.Flags), c.Summary.FromKey, c.Summary.ToKey, c.Summary.FromExt, c.Summary.ToExt,
				jsonArg(c.Summary.Locations), textOrNull(c.Summary.Callback))
		}
		if err := numberCalls(ctx, st.get(st.src.insertCalls[k]), args, w, run, nos, touches); err != nil {
			c := &w.Calls[run[0]]
			return fmt.Errorf("call %s/%s: %w", c.Provider, c.ProviderCallID, err)
		}
		return nil
	})
}

// numberCalls runs stmt (insertCallsSQL, args its parameters) for the calls of w in run and sets
// each one's number in nos and its touch of the to-call-back list in touches from the rows it
// returns, which SQLite does not promise to return in the order of the rows inserted.
func numberCalls(ctx context.Context, stmt *sql.Stmt, args []any, w store.Write, run []int, nos []int64, touches []cbTouch) error {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for ; rows.Next(); n++ {
		var no int64
		var provider, providerCallID string
		var hasItem bool
		if err := rows.Scan(&no, &provider, &providerCallID, &hasItem); err != nil {
			return err
		}
		j := n // the row inserted n-th, as SQLite returns them today
		if j >= len(run) || w.Calls[run[j]].Provider != provider || w.Calls[run[j]].ProviderCallID != providerCallID {
			j = slices.IndexFunc(run, func(i int) bool {
				return w.Calls[i].Provider == provider && w.Calls[i].ProviderCallID == providerCallID
			})
			if j < 0 {
				return fmt.Errorf("created a call %s/%s it was not given", provider, providerCallID)
			}
		}
		nos[run[j]] = no
		c := &w.Calls[run[j]]
		touches[run[j]] = cbTouch{number: c.Summary.Callback, inbound: c.Direction == "inbound",
			state: c.State, flags: c.Summary.Flags, hasItem: hasItem}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(run) {
		return fmt.Errorf("created %d of %d calls", n, len(run))
	}
	return nil
}

// eventRef is an event of a write: of its call i (index into Write.Calls), event j.
type eventRef struct{ i, j int }

// writeEvents appends the events of w, its calls in order, to the calls results hold, and sets
// each event's result: multi-row inserts of up to 64 events. An event of a call this write
// created cannot be on file (an event names its call, which was not), unless the write gave its
// key to an earlier event of the call: such events go in by a plain insert, which returns
// nothing and stores them all. The others go in by an insert that skips the keys on file and
// returns what it stored, and each one it skipped is looked up. received is w.ReceivedAt as
// stored.
func writeEvents(ctx context.Context, st *txStmts, w store.Write, order []int, results []store.CallResult, nos []int64, received string) error {
	var fresh, checked []eventRef
	for _, i := range order {
		events := w.Calls[i].Events
		for j := range events {
			r := eventRef{i, j}
			if results[i].Created && !slices.ContainsFunc(events[:j], func(e store.EventWrite) bool { return e.DedupeKey == events[j].DedupeKey }) {
				fresh = append(fresh, r)
			} else {
				checked = append(checked, r)
			}
		}
	}
	args := make([]any, 0, eventColumns*min(max(len(fresh), len(checked)), 1<<maxRowsLog))
	// The fresh events go first: each is the first of its call with its key, so a checked one
	// with the same key finds it on file.
	for _, pass := range []struct {
		refs  []eventRef
		fresh bool
	}{{fresh, true}, {checked, false}} {
		err := eachRun(pass.refs, func(k int, run []eventRef) error {
			args = args[:0]
			for _, r := range run {
				e := &w.Calls[r.i].Events[r.j]
				args = append(args, w.OrgID, e.ID, nos[r.i], results[r.i].ID, e.Type, e.DedupeKey, e.Sequence,
					e.ProviderEventID, encTime(e.OccurredAt), encTime(e.OrderAt), received, string(e.Body))
			}
			var err error
			if pass.fresh {
				err = appendEvents(ctx, st.get(st.src.appendEvents[k]), args, w, run, results)
			} else {
				err = insertEvents(ctx, st, st.get(st.src.insertEvents[k]), args, w, run, results, nos)
			}
			if err != nil {
				c := &w.Calls[run[0].i]
				return fmt.Errorf("call %s/%s: events: %w", c.Provider, c.ProviderCallID, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// appendEvents stores the events of run, none of them on file, with stmt (appendEventsSQL, args
// its parameters), and sets their results.
func appendEvents(ctx context.Context, stmt *sql.Stmt, args []any, w store.Write, run []eventRef, results []store.CallResult) error {
	out, err := stmt.ExecContext(ctx, args...)
	if err != nil {
		return err
	}
	n, err := out.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(len(run)) {
		return fmt.Errorf("stored %d of %d new events", n, len(run))
	}
	for _, r := range run {
		results[r.i].Events[r.j].ID = w.Calls[r.i].Events[r.j].ID
	}
	return nil
}

// insertEvents stores the events of run that are not on file with stmt (insertEventsSQL, args its
// parameters), and sets their results: the ID stored now, or the one on file.
func insertEvents(ctx context.Context, st *txStmts, stmt *sql.Stmt, args []any, w store.Write, run []eventRef, results []store.CallResult, nos []int64) error {
	stored, err := storedEvents(ctx, stmt, args)
	if err != nil {
		return err
	}
	for _, r := range run {
		e, res := &w.Calls[r.i].Events[r.j], &results[r.i].Events[r.j]
		k := eventKey{nos[r.i], e.DedupeKey}
		if id, ok := stored[k]; ok {
			// The first of the run with the key is the one stored; a later one is its copy.
			res.ID = id
			delete(stored, k)
			continue
		}
		res.Duplicate = true
		if err := st.get(st.src.findEvent).QueryRowContext(ctx, w.OrgID, nos[r.i], e.DedupeKey).Scan(&res.ID); err != nil {
			return fmt.Errorf("event %q: %w", e.DedupeKey, err)
		}
	}
	return nil
}

// eventKey is an event's key within its organization: its call's number and its dedupe key.
type eventKey struct {
	callNo    int64
	dedupeKey string
}

// storedEvents runs a multi-row event insert and returns the IDs of the events it stored, by
// their key.
func storedEvents(ctx context.Context, stmt *sql.Stmt, args []any) (map[eventKey]string, error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	stored := make(map[eventKey]string, len(args)/eventColumns)
	for rows.Next() {
		var k eventKey
		var id string
		if err := rows.Scan(&k.callNo, &k.dedupeKey, &id); err != nil {
			return nil, err
		}
		stored[k] = id
	}
	return stored, rows.Err()
}

// keyCheckRow is the index of the row a statement of withKeyCheck adds when the key is live.
const keyCheckRow = -1

// withKeyCheck returns text, a query whose rows begin with an index (never negative) then one
// more column, with one more row when a live key has the client ID, secret hash and time bound
// after text's own parameters (the check of checkKeySQL): keyCheckRow, then rest (the SQL of the
// row's other columns).
func withKeyCheck(text, rest string) string {
	return text + `
		UNION ALL SELECT ` + strconv.Itoa(keyCheckRow) + `, ` + rest + ` WHERE EXISTS (` + checkKeySQL + `)`
}

// encZeroNull returns t as stored, or NULL for the zero time.
func encZeroNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return encTime(t)
}
