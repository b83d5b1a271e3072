package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
)

// binaryParams says every parameter is sent in binary format.
var binaryParams = []int16{1}

// writeManySQL is a Write of several calls as one statement: the calls upserted as
// upsertCallSQL does, in the order of the arrays, their numbers' to-call-back rows locked
// (callbackLockCTE), then the events not on file appended to the calls the upsert returned. It
// returns a row per call (provider, providerCallId, id, created, clients, the number the write
// moved the call from; key NULL), then a row of the number of events it stored (in the key's
// column; the rest NULL), then, only when that is fewer than it was given, a row per event it
// stored (call id and dedupe key; the rest NULL), then a row per to-call-back number to
// recompute (in the last column; the rest NULL). The common write, whose events are all new,
// so sends no row per event.
//
// A statement has one snapshot, taken before the upsert may wait for another writer of a call;
// the events' ON CONFLICT DO NOTHING still sees that writer's events once it has committed (the
// arbiter index is checked against every committed row, not the snapshot), so they count as
// duplicates and their IDs are read after the commit, as for a resend.
//
// An event's received time is its call's: the time the write of that call arrived, which a
// group's writes (group.go) each have their own of.
//
// Parameters: $1 organization; calls $2 received time (NULL for the database's clock), $3 id,
// $4 provider, $5 providerCallId, $6 direction, $7 state, $8 block, $9 block sequence, $10 block
// time, $11 first and $12 last event time, $13 clients; events $14 provider and $15
// providerCallId of their call, $16 id, $17 type, $18 dedupe key, $19 sequence, $20 provider
// event id, $21 occurredAt, $22 order time, $23 body; the calls' summaries (store.Summary) $24
// answered time, $25 answered by, $26 ended time, $27 flags, $28 and $29 the numbers' keys, $30
// and $31 the extensions, $32 locations, $33 the numbers they count toward on the to-call-back
// list ("" for none). checkedWriteManySQL adds the key check, $34 client ID, $35 secret hash,
// $36 time.
const writeManySQL = writeManyCalls + writeManyRest

const checkedWriteManySQL = writeManyCalls + `
	WHERE ` + keyCheckAt34 + writeManyRest

const writeManyCalls = `
WITH c AS (` + upsertCallInto + `
	SELECT $1, u.id, u.provider, u.provider_call_id, u.direction, u.state, u.block, u.block_sequence,
		u.block_at, u.first_at, u.last_at, u.clients, COALESCE(u.received_at, now()), COALESCE(u.received_at, now()),
		u.answered_at, u.answered_by, u.ended_at, u.flags, u.from_key, u.to_key, u.from_ext, u.to_ext, u.locations,
		NULLIF(u.cb_number, '')
	FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::smallint[], $8::json[], $9::bigint[],
		$10::timestamptz[], $11::timestamptz[], $12::timestamptz[], $13::json[], $2::timestamptz[],
		$24::timestamptz[], $25::text[], $26::timestamptz[], $27::smallint[], $28::text[], $29::text[], $30::text[],
		$31::text[], $32::json[], $33::text[])
		AS u(id, provider, provider_call_id, direction, state, block, block_sequence, block_at, first_at, last_at, clients,
			received_at, answered_at, answered_by, ended_at, flags, from_key, to_key, from_ext, to_ext, locations,
			cb_number)`

const writeManyRest = `
	` + upsertCallConflict + `
	RETURNING ` + upsertCallReturning + `
), ` + callbackLockCTE + `, e AS (
	INSERT INTO call_events AS e (org_id, id, call_id, call_no, type, dedupe_key, sequence, provider_event_id,
		occurred_at, order_at, received_at, body)
	SELECT $1, n.id, c.id, c.call_no, n.type, n.dedupe_key, n.sequence, NULLIF(n.provider_event_id, ''), n.occurred_at,
		n.order_at, c.updated_at, n.body
	FROM unnest($14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::bigint[], $20::text[],
		$21::timestamptz[], $22::timestamptz[], $23::json[])
		AS n(provider, provider_call_id, id, type, dedupe_key, sequence, provider_event_id, occurred_at, order_at, body)
	JOIN c ON c.provider = n.provider AND c.provider_call_id = n.provider_call_id
	ON CONFLICT (org_id, call_no, dedupe_key) DO NOTHING
	RETURNING e.call_id, e.dedupe_key
), n AS (
	SELECT count(*) AS stored FROM e
)
SELECT c.provider, c.provider_call_id, c.id, c.created, c.clients, NULL::text, c.cb_moved_from FROM c
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, n.stored::text, NULL FROM n
UNION ALL
SELECT NULL, NULL, e.call_id, NULL, NULL, e.dedupe_key, NULL FROM e
WHERE (SELECT n.stored FROM n) < cardinality($16::text[])
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, b.number FROM b WHERE b.pending`

