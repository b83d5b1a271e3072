package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
)

// writeAttempts is how many times WriteCalls tries a Write that lost a race (a serialization
// failure or a deadlock).
const writeAttempts = 3

// upsertCallSQL creates the call or folds the write into it. The CASE arms all read the stored
// row (c), so the block, its position and the direction move together. xmax is 0 only on a row
// version this statement inserted: an update leaves the updater's lock in xmax. Of writers
// racing to create one call, exactly one inserts; the others wait for it to commit and update.
const upsertCallSQL = `
WITH c AS (` + upsertCallInto + `
	VALUES (` + upsertCallValues + `)
	` + upsertCallConflict + `
	RETURNING ` + upsertCallReturning + `
), ` + callbackLockCTE + `
SELECT c.id, c.created, c.clients, c.cb_moved_from, (SELECT b.number FROM b WHERE b.pending) FROM c`

// The key check, written into each statement it guards: true when a live key has the client
// ID, secret hash and time bound in its three places, else a call of callwire_key_rejected,
// which raises CWK01 (migration 6); a statement takes it as one of the keyCheckAt constants
// below. Written in, the lookup costs PostgreSQL less than a call of the PL/pgSQL function
// callwire_check_key (docs/decisions.md, "The key check is written into the statements it guards").
const (
	keyCheck1 = `CASE WHEN EXISTS (SELECT 1 FROM api_keys WHERE client_id = `
	keyCheck2 = ` AND secret_hash = `
	keyCheck3 = ` AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > `
	keyCheck4 = `)) THEN true ELSE callwire_key_rejected() END`
)

// The key check with its parameters at the positions the statements give them: keyCheckAtN
// takes the client ID as $N, the secret hash as $N+1 and the time as $N+2.
const (
	keyCheckAt1  = keyCheck1 + `$1` + keyCheck2 + `$2` + keyCheck3 + `$3` + keyCheck4
	keyCheckAt5  = keyCheck1 + `$5` + keyCheck2 + `$6` + keyCheck3 + `$7` + keyCheck4
	keyCheckAt24 = keyCheck1 + `$24` + keyCheck2 + `$25` + keyCheck3 + `$26` + keyCheck4
	keyCheckAt34 = keyCheck1 + `$34` + keyCheck2 + `$35` + keyCheck3 + `$36` + keyCheck4
)

// checkedUpsertCallSQL is upsertCallSQL guarded by the key check ($24 client ID, $25 secret
// hash, $26 time): the check runs once, before the row is formed, and raises CWK01 for a dead
// key, which aborts the batch's transaction. It saves the batch a statement of its own.
const checkedUpsertCallSQL = `
WITH c AS (` + upsertCallInto + `
	SELECT ` + upsertCallValues + `
	WHERE ` + keyCheckAt24 + `
	` + upsertCallConflict + `
	RETURNING ` + upsertCallReturning + `
), ` + callbackLockCTE + `
SELECT c.id, c.created, c.clients, c.cb_moved_from, (SELECT b.number FROM b WHERE b.pending) FROM c`

const upsertCallInto = `
INSERT INTO calls AS c (org_id, id, provider, provider_call_id, direction, state,
	block, block_sequence, block_at, first_at, last_at, clients, created_at, updated_at,
	answered_at, answered_by, ended_at, flags, from_key, to_key, from_ext, to_ext, locations, cb_number)`

// upsertCallValues are the parameters of upsertCallInto's columns: $1 organization, $2 id, $3
// provider, $4 providerCallId, $5 direction, $6 state, $7 block, $8 block sequence, $9 block
// time, $10 first and $11 last event time, $12 clients, $13 received time (NULL for the
// database's clock), then the summary (store.Summary): $14 answered time, $15 answered by, $16
// ended time, $17 flags, $18 and $19 the numbers' keys, $20 and $21 the extensions, $22
// locations, $23 the number the call counts toward on the to-call-back list ("" for none).
const upsertCallValues = `$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, COALESCE($13, now()), COALESCE($13, now()),
	$14, $15, $16, $17, $18, $19, $20, $21, $22, NULLIF($23, '')`

