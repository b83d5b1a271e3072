package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
)

// A write of one call (a report of one to three events, most requests) is one statement when it
// carries 1 to maxEventRows events (oneCallSQL: the upsert and the events' insert, its events
// rows of scalar parameters), else two statements in one pipeline, one round trip and one
// implicit transaction: upsertCallSQL, then insertEventsSQL when there are events. Their
// parameters are written by params, as writeMany's are (params.go says why). As one statement,
// the write costs PostgreSQL less per event than as two; an earlier one-statement write, its
// events as arrays and its calls sorted and joined, cost more, because PostgreSQL planned it anew
// on every execution (docs/decisions.md, "A write of one call is one statement").

// The names the one-call statements are prepared under on each connection.
const (
	upsertCallName        = "callwire_upsert_call"
	checkedUpsertCallName = "callwire_upsert_call_checked"
	insertEventsName      = "callwire_insert_events"
)

// oneCallName is the prefix of the names oneCallSQL is prepared under: then "checked_" for the
// checked form, and the number of events.
const oneCallName = "callwire_write_one_"

// oneCallSQL is a write of one call with n events (1 to maxEventRows) as one statement, shaped
// as writeManySQL is: the call upserted as upsertCallSQL does (checkedUpsertCallSQL when
// checked), then the events not on file appended to the call the upsert returned. It returns the
// call's row (id, created, clients, the number the write moved the call from; key NULL), a row
// per event it stored (its dedupe key; the rest NULL), and a row for a to-call-back number to
// recompute (see callbackLockCTE: its number in the last column; the rest NULL). Parameters:
// upsertCallSQL's $1 to $23 (and the key check's $24 to $26), then eight a row per event: id,
// type, dedupe key, sequence, provider event ID, occurredAt, order time, body. Its one snapshot is taken before the upsert may
// wait for another writer of the call; as with writeManySQL, the events' ON CONFLICT still sees
// that writer's events once it has committed, and they count as duplicates.
func oneCallSQL(n int, checked bool) string {
	var b strings.Builder
	b.WriteString("\nWITH c AS (" + upsertCallInto)
	first := 24
	if checked {
		b.WriteString("\n\tSELECT " + upsertCallValues + "\n\tWHERE " + keyCheckAt24 + "\n\t")
		first = 27
	} else {
		b.WriteString("\n\tVALUES (" + upsertCallValues + ")\n\t")
	}
	b.WriteString(upsertCallConflict + `
	RETURNING ` + upsertCallReturning + `
), ` + callbackLockCTE + `, e AS (
	INSERT INTO call_events AS e (org_id, id, call_id, call_no, type, dedupe_key, sequence, provider_event_id,
		occurred_at, order_at, received_at, body)
	SELECT $1, n.id, c.id, c.call_no, n.type, n.dedupe_key, n.sequence, NULLIF(n.provider_event_id, ''), n.occurred_at,
		n.order_at, COALESCE($13, now()), n.body
	FROM c, (VALUES `)
	for i := range n {
		p := first + 8*i
		if i > 0 {
			b.WriteString(",\n\t\t")
		}
		fmt.Fprintf(&b, "($%d::text, $%d::text, $%d::text, $%d::bigint, $%d::text, $%d::timestamptz, $%d::timestamptz, $%d::json)",
			p, p+1, p+2, p+3, p+4, p+5, p+6, p+7)
	}
	b.WriteString(`)
		AS n(id, type, dedupe_key, sequence, provider_event_id, occurred_at, order_at, body)
	ON CONFLICT (org_id, call_no, dedupe_key) DO NOTHING
	RETURNING e.dedupe_key
)
SELECT c.id, c.created, c.clients, NULL::text, c.cb_moved_from FROM c
UNION ALL
SELECT NULL, NULL, NULL, e.dedupe_key, NULL FROM e
UNION ALL
SELECT NULL, NULL, NULL, NULL, b.number FROM b WHERE b.pending`)
	return b.String()
}