// The names writeManySQL and checkedWriteManySQL are prepared under on each connection.
const (
	writeManyName        = "callwire_write_many"
	checkedWriteManyName = "callwire_write_many_checked"
)

// writeMany sends w (several calls) as one statement and reads its results, in the order of
// w.Calls. order is w.Calls sorted by (provider, providerCallId), the order calls are locked in.
// received[i], when received is not nil, is the time the write of call i arrived (a group's
// writes arrived apart); otherwise every call's is w.ReceivedAt. The statement's parameters are
// written into p (see params).
func writeMany(ctx context.Context, conn *pgxpool.Conn, w store.Write, order []int, received []time.Time, p *params) ([]store.CallResult, []string, error) {
	nc, ne := len(w.Calls), 0
	for i := range w.Calls {
		ne += len(w.Calls[i].Events)
	}
	name, sql := p.manyCalls(w, order, received)
	sd, err := prepared(ctx, conn, p, name, sql, "write")
	if err != nil {
		return nil, nil, err
	}
	var recompute []string

	type key struct{ provider, providerCallID string }
	index := make(map[key]int, nc)
	for i := range w.Calls {
		index[key{w.Calls[i].Provider, w.Calls[i].ProviderCallID}] = i
	}
	results := make([]store.CallResult, nc)
	seen := make([]bool, nc)
	calls := 0
	// stored[k] says whether event k, counting through the calls in the order of w.Calls, was
	// stored: all of them when the count says so, else those whose rows follow it. byKey finds
	// an event by its call's ID and its dedupe key, the columns of an event's row; it is made
	// once every call's row has been read (they come first), so that reading a row allocates
	// nothing.
	stored := make([]bool, ne)
	count, rows := int64(-1), int64(0)
	var byKey map[[2]string]int
	// Rows, all columns as text: provider, providerCallId, id, created, clients, dedupe key or
	// count, to-call-back number.
	err = p.exec(ctx, conn, sd, func(v [][]byte) error {
		if len(v) != 7 {
			return fmt.Errorf("write returned a row of %d columns", len(v))
		}
		switch {
		case v[2] == nil && v[5] == nil:
			// A to-call-back number to recompute.
			if v[6] == nil {
				return errors.New("write returned an empty row")
			}
			recompute = append(recompute, string(v[6]))
			return nil
		case v[2] == nil:
			// The count.
			if count >= 0 || calls != 0 && calls != nc {
				return errors.New("write returned its count twice or before every call")
			}
			n, err := strconv.ParseInt(string(v[5]), 10, 64)
			if err != nil || n < 0 || n > int64(ne) {
				return fmt.Errorf("write returned a count of %q events of %d", v[5], ne)
			}
			if count = n; n == int64(ne) {
				for k := range stored {
					stored[k] = true
				}
			}
			return nil
		case v[5] != nil:
			if count < 0 || count == int64(ne) {
				return fmt.Errorf("write returned event %q of call %q, not expected", v[5], v[2])
			}
			if byKey == nil {
				byKey = make(map[[2]string]int, ne)
				k := 0
				for i := range w.Calls {
					for _, e := range w.Calls[i].Events {
						byKey[[2]string{results[i].ID, e.DedupeKey}] = k
						k++
					}
				}
			}
			k, ok := byKey[[2]string{string(v[2]), string(v[5])}]
			if !ok || stored[k] {
				return fmt.Errorf("write returned event %q of call %q, not asked for or twice", v[5], v[2])
			}
			stored[k] = true
			rows++
			return nil
		}
		if count >= 0 {
			return errors.New("write returned a call after its count")
		}
		if v[0] == nil || v[1] == nil || len(v[3]) != 1 {
			return errors.New("write returned a call row without its key")
		}
		i, ok := index[key{string(v[0]), string(v[1])}]
		if !ok || seen[i] {
			return fmt.Errorf("write returned call %q/%q, not asked for or twice", v[0], v[1])
		}
		seen[i] = true
		calls++
		recompute = appendText(recompute, v[6])
		results[i] = store.CallResult{ID: string(v[2]), Created: v[3][0] == 't'}
		if v[4] != nil {
			results[i].Clients = append(json.RawMessage(nil), v[4]...)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if count < 0 || count < int64(ne) && rows != count {
		return nil, nil, fmt.Errorf("write returned %d event rows for a count of %d", rows, count)
	}
	if w.Check != nil && calls == 0 {
		// No call row at all: the guard returned false (see keyCheckFalse), the upsert formed
		// no row, and so no event joined one: nothing was written.
		return nil, nil, keyCheckFalse()
	}
	k := 0
	for i := range results {
		if !seen[i] {
			return nil, nil, fmt.Errorf("write returned no row for call %q/%q", w.Calls[i].Provider, w.Calls[i].ProviderCallID)
		}
		c := &w.Calls[i]
		r := &results[i]
		r.Events = make([]store.EventResult, len(c.Events))
		for j, e := range c.Events {
			if stored[k] {
				r.Events[j] = store.EventResult{ID: e.ID}
			} else {
				r.Events[j] = store.EventResult{Duplicate: true}
			}
			k++
		}
	}
	return results, recompute, nil
}

// manyCalls resets p and writes the parameters of writeMany's statement for w, its calls in
// order and received as writeMany takes them, and returns the name and text of the statement
// (checkedWriteManySQL when w has a key check, else writeManySQL).
func (p *params) manyCalls(w store.Write, order []int, received []time.Time) (name, sql string) {
	nc, ne := len(w.Calls), 0
	size := 256
	for i := range w.Calls {
		c := &w.Calls[i]
		ne += len(c.Events)
		size += 256 + store.CallIDLen + len(c.Provider) + len(c.ProviderCallID) + len(c.Direction) + len(c.Block) + len(c.Clients) +
			len(c.Summary.AnsweredBy) + len(c.Summary.FromKey) + len(c.Summary.ToKey) + len(c.Summary.FromExt) +
			len(c.Summary.ToExt) + len(c.Summary.Locations) + len(c.Summary.Callback)
		for j := range c.Events {
			size += eventSize(&c.Events[j]) + len(c.Provider) + len(c.ProviderCallID)
		}
	}
	p.reset(size)
	// The events in the order of the calls, and the call of each.
	p.events, p.eventCalls = p.events[:0], p.eventCalls[:0]
	for _, i := range order {
		c := &w.Calls[i]
		for j := range c.Events {
			p.events, p.eventCalls = append(p.events, &c.Events[j]), append(p.eventCalls, c)
		}
	}
	call := func(k int) *store.CallWrite { return &w.Calls[order[k]] }
	p.text(w.OrgID)
	p.nullTimestamptzArray(nc, func(k int) time.Time {
		if received != nil {
			return received[order[k]]
		}
		return w.ReceivedAt
	})
	// The calls' ids, derived from their keys, each written straight into the array.
	p.fixedArray(pgtype.TextOID, pgtype.TextArrayOID, nc, store.CallIDLen, func(k int) {
		c := call(k)
		p.buf = store.AppendCallID(p.buf, w.OrgID, c.Provider, c.ProviderCallID)
	})
	p.textArray(nc, func(k int) string { return call(k).Provider })
	p.textArray(nc, func(k int) string { return call(k).ProviderCallID })
	p.textArray(nc, func(k int) string { return call(k).Direction })
	p.int2Array(nc, func(k int) int16 { return int16(call(k).State) })
	p.jsonArray(nc, func(k int) json.RawMessage { return call(k).Block })
	p.int8Array(nc, func(k int) int64 { return call(k).BlockSequence })
	p.timestamptzArray(nc, func(k int) time.Time { return call(k).BlockAt })
	p.timestamptzArray(nc, func(k int) time.Time { return call(k).FirstAt })
	p.timestamptzArray(nc, func(k int) time.Time { return call(k).LastAt })
	p.jsonArray(nc, func(k int) json.RawMessage { return call(k).Clients })
	p.textArray(ne, func(k int) string { return p.eventCalls[k].Provider })
	p.textArray(ne, func(k int) string { return p.eventCalls[k].ProviderCallID })
	p.eventArrays(ne, func(k int) *store.EventWrite { return p.events[k] })
	p.nullTimestamptzArray(nc, func(k int) time.Time { return call(k).Summary.AnsweredAt })
	p.textArray(nc, func(k int) string { return call(k).Summary.AnsweredBy })
	p.nullTimestamptzArray(nc, func(k int) time.Time { return call(k).Summary.EndedAt })
	p.int2Array(nc, func(k int) int16 { return int16(call(k).Summary.Flags) })
	p.textArray(nc, func(k int) string { return call(k).Summary.FromKey })
	p.textArray(nc, func(k int) string { return call(k).Summary.ToKey })
	p.textArray(nc, func(k int) string { return call(k).Summary.FromExt })
	p.textArray(nc, func(k int) string { return call(k).Summary.ToExt })
	p.jsonArray(nc, func(k int) json.RawMessage { return call(k).Summary.Locations })
	p.textArray(nc, func(k int) string { return call(k).Summary.Callback })
	clear(p.events)
	clear(p.eventCalls)
	if w.Check != nil {
		p.keyCheck(w.Check)
		return checkedWriteManyName, checkedWriteManySQL
	}
	return writeManyName, writeManySQL
}
