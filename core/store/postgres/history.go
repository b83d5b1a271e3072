package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
)

// historyColumns are the columns scanHistoryCall reads, of calls as c.
const historyColumns = `c.call_no, c.id, c.provider, c.provider_call_id, c.direction, c.state, c.block,
	c.block_sequence, c.block_at, c.first_at, c.last_at, c.clients, c.created_at, c.updated_at,
	c.answered_at, c.answered_by, c.ended_at, c.flags, c.from_key, c.to_key, c.from_ext, c.to_ext, c.locations`

// scanHistoryCall scans one row of historyColumns.
func scanHistoryCall(row pgx.Row, orgID string) (store.Call, error) {
	c := store.Call{OrgID: orgID}
	var (
		state int16
		sum   summaryScan
	)
	err := row.Scan(append([]any{&c.No, &c.ID, &c.Provider, &c.ProviderCallID, &c.Direction, &state,
		rawJSON(&c.Block), &c.BlockSequence, &c.BlockAt, &c.FirstAt, &c.LastAt, rawJSON(&c.Clients),
		&c.CreatedAt, &c.UpdatedAt}, sum.dest()...)...)
	if err != nil {
		return store.Call{}, err
	}
	c.State = store.State(state)
	c.Summary = sum.summary()
	c.BlockAt, c.FirstAt, c.LastAt = utc(c.BlockAt), utc(c.FirstAt), utc(c.LastAt)
	c.CreatedAt, c.UpdatedAt = utc(c.CreatedAt), utc(c.UpdatedAt)
	return c, nil
}

// eventsOfSQL reads the events of the calls numbered $2 (an array), in the order of the
// calls' numbers and then the order GetCall gives.
const eventsOfSQL = `SELECT e.call_no, e.id, e.call_id, e.type, e.dedupe_key, e.sequence, COALESCE(e.provider_event_id, ''),
	e.occurred_at, e.order_at, e.received_at, e.body
	FROM call_events e WHERE e.org_id = $1 AND e.call_no = ANY($2::bigint[])
	ORDER BY e.call_no, e.sequence, e.order_at, e.received_at, e.id`

// eventsOf reads the events of recs' calls into them, in one query on conn.
func eventsOf(ctx context.Context, conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, orgID string, recs []store.CallRecord) error {
	if len(recs) == 0 {
		return nil
	}
	nos := make([]int64, len(recs))
	at := make(map[int64]int, len(recs))
	for i := range recs {
		nos[i] = recs[i].Call.No
		at[recs[i].Call.No] = i
		recs[i].Events = []store.Event{}
	}
	rows, err := conn.Query(ctx, eventsOfSQL, orgID, nos)
	if err != nil {
		return err
	}
	var (
		no int64
		e  store.Event
	)
	_, err = pgx.ForEachRow(rows, []any{&no, &e.ID, &e.CallID, &e.Type, &e.DedupeKey, &e.Sequence,
		&e.ProviderEventID, &e.OccurredAt, &e.OrderAt, &e.ReceivedAt, rawJSON(&e.Body)}, func() error {
		i, ok := at[no]
		if !ok {
			return fmt.Errorf("an event of call %d, not asked for", no)
		}
		ev := e
		ev.OccurredAt, ev.OrderAt, ev.ReceivedAt = utc(e.OccurredAt), utc(e.OrderAt), utc(e.ReceivedAt)
		recs[i].Events = append(recs[i].Events, ev)
		return nil
	})
	return err
}

