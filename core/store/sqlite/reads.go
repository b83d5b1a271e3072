package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/callwire/callwire/core/store"
)

// The reads of the write path's tables that serve the pipeline and the API: whether events are on
// file, a call's ring state, a call with its events. The history's lists are in history.go, the
// writes in calls.go.

// KnownEvents reports, for each ref in order, whether that event is on file for the
// organization. See store.Store. It runs the ring's read and keeps what it says of the events.
func (s *Store) KnownEvents(ctx context.Context, orgID string, refs []store.EventRef, check *store.KeyCheck) ([]bool, error) {
	rs, err := s.ringing(ctx, "known events", orgID, refs, check)
	if err != nil {
		return nil, err
	}
	known := make([]bool, len(rs))
	for i, r := range rs {
		known[i] = r.Known
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
	var (
		state, no int64
		sum       summaryScan
	)
	err = tx.QueryRowContext(ctx, `SELECT call_no, call_id, direction, state, block, block_seq, block_at,
		first_at, last_at, clients, created_at, updated_at, `+summaryColumns+`
		FROM calls WHERE org_id = ? AND call_id = ? AND provider = ? AND provider_call_id = ?`,
		orgID, store.CallID(orgID, provider, providerCallID), provider, providerCallID).Scan(append([]any{&no, &c.ID, &c.Direction, &state, jsonCol{(*[]byte)(&c.Block)},
		&c.BlockSequence, timeCol{&c.BlockAt}, timeCol{&c.FirstAt}, timeCol{&c.LastAt},
		jsonCol{(*[]byte)(&c.Clients)}, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt}}, sum.dest()...)...)
	c.Summary = sum.summary()
	if errors.Is(err, sql.ErrNoRows) {
		return store.Call{}, nil, fmt.Errorf("sqlite: get call %s/%s: %w", provider, providerCallID, store.ErrNotFound)
	}
	if err != nil {
		return store.Call{}, nil, wrapErr(ctx, "get call", err)
	}
	c.State, c.No = store.State(state), no

	rows, err := tx.QueryContext(ctx, `SELECT event_id, type, dedupe_key, sequence, provider_event_id,
		occurred_at, order_at, received_at, body
		FROM call_events WHERE org_id = ? AND call_no = ?
		ORDER BY sequence, order_at, received_at, event_id`, orgID, no)
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

// Ringing reports, for each ref in order, whether the event is on file and its call's state: one
// prepared query per run of up to 64 refs. See store.Store.
func (s *Store) Ringing(ctx context.Context, orgID string, refs []store.EventRef, check *store.KeyCheck) ([]store.Ringing, error) {
	return s.ringing(ctx, "ringing", orgID, refs, check)
}

// ringing reads what Ringing returns; op names the operation in its errors. A check is made by
// the statement of the first run of refs (checkedRingingSQL), so that the key and the
// calls are read from one snapshot and the check costs no statement of its own.
func (s *Store) ringing(ctx context.Context, op, orgID string, refs []store.EventRef, check *store.KeyCheck) ([]store.Ringing, error) {
	fail := func(err error) ([]store.Ringing, error) {
		if errors.Is(err, store.ErrKeyRejected) {
			return nil, fmt.Errorf("sqlite: %s: %w", op, err)
		}
		return nil, wrapErr(ctx, op, err)
	}
	if len(refs) == 0 {
		if err := s.checkKeyRead(ctx, check); err != nil {
			return fail(err)
		}
		return []store.Ringing{}, nil
	}
	out := make([]store.Ringing, len(refs))
	args := make([]any, 0, 5*min(len(refs), 1<<maxRowsLog)+4)
	start := 0
	err := eachRun(refs, func(k int, run []store.EventRef) error {
		args = args[:0]
		for i, r := range run {
			args = append(args, int64(start+i), store.CallID(orgID, r.Provider, r.ProviderCallID), r.Provider, r.ProviderCallID, r.DedupeKey)
		}
		args = append(args, orgID)
		text := s.ringingTexts[k]
		checked := check != nil && start == 0
		if checked {
			text = s.checkedRingingTexts[k]
			args = append(args, check.ClientID, check.SecretHash, encTime(check.At))
		}
		start += len(run)
		stmt, err := s.readStmt(ctx, text)
		if err != nil {
			return err
		}
		keyLive, err := readRinging(ctx, stmt, args, out)
		if err == nil && checked && !keyLive {
			return store.ErrKeyRejected
		}
		return err
	})
	if err != nil {
		return fail(err)
	}
	return out, nil
}

// readRinging runs stmt (ringingSQL or checkedRingingSQL) with args and sets the entry of out of
// each ref on file. keyLive reports whether the key check's row came.
func readRinging(ctx context.Context, stmt *sql.Stmt, args []any, out []store.Ringing) (keyLive bool, err error) {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var i, state int64
		var known bool
		if err := rows.Scan(&i, &state, &known); err != nil {
			return false, err
		}
		if i == keyCheckRow {
			keyLive = true
			continue
		}
		if i < 0 || i >= int64(len(out)) {
			return false, fmt.Errorf("ref %d of %d", i, len(out))
		}
		out[i] = store.Ringing{Known: known, State: store.State(state)}
	}
	return keyLive, rows.Err()
}