const upsertCallConflict = `ON CONFLICT (org_id, provider, provider_call_id) DO UPDATE SET
	state = GREATEST(c.state, EXCLUDED.state),
	direction = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN EXCLUDED.direction ELSE c.direction END,
	block = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN EXCLUDED.block ELSE c.block END,
	block_sequence = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN EXCLUDED.block_sequence ELSE c.block_sequence END,
	block_at = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN EXCLUDED.block_at ELSE c.block_at END,
	first_at = LEAST(c.first_at, EXCLUDED.first_at),
	last_at = GREATEST(c.last_at, EXCLUDED.last_at),
	clients = COALESCE(EXCLUDED.clients, c.clients),
	updated_at = EXCLUDED.updated_at,
	answered_by = CASE WHEN EXCLUDED.answered_at < c.answered_at OR c.answered_at IS NULL AND EXCLUDED.answered_at IS NOT NULL
		THEN EXCLUDED.answered_by ELSE c.answered_by END,
	answered_at = LEAST(c.answered_at, EXCLUDED.answered_at),
	ended_at = LEAST(c.ended_at, EXCLUDED.ended_at),
	flags = c.flags | EXCLUDED.flags,
	from_key = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN EXCLUDED.from_key ELSE c.from_key END,
	to_key = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN EXCLUDED.to_key ELSE c.to_key END,
	from_ext = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN EXCLUDED.from_ext ELSE c.from_ext END,
	to_ext = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN EXCLUDED.to_ext ELSE c.to_ext END,
	locations = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN COALESCE(EXCLUDED.locations, c.locations) ELSE c.locations END,
	cb_moved_from = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		AND c.cb_number IS DISTINCT FROM EXCLUDED.cb_number THEN c.cb_number END,
	cb_number = CASE WHEN (EXCLUDED.block_sequence, EXCLUDED.block_at) >= (c.block_sequence, c.block_at)
		THEN EXCLUDED.cb_number ELSE c.cb_number END`

// upsertCallReturning is what the upserts return of each call: its id, number and whether this
// statement created it, its client matches, and for the to-call-back list (callbackLockCTE)
// its row after the write as the list reads it and the number the write moved it from.
const upsertCallReturning = `c.provider, c.provider_call_id, c.id, c.call_no, c.xmax = 0 AS created, c.clients, c.updated_at,
		c.cb_number, c.cb_moved_from, c.direction, c.state, c.flags, c.first_at`

// callbackLockCTE, a CTE named b after a CTE c of upserted calls (upsertCallReturning), locks
// the to-call-back row of each number the calls count toward, creating it when there is none,
// and returns those rows; pending is true in a returned row when the write must recompute the
// number's item (see recomputeCallbacks). A call that is still ringing inbound and unanswered
// neither misses nor settles, and takes no lock. The rows are locked in the order of their
// numbers, after the calls: writes lock calls first and numbers second, each in one order, and
// so cannot deadlock.
//
// A number must be recomputed when one of its calls now misses (an ended inbound call nobody
// took, or one that reached voicemail), or when it has an item that a call may change: an open
// one, one pending, or one that closed at or after the start of one of the calls (a call that
// starts after an item closed leaves it as it is, as store.CallbackOf takes calls in the order
// they started). Every number with a miss has an item, since a miss always recomputes. The
// decision is ON CONFLICT's, taken on the latest version of the row once any writer holding
// it has committed, not on the statement's snapshot: of two writes of one number, the second
// sees the item the first left. The proposed row carries the write's facts: pending, whether a
// call misses; first_missed_at, the earliest start of the number's calls (the start of the call
// that created a row without an item; meaningless there).
const callbackLockCTE = `b AS (
	INSERT INTO callbacks AS b (org_id, number, pending, first_missed_at)
	SELECT $1, c.cb_number,
		bool_or(c.direction = 'inbound' AND c.state >= 3 AND (c.flags & 1 = 0 OR c.flags & 2 <> 0)),
		min(c.first_at)
	FROM c
	WHERE c.cb_number IS NOT NULL AND NOT (c.direction = 'inbound' AND c.state < 3 AND c.flags & 1 = 0)
	GROUP BY c.cb_number
	ORDER BY c.cb_number
	ON CONFLICT (org_id, number) DO UPDATE SET pending = true
	WHERE b.pending OR EXCLUDED.pending OR b.open OR EXCLUDED.first_missed_at <= b.closed_at
	RETURNING b.number, b.pending
)`