// GetCallByID returns the organization's call whose ID is id, with its events, or an error
// wrapping store.ErrNotFound. It reads through the index calls_id_idx, in one snapshot, on the
// replica when the store has one (replica.go).
func (s *Store) GetCallByID(ctx context.Context, orgID, id string) (store.Call, []store.Event, error) {
	var (
		c    store.Call
		recs []store.CallRecord
	)
	err := s.read(ctx, readGetCallByID, func(conn *pgxpool.Conn) error {
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return classify(ctx, conn, err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		c, err = scanHistoryCall(tx.QueryRow(ctx, `SELECT `+historyColumns+` FROM calls c WHERE c.org_id = $1 AND c.id = $2`,
			orgID, id), orgID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("call %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return classify(ctx, conn, err)
		}
		recs = []store.CallRecord{{Call: c}}
		return classify(ctx, conn, eventsOf(ctx, tx, orgID, recs))
	})
	if err != nil {
		return store.Call{}, nil, err
	}
	return c, recs[0].Events, nil
}

// ListCalls returns a page of the organization's calls that f selects, newest first, each with
// its events, read in one snapshot: the calls through calls_started_idx walked backwards (or a
// number index, when f.Number is set), then their events in one query, on the replica when the
// store has one (replica.go). See store.Store.
func (s *Store) ListCalls(ctx context.Context, orgID string, f store.CallFilter, after *store.CallPosition, limit int) ([]store.CallRecord, error) {
	if err := store.CheckList(f, limit); err != nil {
		return nil, fmt.Errorf("postgres: list calls: %w", err)
	}
	q, args := listCallsSQL(orgID, f, after, limit)
	var recs []store.CallRecord
	err := s.read(ctx, readListCalls, func(conn *pgxpool.Conn) error {
		recs = []store.CallRecord{}
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return classify(ctx, conn, err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return classify(ctx, conn, err)
		}
		for rows.Next() {
			c, err := scanHistoryCall(rows, orgID)
			if err != nil {
				rows.Close()
				return classify(ctx, conn, err)
			}
			recs = append(recs, store.CallRecord{Call: c})
		}
		if err := rows.Err(); err != nil {
			return classify(ctx, conn, err)
		}
		return classify(ctx, conn, eventsOf(ctx, tx, orgID, recs))
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// listCallsSQL returns the query of ListCalls and its arguments.
func listCallsSQL(orgID string, f store.CallFilter, after *store.CallPosition, limit int) (string, []any) {
	args := []any{orgID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var b strings.Builder
	b.WriteString(`SELECT ` + historyColumns + ` FROM calls c WHERE c.org_id = $1`)
	if !f.From.IsZero() {
		b.WriteString(` AND c.first_at >= ` + arg(f.From))
	}
	if !f.Until.IsZero() {
		b.WriteString(` AND c.first_at < ` + arg(f.Until))
	}
	if after != nil {
		b.WriteString(` AND (c.first_at, c.call_no) < (` + arg(after.StartedAt) + `, ` + arg(after.No) + `)`)
	}
	if len(f.Directions) > 0 {
		b.WriteString(` AND c.direction = ANY(` + arg(f.Directions) + `::text[])`)
	}
	if len(f.Outcomes) > 0 {
		var ors []string
		for _, o := range f.Outcomes {
			ors = append(ors, outcomeSQL(o))
		}
		b.WriteString(` AND (` + strings.Join(ors, " OR ") + `)`)
	}
	if m := f.Number; m != nil {
		if m.Trailing {
			lo, hi := arg(m.Key), arg(m.Key+":")
			b.WriteString(` AND ((c.from_key >= ` + lo + ` AND c.from_key < ` + hi + `) OR (c.to_key >= ` + lo + ` AND c.to_key < ` + hi + `))`)
		} else {
			k := arg(m.Key)
			b.WriteString(` AND (c.from_key = ` + k + ` OR c.to_key = ` + k + `)`)
		}
	}
	if f.Extension != "" {
		x := arg(f.Extension)
		b.WriteString(` AND (c.from_ext = ` + x + ` OR c.to_ext = ` + x + ` OR c.answered_by = ` + x + `)`)
	}
	if f.Location != "" {
		b.WriteString(` AND EXISTS (SELECT 1 FROM json_array_elements_text(c.locations) l WHERE l = ` + arg(f.Location) + `)`)
	}
	if f.Provider != "" {
		b.WriteString(` AND c.provider = ` + arg(f.Provider))
	}
	if f.Recorded {
		b.WriteString(` AND c.flags & ` + strconv.Itoa(int(store.FlagRecorded)) + ` > 0`) // see outcomeSQL
	}
	b.WriteString(` ORDER BY c.first_at DESC, c.call_no DESC LIMIT ` + strconv.Itoa(limit))
	return b.String(), args
}

// outcomeSQL is the predicate of outcome o over calls as c (see store.Outcome).
//
// A flag is tested as flags & bit > 0 or < 1, not = or <> 0 (the same, flags having no sign
// bit): PostgreSQL has no statistics of an expression, and guesses that an equality on one
// holds for 0.5% of rows, a range for a third. Guessing that 0.5% of a large organization's
// calls were missed, it judged a filtered page cheaper to read by sorting all of them than by
// walking calls_started_idx newest first until the page is full, and the page took hundreds of
// milliseconds instead of a few.
func outcomeSQL(o string) string {
	const ended = int(store.StateEnded)
	set := func(f store.Flags) string { return `c.flags & ` + strconv.Itoa(int(f)) + ` > 0` }
	unset := func(f store.Flags) string { return `c.flags & ` + strconv.Itoa(int(f)) + ` < 1` }
	switch o {
	case store.OutcomeInProgress:
		return `c.state < ` + strconv.Itoa(ended)
	case store.OutcomeVoicemail:
		return `(c.state = ` + strconv.Itoa(ended) + ` AND ` + set(store.FlagVoicemail) + `)`
	case store.OutcomeAnswered:
		return `(c.state = ` + strconv.Itoa(ended) + ` AND ` + set(store.FlagAnswered) + ` AND ` + unset(store.FlagVoicemail) + `)`
	case store.OutcomeMissed:
		return `(c.state = ` + strconv.Itoa(ended) + ` AND ` + unset(store.FlagAnswered|store.FlagVoicemail) + ` AND c.direction = 'inbound')`
	case store.OutcomeNotAnswered:
		return `(c.state = ` + strconv.Itoa(ended) + ` AND ` + unset(store.FlagAnswered|store.FlagVoicemail) + ` AND c.direction <> 'inbound')`
	}
	return `false`
}

// ringingCallsSQL reads the calls RingingCalls returns: $1 the organization, $2 since, $3 the
// ringing state, $4 the locations, through calls_started_idx walked backwards from now to since.
const ringingCallsSQL = `SELECT ` + historyColumns + ` FROM calls c
	WHERE c.org_id = $1 AND c.first_at >= $2 AND c.state = $3
	AND EXISTS (SELECT 1 FROM json_array_elements_text(c.locations) l WHERE l = ANY($4::text[]))
	ORDER BY c.first_at DESC, c.call_no DESC LIMIT `

// RingingCalls returns the organization's calls ringing now in locations, started at or after
// since, newest first. It reads the calls that started in that span through calls_started_idx
// and no index of its own: a new call pays nothing for it. See store.Store.
func (s *Store) RingingCalls(ctx context.Context, orgID string, locations []string, since time.Time, limit int) ([]store.Call, error) {
	if err := store.CheckRinging(locations, limit); err != nil {
		return nil, fmt.Errorf("postgres: ringing calls: %w", err)
	}
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: ringing calls: %w", err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, ringingCallsSQL+strconv.Itoa(limit), orgID, since, int16(store.StateRinging), locations)
	if err != nil {
		return nil, fmt.Errorf("postgres: ringing calls: %w", classify(ctx, conn, err))
	}
	calls := []store.Call{}
	for rows.Next() {
		c, err := scanHistoryCall(rows, orgID)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("postgres: ringing calls: %w", err)
		}
		calls = append(calls, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: ringing calls: %w", classify(ctx, conn, err))
	}
	return calls, nil
}