// writeOneStatement sends w, which holds one call of 1 to maxEventRows events, as oneCallSQL,
// and reads its result and the to-call-back numbers to recompute. The duplicates' IDs are left
// empty for readDuplicateIDs.
func (s *Store) writeOneStatement(ctx context.Context, conn *pgxpool.Conn, w store.Write, p *params) ([]store.CallResult, []string, error) {
	c := &w.Calls[0]
	p.oneCall(w)
	checked := 0
	name := oneCallName
	if w.Check != nil {
		checked, name = 1, oneCallName+"checked_"
	}
	n := len(c.Events)
	sd, err := prepared(ctx, conn, p, name+strconv.Itoa(n), s.oneCall[checked][n], "write")
	if err != nil {
		return nil, nil, err
	}
	var r store.CallResult
	var recompute []string
	calls := 0
	stored := make([]string, 0, n)
	err = p.exec(ctx, conn, sd, func(v [][]byte) error {
		switch {
		case len(v) != 5:
			return errors.New("write: the statement returned a malformed row")
		case v[0] != nil:
			calls++
			recompute = appendText(recompute, v[4])
			return readCallRow(v[:3], &r)
		case v[3] == nil:
			if v[4] == nil {
				return errors.New("write: the to-call-back lock returned a malformed row")
			}
			recompute = appendText(recompute, v[4])
			return nil
		case len(stored) == n:
			return errors.New("write: the events' insert returned a malformed row")
		}
		stored = append(stored, string(v[3]))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if err := oneCallRow(calls, w.Check != nil); err != nil {
		return nil, nil, err
	}
	r.Events = eventResults(c, stored)
	return []store.CallResult{r}, recompute, nil
}

// oneCall resets p and writes the parameters of oneCallSQL for w, which holds one call: the
// upsert's, the key check's when w has one, then eight for each event.
func (p *params) oneCall(w store.Write) {
	c := &w.Calls[0]
	p.upsertCall(&w, c, 0)
	if w.Check != nil {
		p.keyCheck(w.Check)
	}
	for j := range c.Events {
		e := &c.Events[j]
		p.text(e.ID)
		p.text(e.Type)
		p.text(e.DedupeKey)
		p.int8(e.Sequence)
		p.text(e.ProviderEventID)
		p.timestamptzAt(e.OccurredAt)
		p.timestamptzAt(e.OrderAt)
		p.json(e.Body)
	}
}

// appendText appends v, a text column, to list unless it is NULL.
func appendText(list []string, v []byte) []string {
	if v == nil {
		return list
	}
	return append(list, string(v))
}

// readCallRow reads the upsert's row (id, created, clients, as text) into r.
func readCallRow(v [][]byte, r *store.CallResult) error {
	if len(v) != 3 || v[0] == nil || len(v[1]) != 1 {
		return errors.New("write: the upsert returned a malformed row")
	}
	r.ID, r.Created = string(v[0]), v[1][0] == 't'
	if v[2] != nil {
		r.Clients = append(json.RawMessage(nil), v[2]...)
	}
	return nil
}

// oneCallRow returns an error unless the upsert of a one-call write returned exactly one row:
// none with a key check means the guard returned false (see keyCheckFalse).
func oneCallRow(rows int, checked bool) error {
	switch {
	case rows == 1:
		return nil
	case rows == 0 && checked:
		return keyCheckFalse()
	}
	return fmt.Errorf("write: the upsert returned %d rows", rows)
}

// eventResults is the result of each of c's events given the dedupe keys the write stored: a
// stored event has the ID the writer gave it; a duplicate's is read after the write
// (readDuplicateIDs).
func eventResults(c *store.CallWrite, stored []string) []store.EventResult {
	out := make([]store.EventResult, len(c.Events))
	for j, e := range c.Events {
		if slices.Contains(stored, e.DedupeKey) {
			out[j] = store.EventResult{ID: e.ID}
		} else {
			out[j] = store.EventResult{Duplicate: true}
		}
	}
	return out
}

// writeOne sends w, which holds one call, and reads its result and the to-call-back numbers to
// recompute. The duplicates' IDs are left empty for readDuplicateIDs.
func (s *Store) writeOne(ctx context.Context, conn *pgxpool.Conn, w store.Write, p *params) ([]store.CallResult, []string, error) {
	c := &w.Calls[0]
	if n := len(c.Events); n > 0 && n <= maxEventRows {
		return s.writeOneStatement(ctx, conn, w, p)
	}
	p.upsertCall(&w, c, len(c.Provider)+len(c.ProviderCallID))
	received := nullTime(w.ReceivedAt)
	upsertName, upsertSQL := upsertCallName, upsertCallSQL
	if w.Check != nil {
		upsertName, upsertSQL = checkedUpsertCallName, checkedUpsertCallSQL
		p.keyCheck(w.Check)
	}
	upsertParams := len(p.ends)

	var insertName, insertSQL string
	if n := len(c.Events); n > 0 {
		p.text(w.OrgID)
		p.text(c.Provider)
		p.text(c.ProviderCallID)
		p.timestamptz(received)
		insertName, insertSQL = insertEventsName, insertEventsSQL
		p.eventArrays(n, func(j int) *store.EventWrite { return &c.Events[j] })
	}

	upsert, err := conn.Conn().Prepare(ctx, upsertName, upsertSQL)
	if err != nil {
		return nil, nil, err
	}
	if err := p.checkFrom(0, upsertParams, upsert.ParamOIDs); err != nil {
		return nil, nil, fmt.Errorf("write: upsert: %w", err)
	}
	var insert *pgconn.StatementDescription
	if insertName != "" {
		if insert, err = conn.Conn().Prepare(ctx, insertName, insertSQL); err != nil {
			return nil, nil, err
		}
		if err := p.checkFrom(upsertParams, len(p.ends), insert.ParamOIDs); err != nil {
			return nil, nil, fmt.Errorf("write: events: %w", err)
		}
	}

	values := p.values()
	pl := conn.Conn().PgConn().StartPipeline(ctx)
	pl.SendQueryPrepared(upsert.Name, values[:upsertParams], binaryParams, nil)
	if insert != nil {
		pl.SendQueryPrepared(insert.Name, values[upsertParams:], binaryParams, nil)
	}
	results := make([]store.CallResult, 1)
	var recompute []string
	err = pl.Sync()
	if err == nil {
		recompute, err = readOne(pl, c, insert != nil, w.Check != nil, &results[0])
	}
	if cerr := pl.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, err
	}
	return results, recompute, nil
}

// readOne reads writeOne's results into r, and returns the to-call-back numbers to recompute:
// the upsert's row (id, created, clients, the number the call moved from, the number to
// recompute, as text), the stored events' dedupe keys when events were sent, then the
// pipeline's sync.
func readOne(pl *pgconn.Pipeline, c *store.CallWrite, events, checked bool, r *store.CallResult) ([]string, error) {
	rr, err := nextRows(pl)
	if err != nil {
		return nil, err
	}
	rows := 0
	var recompute []string
	err = eachRow(rr, func(v [][]byte) error {
		rows++
		if len(v) != 5 {
			return errors.New("write: the upsert returned a malformed row")
		}
		recompute = appendText(appendText(recompute, v[3]), v[4])
		return readCallRow(v[:3], r)
	})
	if err != nil {
		return nil, err
	}
	if err := oneCallRow(rows, checked); err != nil {
		return nil, err
	}
	r.Events = make([]store.EventResult, len(c.Events))
	if events {
		rr, err := nextRows(pl)
		if err != nil {
			return nil, err
		}
		var stored []string
		if err := eachRow(rr, func(v [][]byte) error {
			if len(v) != 1 || v[0] == nil {
				return errors.New("write: the events' insert returned a malformed row")
			}
			stored = append(stored, string(v[0]))
			return nil
		}); err != nil {
			return nil, err
		}
		r.Events = eventResults(c, stored)
	}
	res, err := pl.GetResults()
	if err != nil {
		return nil, err
	}
	if _, ok := res.(*pgconn.PipelineSync); !ok {
		return nil, fmt.Errorf("write: expected the pipeline's sync, got %T", res)
	}
	return recompute, nil
}

// nextRows returns the pipeline's next result, which must be a statement's rows.
func nextRows(pl *pgconn.Pipeline) (*pgconn.ResultReader, error) {
	res, err := pl.GetResults()
	if err != nil {
		return nil, err
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return nil, fmt.Errorf("write: expected a statement's rows, got %T", res)
	}
	return rr, nil
}

// eachRow calls row for each of rr's rows, all of them read even after row fails, and closes rr;
// the values are valid only during the call. It returns rr's error, else row's first.
func eachRow(rr *pgconn.ResultReader, row func(v [][]byte) error) error {
	var rowErr error
	for rr.NextRow() {
		if rowErr == nil {
			rowErr = row(rr.Values())
		}
	}
	if _, err := rr.Close(); err != nil {
		return err
	}
	return rowErr
}