// insertEventsSQL appends the events not yet on file and returns the dedupe keys it stored. It
// runs after upsertCallSQL in the same transaction, as its own statement: its snapshot is taken
// after the upsert waited for any writer holding the call, so the call is visible, and every
// earlier writer of the call's events has committed (writers of one call queue on its row).
const insertEventsSQL = `
INSERT INTO call_events AS e (org_id, id, call_id, call_no, type, dedupe_key, sequence, provider_event_id,
	occurred_at, order_at, received_at, body)
SELECT $1, n.id, c.id, c.call_no, n.type, n.dedupe_key, n.sequence, NULLIF(n.provider_event_id, ''), n.occurred_at,
	n.order_at, COALESCE($4, now()), n.body
FROM (SELECT id, call_no FROM calls WHERE org_id = $1 AND provider = $2 AND provider_call_id = $3) AS c,
	unnest($5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[],
		$10::timestamptz[], $11::timestamptz[], $12::json[])
		AS n(id, type, dedupe_key, sequence, provider_event_id, occurred_at, order_at, body)
ON CONFLICT (org_id, call_no, dedupe_key) DO NOTHING
RETURNING e.dedupe_key`

// maxEventRows is the most events a one-call write sends as rows of scalar parameters, in one
// statement (oneCallSQL), rather than as arrays (insertEventsSQL, after the upsert). A report is
// one to three events: encoding eight arrays for them cost the server more than the statement
// cost PostgreSQL.
const maxEventRows = 4

// eventIDsSQL returns the ID of each of the call's events with one of the given dedupe keys. It
// is read only for duplicates, after the write: a stored event keeps the ID the writer gave it,
// and events are never changed or removed, so the duplicates' IDs are those of the rows the
// write's insert found on file.
const eventIDsSQL = `
SELECT e.id, e.dedupe_key FROM call_events e
WHERE e.org_id = $1
	AND e.call_no = (SELECT call_no FROM calls WHERE org_id = $1 AND provider = $2 AND provider_call_id = $3)
	AND e.dedupe_key = ANY($4::text[])`

// WriteCalls applies w atomically and returns one result per call, in the order of w.Calls.
//
// The whole Write is one round trip (plus one the first time a connection sees its statements,
// to prepare them), run by PostgreSQL as one implicit transaction. A Write of one call (the usual
// report) is one statement (oneCallSQL; a pipelined batch of two statements with a single Sync
// when it has no events or more than maxEventRows): an upsert that locks the call row, and an
// insert of the events not on file, which says which it stored. A Write of several calls is one
// statement (writeManySQL) that does the same for all of them: as two
// statements a call, a batch of ten calls cost PostgreSQL about three times the CPU of one
// statement. Either way the calls are locked in (provider, providerCallId) order. Only when some
// events were duplicates does a second round trip, after the commit, read the IDs they have on
// file. Writers of one call therefore queue on its row, and two Writes touching the same calls
// lock them in the same order and cannot deadlock. A w.Check guards the first upsert
// (checkedUpsertCallSQL, checkedWriteManySQL), so it runs before anything is written.
//
// Under load, writes that wait for a place together are written as one: one statement, one
// commit, each write keeping its own outcome (see group.go). A write that waits for nothing is
// written alone at once.
//
// A Write that loses a race is retried, up to writeAttempts tries in all. Errors: one wrapping
// store.ErrNotFound if w.OrgID names no organization, store.ErrConflict if an event ID the
// caller made is taken, store.ErrUnavailable if transient; nothing is written in any case.
// The events of one CallWrite must have distinct dedupe keys, and bodies must be UTF-8 (as JSON
// is); otherwise WriteCalls fails without writing.
func (s *Store) WriteCalls(ctx context.Context, w store.Write) ([]store.CallResult, error) {
	if len(w.Calls) == 0 {
		return []store.CallResult{}, nil
	}
	for i := range w.Calls {
		c := &w.Calls[i]
		// A write names distinct calls (store.Write): one statement cannot change a call twice.
		for k := range i {
			if w.Calls[k].Provider == c.Provider && w.Calls[k].ProviderCallID == c.ProviderCallID {
				return nil, fmt.Errorf("postgres: write calls: call %q/%q appears twice", c.Provider, c.ProviderCallID)
			}
		}
		// A call holds a request's events, at most event.MaxBatch: comparing each pair costs
		// less than a map for every call.
		for j := range c.Events {
			for k := range j {
				if c.Events[k].DedupeKey == c.Events[j].DedupeKey {
					return nil, fmt.Errorf("postgres: write calls: call %q/%q: dedupe key %q appears twice",
						c.Provider, c.ProviderCallID, c.Events[j].DedupeKey)
				}
			}
		}
	}
	return s.writeGrouped(ctx, w)
}

