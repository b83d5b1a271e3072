package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/callwire/callwire/core/store"
)

// historyColumns are the columns scanHistoryCall reads, of calls as c.
const historyColumns = `c.call_no, c.call_id, c.provider, c.provider_call_id, c.direction, c.state, c.block,
	c.block_seq, c.block_at, c.first_at, c.last_at, c.clients, c.created_at, c.updated_at,
	c.answered_at, c.answered_by, c.ended_at, c.flags, c.from_key, c.to_key, c.from_ext, c.to_ext, c.locations`

// scanHistoryCall scans one row of historyColumns.
func scanHistoryCall(row interface{ Scan(...any) error }, orgID string) (store.Call, error) {
	c := store.Call{OrgID: orgID}
	var (
		state int64
		sum   summaryScan
	)
	err := row.Scan(append([]any{&c.No, &c.ID, &c.Provider, &c.ProviderCallID, &c.Direction, &state,
		jsonCol{(*[]byte)(&c.Block)}, &c.BlockSequence, timeCol{&c.BlockAt}, timeCol{&c.FirstAt}, timeCol{&c.LastAt},
		jsonCol{(*[]byte)(&c.Clients)}, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt}}, sum.dest()...)...)
	if err != nil {
		return store.Call{}, err
	}
	c.State = store.State(state)
	c.Summary = sum.summary()
	return c, nil
}

// eventsOf reads the events of recs' calls into them, ordered as GetCall orders them, in one
// query through the events' unique key (org_id, call_no, dedupe_key). One query for a page's
// calls, rather than one per call: each statement run through database/sql and the driver
// costs more than the few rows it reads (docs/decisions.md, "A page of the history reads its
// calls' events in one statement").
func eventsOf(ctx context.Context, tx *sql.Tx, orgID string, recs []store.CallRecord) error {
	if len(recs) == 0 {
		return nil
	}
	args := make([]any, 0, 1+len(recs))
	args = append(args, orgID)
	at := make(map[int64]int, len(recs))
	for i := range recs {
		args = append(args, recs[i].Call.No)
		at[recs[i].Call.No] = i
		recs[i].Events = []store.Event{}
	}
	rows, err := tx.QueryContext(ctx, `SELECT call_no, event_id, type, dedupe_key, sequence, provider_event_id,
		occurred_at, order_at, received_at, body
		FROM call_events WHERE org_id = ? AND call_no IN (?`+strings.Repeat(", ?", len(recs)-1)+`)
		ORDER BY call_no, sequence, order_at, received_at, event_id`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			no int64
			e  store.Event
		)
		err := rows.Scan(&no, &e.ID, &e.Type, &e.DedupeKey, &e.Sequence, &e.ProviderEventID,
			timeCol{&e.OccurredAt}, timeCol{&e.OrderAt}, timeCol{&e.ReceivedAt}, jsonCol{(*[]byte)(&e.Body)})
		if err != nil {
			return err
		}
		i, ok := at[no]
		if !ok {
			return fmt.Errorf("an event of call %d, not asked for", no)
		}
		e.CallID = recs[i].Call.ID
		recs[i].Events = append(recs[i].Events, e)
	}
	return rows.Err()
}

// GetCallByID returns the organization's call whose ID is id, with its events, read from one
// snapshot, or store.ErrNotFound. See store.Store.
func (s *Store) GetCallByID(ctx context.Context, orgID, id string) (store.Call, []store.Event, error) {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.Call{}, nil, wrapErr(ctx, "get call by id", err)
	}
	defer func() { _ = tx.Rollback() }()
	c, err := scanHistoryCall(tx.QueryRowContext(ctx, `SELECT `+historyColumns+` FROM calls c
		WHERE c.org_id = ? AND c.call_id = ?`, orgID, id), orgID)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Call{}, nil, fmt.Errorf("sqlite: get call %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Call{}, nil, wrapErr(ctx, "get call by id", err)
	}
	recs := []store.CallRecord{{Call: c}}
	if err := eventsOf(ctx, tx, orgID, recs); err != nil {
		return store.Call{}, nil, wrapErr(ctx, "get call by id", err)
	}
	return c, recs[0].Events, nil
}

// ListCalls returns a page of the organization's calls that f selects, newest first, each with
// its events, read from one snapshot. See store.Store.
func (s *Store) ListCalls(ctx context.Context, orgID string, f store.CallFilter, after *store.CallPosition, limit int) ([]store.CallRecord, error) {
	if err := store.CheckList(f, limit); err != nil {
		return nil, fmt.Errorf("sqlite: list calls: %w", err)
	}
	q, args := listCallsSQL(orgID, f, after, limit)
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, wrapErr(ctx, "list calls", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, wrapErr(ctx, "list calls", err)
	}
	calls, err := collect(rows, func(r interface{ Scan(...any) error }) (store.Call, error) {
		return scanHistoryCall(r, orgID)
	})
	if err != nil {
		return nil, wrapErr(ctx, "list calls", err)
	}
	recs := make([]store.CallRecord, len(calls))
	for i, c := range calls {
		recs[i].Call = c
	}
	if err := eventsOf(ctx, tx, orgID, recs); err != nil {
		return nil, wrapErr(ctx, "list calls", err)
	}
	return recs, nil
}