// ringingSQL reads, for n refs (each its index, its call's ID, provider, provider call ID and
// the dedupe key of a call_received), the index, the call's state and whether the event is on
// file of each ref whose call is on file, for the organization bound last.
func ringingSQL(n int) string {
	var b strings.Builder
	b.WriteString(`WITH r (i, call_id, provider, provider_call_id, dedupe_key) AS (VALUES `)
	rowsSQL(&b, n, 5)
	b.WriteString(`) SELECT r.i, c.state, EXISTS (SELECT 1 FROM call_events e
			WHERE e.org_id = c.org_id AND e.call_no = c.call_no AND e.dedupe_key = r.dedupe_key)
		FROM r JOIN calls c ON c.org_id = ? AND c.call_id = r.call_id
			AND c.provider = r.provider AND c.provider_call_id = r.provider_call_id`)
	return b.String()
}

// checkedRingingSQL is ringingSQL(n) withKeyCheck: one more row, (keyCheckRow, 0, true), for a
// live key.
func checkedRingingSQL(n int) string { return withKeyCheck(ringingSQL(n), "0, 1") }

// checkKeyRead runs a KeyCheck, when there is one, on the reader pool: store.ErrKeyRejected
// unless a live key has the client ID and secret hash.
func (s *Store) checkKeyRead(ctx context.Context, check *store.KeyCheck) error {
	if check == nil {
		return nil
	}
	stmt, err := s.readStmt(ctx, checkKeySQL)
	if err != nil {
		return err
	}
	var one int
	err = stmt.QueryRowContext(ctx, check.ClientID, check.SecretHash, encTime(check.At)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrKeyRejected
	}
	return err
}

// summaryColumns are the columns of a call's summary, in the order summaryScan.dest reads them.
const summaryColumns = `answered_at, answered_by, ended_at, flags, from_key, to_key, from_ext, to_ext, locations`

// summaryScan receives summaryColumns.
type summaryScan struct {
	answeredAt, endedAt *time.Time
	flags               int64
	s                   store.Summary
}

// dest returns the scan destinations of summaryColumns.
func (m *summaryScan) dest() []any {
	return []any{timePtrCol{&m.answeredAt}, &m.s.AnsweredBy, timePtrCol{&m.endedAt}, &m.flags, &m.s.FromKey,
		&m.s.ToKey, &m.s.FromExt, &m.s.ToExt, jsonCol{(*[]byte)(&m.s.Locations)}}
}

// summary returns the summary scanned.
func (m *summaryScan) summary() store.Summary {
	s := m.s
	if m.answeredAt != nil {
		s.AnsweredAt = *m.answeredAt
	}
	if m.endedAt != nil {
		s.EndedAt = *m.endedAt
	}
	s.Flags = store.Flags(m.flags)
	return s
}