// write is WriteCalls on a checked w: a write alone, or a group's writes merged into one
// (received then holds each call's arrival; see writeMany).
func (s *Store) write(ctx context.Context, w store.Write, received []time.Time) ([]store.CallResult, error) {
	order := make([]int, len(w.Calls))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := &w.Calls[a], &w.Calls[b]
		return cmp.Or(cmp.Compare(ca.Provider, cb.Provider), cmp.Compare(ca.ProviderCallID, cb.ProviderCallID))
	})

	for attempt := 1; ; attempt++ {
		res, err := s.writeOnce(ctx, w, order, received)
		if err == nil {
			return res, nil
		}
		code := pgCode(err)
		retry := code == "40001" || code == "40P01"
		if retry && attempt < writeAttempts && ctx.Err() == nil {
			// Let the winner of the race commit before trying again.
			select {
			case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		switch code {
		case codeKeyRejected:
			return nil, fmt.Errorf("postgres: write calls: %w", store.ErrKeyRejected)
		case codeUniqueViolation:
			// An event ID the caller made is taken. (Calls cannot collide: they are upserted on
			// their key, and their IDs are derived from it.)
			return nil, fmt.Errorf("postgres: write calls: %w: %w", store.ErrConflict, err)
		case codeForeignKeyViolation:
			return nil, fmt.Errorf("postgres: write calls: org %q: %w", w.OrgID, store.ErrNotFound)
		}
		return nil, fmt.Errorf("postgres: write calls: %w", err)
	}
}

// writeOnce sends w as one batch and reads its results. Errors are classified.
func (s *Store) writeOnce(ctx context.Context, w store.Write, order []int, received []time.Time) ([]store.CallResult, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()

	p := s.getWriteParams()
	var (
		results   []store.CallResult
		recompute []string
	)
	if len(w.Calls) > 1 {
		results, recompute, err = writeMany(ctx, conn, w, order, received, p)
	} else {
		results, recompute, err = s.writeOne(ctx, conn, w, p)
	}
	s.putWriteParams(p)
	if err != nil {
		return nil, classify(ctx, conn, err)
	}
	if err := readDuplicateIDs(ctx, conn, w, results); err != nil {
		// The write is committed; only its answer is missing. Sent again, it stores nothing
		// new and is answered in full.
		return nil, classify(ctx, conn, err)
	}
	if len(recompute) > 0 {
		// The write is committed; its numbers' items follow in a transaction of their own. If
		// that fails, the write sent again recomputes them: its calls miss again, or the
		// items it left pending are recomputed by any write of their numbers.
		if err := recomputeCallbacks(ctx, conn, w.OrgID, recompute, false); err != nil {
			return nil, classify(ctx, conn, err)
		}
		for i := range results {
			results[i].CallbacksChanged = true
		}
	}
	return results, nil
}

// readDuplicateIDs fills in the IDs on file of the events readWrite found to be duplicates (their
// ID is empty), in one batch.
func readDuplicateIDs(ctx context.Context, conn *pgxpool.Conn, w store.Write, results []store.CallResult) error {
	b := &pgx.Batch{}
	var calls []int
	for i := range results {
		var keys []string
		for j, er := range results[i].Events {
			if er.Duplicate {
				keys = append(keys, w.Calls[i].Events[j].DedupeKey)
			}
		}
		if len(keys) > 0 {
			c := &w.Calls[i]
			b.Queue(eventIDsSQL, w.OrgID, c.Provider, c.ProviderCallID, keys)
			calls = append(calls, i)
		}
	}
	if len(calls) == 0 {
		return nil
	}
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	for _, i := range calls {
		c := &w.Calls[i]
		ids := map[string]string{}
		rows, _ := br.Query()
		var id, key string
		if _, err := pgx.ForEachRow(rows, []any{&id, &key}, func() error {
			ids[key] = id
			return nil
		}); err != nil {
			return err
		}
		for j, e := range c.Events {
			er := &results[i].Events[j]
			if !er.Duplicate {
				continue
			}
			id, ok := ids[e.DedupeKey]
			if !ok {
				return fmt.Errorf("event %q of call %q/%q not on file after the write",
					e.DedupeKey, c.Provider, c.ProviderCallID)
			}
			er.ID = id
		}
	}
	return br.Close()
}

// rawJSON returns a scan target that stores a json column's text in *v as it is, or nil for
// NULL. (pgx would run a *json.RawMessage target through json.Unmarshal, which trims the
// whitespace around the value.)
func rawJSON(v *json.RawMessage) *[]byte { return (*[]byte)(v) }

// KnownEvents reports, for each ref in order, whether that event is on file for the
// organization. It reads the database once.
func (s *Store) KnownEvents(ctx context.Context, orgID string, refs []store.EventRef, check *store.KeyCheck) ([]bool, error) {
	rs, err := s.Ringing(ctx, orgID, refs, check)
	if err != nil {
		return nil, err
	}
	known := make([]bool, len(rs))
	for i, r := range rs {
		known[i] = r.Known
	}
	return known, nil
}

// Ringing reports, for each ref in order, whether the event is on file and its call's state.
// See store.Store.
func (s *Store) Ringing(ctx context.Context, orgID string, refs []store.EventRef, check *store.KeyCheck) ([]store.Ringing, error) {
	out := make([]store.Ringing, len(refs))
	if len(refs) == 0 && check == nil {
		return out, nil
	}
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: ringing: %w", err)
	}
	defer conn.Release()
	if len(refs) > 0 {
		p := s.readParams.Get().(*params)
		if len(refs) == 1 {
			err = ringingOne(ctx, conn, orgID, refs[0], check, &out[0], p)
		} else {
			err = ringingMany(ctx, conn, orgID, refs, check, out, p)
		}
		s.readParams.Put(p)
		if err != nil {
			if pgCode(err) == codeKeyRejected {
				return nil, fmt.Errorf("postgres: ringing: %w", store.ErrKeyRejected)
			}
			return nil, fmt.Errorf("postgres: ringing: %w", classify(ctx, conn, err))
		}
		return out, nil
	}
	// Only a check.
	b := &pgx.Batch{}
	queueCheck(b, check)
	br := conn.SendBatch(ctx, b)
	err = readCheck(br, check)
	if err = cmp.Or(err, br.Close()); err != nil {
		if pgCode(err) == codeKeyRejected {
			return nil, fmt.Errorf("postgres: ringing: %w", store.ErrKeyRejected)
		}
		return nil, fmt.Errorf("postgres: ringing: %w", classify(ctx, conn, err))
	}
	return out, nil
}