// listCallsSQL returns the query of ListCalls and its arguments.
func listCallsSQL(orgID string, f store.CallFilter, after *store.CallPosition, limit int) (string, []any) {
	args := []any{orgID}
	arg := func(v any) string {
		args = append(args, v)
		return "?"
	}
	var b strings.Builder
	if f.Number != nil {
		// The unary + keeps SQLite from walking the list's index (see the number below): the
		// calls are then read by their numbers, and sorted.
		b.WriteString(`SELECT ` + historyColumns + ` FROM calls c WHERE +c.org_id = ?`)
	} else {
		b.WriteString(`SELECT ` + historyColumns + ` FROM calls c WHERE c.org_id = ?`)
	}
	if !f.From.IsZero() {
		b.WriteString(` AND c.first_at >= ` + arg(encTime(f.From)))
	}
	if !f.Until.IsZero() {
		b.WriteString(` AND c.first_at < ` + arg(encTime(f.Until)))
	}
	if after != nil {
		b.WriteString(` AND (c.first_at, c.call_no) < (` + arg(encTime(after.StartedAt)) + `, ` + arg(after.No) + `)`)
	}
	if len(f.Directions) > 0 {
		marks := make([]string, len(f.Directions))
		for i, d := range f.Directions {
			marks[i] = arg(d)
		}
		b.WriteString(` AND c.direction IN (` + strings.Join(marks, ", ") + `)`)
	}
	if len(f.Outcomes) > 0 {
		var ors []string
		for _, o := range f.Outcomes {
			ors = append(ors, outcomeSQL(o))
		}
		b.WriteString(` AND (` + strings.Join(ors, " OR ") + `)`)
	}
	if m := f.Number; m != nil {
		// As a set of call numbers read through each number index: written as an OR over the
		// row, SQLite without statistics walks the list's index instead, reading every call of
		// the organization.
		from, to := `c2.from_key = ?`, `c2.to_key = ?`
		keyArgs := []any{m.Key}
		if m.Trailing {
			from, to = `c2.from_key >= ? AND c2.from_key < ?`, `c2.to_key >= ? AND c2.to_key < ?`
			keyArgs = []any{m.Key, m.Key + ":"}
		}
		b.WriteString(` AND c.call_no IN (SELECT c2.call_no FROM calls c2 WHERE c2.org_id = ` + arg(orgID) + ` AND ` + from)
		args = append(args, keyArgs...)
		b.WriteString(` UNION SELECT c2.call_no FROM calls c2 WHERE c2.org_id = ` + arg(orgID) + ` AND ` + to + `)`)
		args = append(args, keyArgs...)
	}
	if x := f.Extension; x != "" {
		b.WriteString(` AND (c.from_ext = ` + arg(x) + ` OR c.to_ext = ` + arg(x) + ` OR c.answered_by = ` + arg(x) + `)`)
	}
	if f.Location != "" {
		b.WriteString(` AND EXISTS (SELECT 1 FROM json_each(c.locations) l WHERE l.value = ` + arg(f.Location) + `)`)
	}
	if f.Provider != "" {
		b.WriteString(` AND c.provider = ` + arg(f.Provider))
	}
	if f.Recorded {
		b.WriteString(` AND c.flags & ` + strconv.Itoa(int(store.FlagRecorded)) + ` <> 0`)
	}
	b.WriteString(` ORDER BY c.first_at DESC, c.call_no DESC LIMIT ` + strconv.Itoa(limit))
	return b.String(), args
}

// outcomeSQL is the predicate of outcome o over calls as c (see store.Outcome).
func outcomeSQL(o string) string {
	ended := strconv.Itoa(int(store.StateEnded))
	answered, voicemail := int(store.FlagAnswered), int(store.FlagVoicemail)
	either := strconv.Itoa(answered | voicemail)
	switch o {
	case store.OutcomeInProgress:
		return `c.state < ` + ended
	case store.OutcomeVoicemail:
		return `(c.state = ` + ended + ` AND c.flags & ` + strconv.Itoa(voicemail) + ` <> 0)`
	case store.OutcomeAnswered:
		return `(c.state = ` + ended + ` AND c.flags & ` + either + ` = ` + strconv.Itoa(answered) + `)`
	case store.OutcomeMissed:
		return `(c.state = ` + ended + ` AND c.flags & ` + either + ` = 0 AND c.direction = 'inbound')`
	case store.OutcomeNotAnswered:
		return `(c.state = ` + ended + ` AND c.flags & ` + either + ` = 0 AND c.direction <> 'inbound')`
	}
	return `0`
}

// RingingCalls returns the organization's calls ringing now in locations, started at or after
// since, newest first. It walks calls_started_idx backwards from now to since, so it reads the
// calls that started in that span and no index of its own: a new call pays nothing for it. See
// store.Store.
func (s *Store) RingingCalls(ctx context.Context, orgID string, locations []string, since time.Time, limit int) ([]store.Call, error) {
	if err := store.CheckRinging(locations, limit); err != nil {
		return nil, fmt.Errorf("sqlite: ringing calls: %w", err)
	}
	args := []any{orgID, encTime(since), int64(store.StateRinging)}
	for _, l := range locations {
		args = append(args, l)
	}
	rows, err := s.reader.QueryContext(ctx, ringingCallsSQL(len(locations), limit), args...)
	if err != nil {
		return nil, wrapErr(ctx, "ringing calls", err)
	}
	calls, err := collect(rows, func(r interface{ Scan(...any) error }) (store.Call, error) {
		return scanHistoryCall(r, orgID)
	})
	if err != nil {
		return nil, wrapErr(ctx, "ringing calls", err)
	}
	return calls, nil
}

// ringingCallsSQL is RingingCalls' query for n locations: the organization, since, the ringing
// state, then the n locations.
func ringingCallsSQL(n, limit int) string {
	return `SELECT ` + historyColumns + ` FROM calls c
		WHERE c.org_id = ? AND c.first_at >= ? AND c.state = ?
		AND EXISTS (SELECT 1 FROM json_each(c.locations) l WHERE l.value IN (?` + strings.Repeat(", ?", n-1) + `))
		ORDER BY c.first_at DESC, c.call_no DESC LIMIT ` + strconv.Itoa(limit)
}