// ringingManySQL is ringingSQL for several refs in one statement: a row (ordinal, known, state)
// per ref whose call is on file, the ordinal counting refs from 1. The lookups are a lateral
// subquery kept apart from the unnest (OFFSET 0), so each is the two unique-index probes of
// ringingSQL whatever the planner knows of the tables. checkedRingingManySQL adds the key check
// ($5 client ID, $6 secret hash, $7 time) as a first row of ordinal 0, run before the lookups.
//
// The arrays are read through scalar subqueries, which hide their lengths from the planner. A
// custom plan, made with the parameters' values, would see each run's length and cost fewer
// probes than the generic plan, which assumes an unnest of unknown length; for most lengths the
// plan cache then never chose the generic plan, and planned the statement again on every run:
// about three times the CPU of running it (TestHotStatementsKeepTheirPlans).
const ringingManySQL = `
SELECT u.i, r.known, r.state
FROM unnest((SELECT $2::text[]), (SELECT $3::text[]), (SELECT $4::text[]))
	WITH ORDINALITY AS u (provider, provider_call_id, dedupe_key, i)
CROSS JOIN LATERAL (
	SELECT EXISTS (
			SELECT 1 FROM call_events e WHERE e.org_id = c.org_id AND e.call_no = c.call_no AND e.dedupe_key = u.dedupe_key),
		c.state
	FROM calls c WHERE c.org_id = $1 AND c.provider = u.provider AND c.provider_call_id = u.provider_call_id
	OFFSET 0) AS r (known, state)`

const checkedRingingManySQL = `
SELECT 0::bigint, ` + keyCheckAt5 + `, NULL::smallint
UNION ALL` + ringingManySQL

// Names of the ringing lookups' prepared statements.
const (
	ringingName            = "callwire_ringing"
	checkedRingingName     = "callwire_ringing_checked"
	ringingManyName        = "callwire_ringing_many"
	checkedRingingManyName = "callwire_ringing_many_checked"
)

// ringingOne fills out for one ref: an equality lookup, two unique-index probes, a plan the
// planner picks with or without table statistics (so does ringingManySQL's lateral lookup; a
// plain join over an unnest of the refs does not: on a never-analyzed table it can scan every
// call of the organization). A check guards the lookup (checkedRingingSQL). Like ringingMany,
// the statement is prepared by name, its parameters written into p in binary format, its row read
// as text.
func ringingOne(ctx context.Context, conn *pgxpool.Conn, orgID string, ref store.EventRef, check *store.KeyCheck, out *store.Ringing, p *params) error {
	p.reset(256 + len(orgID) + len(ref.Provider) + len(ref.ProviderCallID) + len(ref.DedupeKey))
	p.text(orgID)
	p.text(ref.Provider)
	p.text(ref.ProviderCallID)
	p.text(ref.DedupeKey)
	name, sql, columns := ringingName, ringingSQL, 2
	if check != nil {
		name, sql, columns = checkedRingingName, checkedRingingSQL, 3
		p.keyCheck(check)
	}
	sd, err := prepared(ctx, conn, p, name, sql, "ringing")
	if err != nil {
		return err
	}
	// checkedRingingSQL's one row: the check's result, then known and state, NULL when the call
	// is not on file; ringingSQL's: known and state, or no row.
	rows := 0
	err = p.exec(ctx, conn, sd, func(v [][]byte) error {
		rows++
		if len(v) != columns {
			return fmt.Errorf("ringing returned %d columns, want %d", len(v), columns)
		}
		if columns == 3 {
			if string(v[0]) != "t" {
				return keyCheckFalse()
			}
			v = v[1:]
		}
		if v[0] == nil || v[1] == nil {
			return nil // not on file
		}
		state, err := strconv.ParseInt(string(v[1]), 10, 16)
		if err != nil {
			return fmt.Errorf("ringing returned state %q", v[1])
		}
		*out = store.Ringing{Known: string(v[0]) == "t", State: store.State(state)}
		return nil
	})
	if err == nil && check != nil && rows != 1 {
		err = fmt.Errorf("ringing returned %d rows with the key check, want 1", rows)
	}
	return err
}

// ringingMany fills out (one entry per ref, zero when the call is not on file) in one statement,
// prepared by name and sent with its parameters in binary format, written into p as a batch's
// write writes them (params.go); its rows are read as text.
func ringingMany(ctx context.Context, conn *pgxpool.Conn, orgID string, refs []store.EventRef, check *store.KeyCheck, out []store.Ringing, p *params) error {
	size := 256 + len(orgID)
	for i := range refs {
		size += 24 + len(refs[i].Provider) + len(refs[i].ProviderCallID) + len(refs[i].DedupeKey)
	}
	p.reset(size)
	p.text(orgID)
	p.textArray(len(refs), func(i int) string { return refs[i].Provider })
	p.textArray(len(refs), func(i int) string { return refs[i].ProviderCallID })
	p.textArray(len(refs), func(i int) string { return refs[i].DedupeKey })
	name, sql := ringingManyName, ringingManySQL
	if check != nil {
		name, sql = checkedRingingManyName, checkedRingingManySQL
		p.keyCheck(check)
	}
	sd, err := prepared(ctx, conn, p, name, sql, "ringing")
	if err != nil {
		return err
	}
	checked := false
	// Rows, as text: the ref's ordinal, known ("t" or "f"), the call's state (NULL in the
	// check's row).
	err = p.exec(ctx, conn, sd, func(v [][]byte) error {
		if len(v) != 3 {
			return fmt.Errorf("ringing returned %d columns, want 3", len(v))
		}
		i, err := strconv.ParseInt(string(v[0]), 10, 64)
		if err != nil {
			return fmt.Errorf("ringing returned ordinal %q", v[0])
		}
		known := string(v[1]) == "t"
		switch {
		case i == 0 && check != nil:
			if !known {
				return keyCheckFalse()
			}
			checked = true
		case i < 1 || i > int64(len(refs)) || v[2] == nil:
			return fmt.Errorf("ringing returned ref %d of %d", i, len(refs))
		default:
			state, err := strconv.ParseInt(string(v[2]), 10, 16)
			if err != nil {
				return fmt.Errorf("ringing returned state %q", v[2])
			}
			out[i-1] = store.Ringing{Known: known, State: store.State(state)}
		}
		return nil
	})
	if err == nil && check != nil && !checked {
		err = keyCheckFalse()
	}
	return err
}

// ringingSQL reads whether the event with dedupe key $4 of the call ($1, $2, $3) is on file and
// the call's state: one row, or none when the call is not on file.
const ringingSQL = `
SELECT EXISTS (
		SELECT 1 FROM call_events e WHERE e.org_id = c.org_id AND e.call_no = c.call_no AND e.dedupe_key = $4),
	c.state
FROM calls c WHERE c.org_id = $1 AND c.provider = $2 AND c.provider_call_id = $3`

// checkedRingingSQL is ringingSQL guarded by the key check ($5 client ID, $6 secret hash, $7
// time). It always returns one row, so the check always runs: the check's result, then
// ringingSQL's columns, NULL when the call is not on file. A dead key raises CWK01.
const checkedRingingSQL = `
SELECT ` + keyCheckAt5 + `, r.known, r.state
FROM (VALUES (true)) AS one (x)
LEFT JOIN (` + ringingSQL + `) AS r (known, state) ON true`

// keyCheckFalse is the error of a key check that returned false. The check raises CWK01 rather
// than return false; should it ever return false, the key counts as rejected.
func keyCheckFalse() error {
	return &pgconn.PgError{Code: codeKeyRejected, Message: "key check returned false"}
}

// codeKeyRejected is the SQLSTATE the key check raises (callwire_key_rejected, and
// callwire_check_key before it) when a KeyCheck fails.
const codeKeyRejected = "CWK01"

// queueCheck queues the key guard, when there is one, as a statement of its own: a failure
// aborts the batch's implicit transaction, so nothing after it takes effect. Batches with other
// work fold the guard into their first statement instead.
func queueCheck(b *pgx.Batch, c *store.KeyCheck) {
	if c != nil {
		b.Queue(`SELECT `+keyCheckAt1, c.ClientID, c.SecretHash, c.At)
	}
}

// readCheck reads the key guard's result, when one was queued.
func readCheck(br pgx.BatchResults, c *store.KeyCheck) error {
	if c == nil {
		return nil
	}
	var ok bool
	if err := br.QueryRow().Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return keyCheckFalse()
	}
	return nil
}

// GetCall returns the call and its events ordered by (sequence, OrderAt, ReceivedAt, ID), or an
// error wrapping store.ErrNotFound. Call and events are read in one round trip.
func (s *Store) GetCall(ctx context.Context, orgID, provider, providerCallID string) (store.Call, []store.Event, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return store.Call{}, nil, fmt.Errorf("postgres: get call: %w", err)
	}
	defer conn.Release()

	b := &pgx.Batch{}
	b.Queue(`SELECT call_no, id, direction, state, block, block_sequence, block_at, first_at, last_at, clients,
			created_at, updated_at, `+summaryColumns+`
		FROM calls WHERE org_id = $1 AND provider = $2 AND provider_call_id = $3`,
		orgID, provider, providerCallID)
	b.Queue(`SELECT e.id, e.call_id, e.type, e.dedupe_key, e.sequence, COALESCE(e.provider_event_id, ''),
			e.occurred_at, e.order_at, e.received_at, e.body
		FROM calls c JOIN call_events e ON e.org_id = c.org_id AND e.call_no = c.call_no
		WHERE c.org_id = $1 AND c.provider = $2 AND c.provider_call_id = $3
		ORDER BY e.sequence, e.order_at, e.received_at, e.id`,
		orgID, provider, providerCallID)
	br := conn.SendBatch(ctx, b)

	c := store.Call{OrgID: orgID, Provider: provider, ProviderCallID: providerCallID}
	events := []store.Event{}
	var (
		state int16
		sum   summaryScan
	)
	readErr := br.QueryRow().Scan(append([]any{&c.No, &c.ID, &c.Direction, &state, rawJSON(&c.Block), &c.BlockSequence, &c.BlockAt,
		&c.FirstAt, &c.LastAt, rawJSON(&c.Clients), &c.CreatedAt, &c.UpdatedAt}, sum.dest()...)...)
	c.Summary = sum.summary()
	if readErr == nil {
		rows, _ := br.Query()
		var e store.Event
		_, readErr = pgx.ForEachRow(rows, []any{&e.ID, &e.CallID, &e.Type, &e.DedupeKey, &e.Sequence,
			&e.ProviderEventID, &e.OccurredAt, &e.OrderAt, &e.ReceivedAt, rawJSON(&e.Body)}, func() error {
			ev := e
			ev.OccurredAt, ev.OrderAt, ev.ReceivedAt = utc(e.OccurredAt), utc(e.OrderAt), utc(e.ReceivedAt)
			events = append(events, ev)
			return nil
		})
	}
	closeErr := br.Close()
	if errors.Is(readErr, pgx.ErrNoRows) && closeErr == nil {
		return store.Call{}, nil, fmt.Errorf("postgres: get call %q/%q: %w", provider, providerCallID, store.ErrNotFound)
	}
	if err := cmp.Or(readErr, closeErr); err != nil {
		return store.Call{}, nil, fmt.Errorf("postgres: get call: %w", classify(ctx, conn, err))
	}
	c.State = store.State(state)
	c.BlockAt, c.FirstAt, c.LastAt = utc(c.BlockAt), utc(c.FirstAt), utc(c.LastAt)
	c.CreatedAt, c.UpdatedAt = utc(c.CreatedAt), utc(c.UpdatedAt)
	return c, events, nil
}

// summaryColumns are the columns of a call's summary, in the order summaryScan.dest reads them.
const summaryColumns = `answered_at, answered_by, ended_at, flags, from_key, to_key, from_ext, to_ext, locations`

// summaryScan receives summaryColumns.
type summaryScan struct {
	answeredAt, endedAt *time.Time
	flags               int16
	s                   store.Summary
}

// dest returns the scan destinations of summaryColumns.
func (m *summaryScan) dest() []any {
	return []any{&m.answeredAt, &m.s.AnsweredBy, &m.endedAt, &m.flags, &m.s.FromKey, &m.s.ToKey,
		&m.s.FromExt, &m.s.ToExt, rawJSON(&m.s.Locations)}
}

// summary returns the summary scanned, its times in UTC.
func (m *summaryScan) summary() store.Summary {
	s := m.s
	if m.answeredAt != nil {
		s.AnsweredAt = m.answeredAt.UTC()
	}
	if m.endedAt != nil {
		s.EndedAt = m.endedAt.UTC()
	}
	s.Flags = store.Flags(m.flags)
	return s
}
