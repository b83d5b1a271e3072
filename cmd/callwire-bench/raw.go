package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/event"
)

// rawSQL stores one request's calls and events in one statement, straight into the tables the
// service writes, with the service's guarantees: the calls are upserted (created, or folded into
// the call on file with the state climbing the ladder unknown < ringing < answered < ended and
// the call block following the latest event, as the service's own upsert does), and the events
// not yet on file are appended, payloads verbatim, the ones on file left alone. Sending it twice
// stores nothing new. Timestamps in the future are clamped to the database's clock for ordering,
// as the service clamps them to its own.
//
// Parameters: $1 organization; calls $2 id, $3 provider, $4 providerCallId, $5 direction, $6
// state, $7 block, $8 block sequence, $9 block time, $10 first and $11 last event time; events
// $12 id, $13 call id, $14 type, $15 dedupe key, $16 sequence, $17 occurredAt, $18 body.
const rawSQL = `
WITH c AS (
	INSERT INTO calls AS c (org_id, id, provider, provider_call_id, direction, state,
		block, block_sequence, block_at, first_at, last_at, created_at, updated_at)
	SELECT $1, u.id, u.provider, u.provider_call_id, u.direction, u.state, u.block, u.block_sequence,
		LEAST(u.block_at, now()), LEAST(u.first_at, now()), LEAST(u.last_at, now()), now(), now()
	FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::smallint[], $7::json[], $8::bigint[],
		$9::timestamptz[], $10::timestamptz[], $11::timestamptz[])
		AS u(id, provider, provider_call_id, direction, state, block, block_sequence, block_at, first_at, last_at)
	ON CONFLICT (org_id, provider, provider_call_id) DO UPDATE SET
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
		updated_at = EXCLUDED.updated_at
	RETURNING c.id, c.call_no
)
INSERT INTO call_events (org_id, id, call_id, call_no, type, dedupe_key, sequence, occurred_at, order_at, received_at, body)
SELECT $1, n.id, n.call_id, c.call_no, n.type, n.dedupe_key, n.sequence, n.occurred_at, LEAST(n.occurred_at, now()), now(),
	n.body
FROM unnest($12::text[], $13::text[], $14::text[], $15::text[], $16::bigint[], $17::timestamptz[], $18::json[])
	AS n(id, call_id, type, dedupe_key, sequence, occurred_at, body)
JOIN c ON c.id = n.call_id
ON CONFLICT (org_id, call_no, dedupe_key) DO NOTHING`

// rawWrite holds the parameters of rawSQL for one request.
type rawWrite struct {
	orgID string
	// One entry per call, in (provider, providerCallId) order.
	callIDs, providers, providerCallIDs, directions []string
	states                                          []int16
	blocks                                          []json.RawMessage
	blockSeqs                                       []int64
	blockAts, firstAts, lastAts                     []time.Time
	// One entry per event.
	eventIDs, eventCallIDs, types, dedupeKeys []string
	sequences                                 []int64
	occurredAts                               []time.Time
	bodies                                    []json.RawMessage
}

// args returns the parameters of rawSQL.
func (w *rawWrite) args() []any {
	return []any{w.orgID, w.callIDs, w.providers, w.providerCallIDs, w.directions, w.states, w.blocks,
		w.blockSeqs, w.blockAts, w.firstAts, w.lastAts,
		w.eventIDs, w.eventCallIDs, w.types, w.dedupeKeys, w.sequences, w.occurredAts, w.bodies}
}

// tplPos is a position in a template: a byte of one of its parts.
type tplPos struct{ part, off int }

// rawPlan is what a request template holds for the raw-SQL ceiling, found once by decoding a
// sample: where each event's body and call block lie, and the fields the body fixes. Building a
// request's parameters from it decodes nothing.
type rawPlan struct {
	calls  []rawCall
	events []rawEvent
}

type rawCall struct {
	provider, idSuffix string // the providerCallId is the unit's id followed by idSuffix
	direction          string
	state              int16
	blockSeq           int64
	block              [2]tplPos // first and last byte of the call block of the latest event
	hasBlock           bool
}

type rawEvent struct {
	call     int // index into rawPlan.calls
	typ, key string
	seq      int64
	body     [2]tplPos // first and last byte of the event object
}

// The values a sample is rendered with; a template's holes must vary only these.
const (
	sampleID  = "sample-unit-0@pbx.clinic.example"
	sampleNum = "+442071234567"
)

// sampleAt is the time a sample is rendered with.
func sampleAt() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC) }

// planRaw decodes a sample of t as the endpoint does and records what rawSQL needs: per call
// (grouped and ordered as the service groups and orders them) its state, direction and latest
// block; per event its type, dedupe key, sequence and where its body lies in the template. Every
// event's occurredAt must be the request's time hole, and its providerCallId the unit's id with a
// fixed suffix.
func planRaw(t template) (rawPlan, error) {
	var starts []int
	sample := t.render(sampleID, sampleAt().Format(time.RFC3339Nano), sampleNum, &starts)
	parsed, _, err := event.ParseBody(sample)
	if err != nil {
		return rawPlan{}, fmt.Errorf("sample refused: %w", err)
	}
	locate := func(off int) (tplPos, error) {
		for i, s := range starts {
			if off >= s && off < s+len(t.parts[i]) {
				return tplPos{part: i, off: off - s}, nil
			}
		}
		return tplPos{}, fmt.Errorf("offset %d lies in a hole", off)
	}
	span := func(off, n int) ([2]tplPos, error) {
		a, err := locate(off)
		if err != nil {
			return [2]tplPos{}, err
		}
		b, err := locate(off + n - 1)
		return [2]tplPos{a, b}, err
	}
	var p rawPlan
	type key struct{ provider, id string }
	byKey := map[key]int{}
	last := map[int]int{} // call -> index into parsed of its latest event
	seen := map[key]map[string]bool{}
	for i := range parsed {
		e := &parsed[i].Event
		if !e.OccurredAt.Equal(sampleAt()) {
			return rawPlan{}, fmt.Errorf("event %d: occurredAt is not the request's time", i)
		}
		if e.ProviderEventID != "" {
			return rawPlan{}, fmt.Errorf("event %d: provider event ids are not planned", i)
		}
		suffix, ok := strings.CutPrefix(e.ProviderCallID, sampleID)
		if !ok {
			return rawPlan{}, fmt.Errorf("event %d: providerCallId %q does not start with the unit's id", i, e.ProviderCallID)
		}
		k := key{e.EffectiveProvider(), suffix}
		c, ok := byKey[k]
		if !ok {
			c = len(p.calls)
			byKey[k] = c
			p.calls = append(p.calls, rawCall{provider: k.provider, idSuffix: suffix})
			seen[k] = map[string]bool{}
		}
		if seen[k][e.DedupeKey()] {
			return rawPlan{}, fmt.Errorf("event %d: dedupe key %q repeated in the call", i, e.DedupeKey())
		}
		seen[k][e.DedupeKey()] = true
		off := bytes.Index(sample, parsed[i].Body)
		if off < 0 {
			return rawPlan{}, fmt.Errorf("event %d: body not found in the sample", i)
		}
		body, err := span(off, len(parsed[i].Body))
		if err != nil {
			return rawPlan{}, fmt.Errorf("event %d: %w", i, err)
		}
		if s, moves := ingest.StateOf(e.Type); moves && int16(s) > p.calls[c].state {
			p.calls[c].state = int16(s)
		}
		// The latest event by sequence, a later one in the request winning a tie (all share one time).
		if j, ok := last[c]; !ok || e.Sequence >= parsed[j].Event.Sequence {
			last[c] = i
		}
		p.events = append(p.events, rawEvent{call: c, typ: string(e.Type), key: e.DedupeKey(), seq: e.Sequence, body: body})
	}
	for c := range p.calls {
		i := last[c]
		rc := &p.calls[c]
		rc.direction = string(parsed[i].Event.Call.Direction)
		rc.blockSeq = parsed[i].Event.Sequence
		if blk := parsed[i].Block; len(blk) > 0 {
			in := bytes.Index(parsed[i].Body, blk)
			bodyOff := bytes.Index(sample, parsed[i].Body)
			if in < 0 {
				return rawPlan{}, fmt.Errorf("event %d: block not found in its body", i)
			}
			if rc.block, err = span(bodyOff+in, len(blk)); err != nil {
				return rawPlan{}, fmt.Errorf("event %d block: %w", i, err)
			}
			rc.hasBlock = true
		}
	}
	// Calls in (provider, providerCallId) order, as the service locks them.
	order := make([]int, len(p.calls))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := p.calls[a], p.calls[b]
		return strings.Compare(ca.provider+"\x00"+ca.idSuffix, cb.provider+"\x00"+cb.idSuffix)
	})
	rank := make([]int, len(order))
	sorted := make([]rawCall, len(order))
	for r, c := range order {
		rank[c] = r
		sorted[r] = p.calls[c]
	}
	p.calls = sorted
	for i := range p.events {
		p.events[i].call = rank[p.events[i].call]
	}
	if len(p.events) == 0 {
		return rawPlan{}, errors.New("no events")
	}
	return p, nil
}

// build returns the parameters of rawSQL for one rendered request: body is the template rendered
// with the unit's id and time at, starts the offsets of its parts. The payloads are subslices of
// body; the ids are made here, as the service makes them (the call's derived from its key, the
// events' new).
func (p rawPlan) build(orgID, id string, at time.Time, body []byte, starts []int) *rawWrite {
	slice := func(s [2]tplPos) json.RawMessage {
		return body[starts[s[0].part]+s[0].off : starts[s[1].part]+s[1].off+1]
	}
	nc, ne := len(p.calls), len(p.events)
	w := &rawWrite{orgID: orgID,
		callIDs: make([]string, nc), providers: make([]string, nc), providerCallIDs: make([]string, nc),
		directions: make([]string, nc), states: make([]int16, nc), blocks: make([]json.RawMessage, nc),
		blockSeqs: make([]int64, nc), blockAts: make([]time.Time, nc), firstAts: make([]time.Time, nc),
		lastAts:  make([]time.Time, nc),
		eventIDs: make([]string, ne), eventCallIDs: make([]string, ne), types: make([]string, ne),
		dedupeKeys: make([]string, ne), sequences: make([]int64, ne), occurredAts: make([]time.Time, ne),
		bodies: make([]json.RawMessage, ne),
	}
	for i, c := range p.calls {
		pcid := id + c.idSuffix
		w.callIDs[i] = store.CallID(orgID, c.provider, pcid)
		w.providers[i], w.providerCallIDs[i], w.directions[i] = c.provider, pcid, c.direction
		w.states[i], w.blockSeqs[i] = c.state, c.blockSeq
		w.blockAts[i], w.firstAts[i], w.lastAts[i] = at, at, at
		if c.hasBlock {
			w.blocks[i] = slice(c.block)
		}
	}
	for i, e := range p.events {
		w.eventIDs[i] = uuid.Must(uuid.NewV7()).String()
		w.eventCallIDs[i] = w.callIDs[e.call]
		w.types[i], w.dedupeKeys[i], w.sequences[i] = e.typ, e.key, e.seq
		w.occurredAts[i] = at
		w.bodies[i] = slice(e.body)
	}
	return w
}

// rawDoer stores each request with rawSQL on pool: one statement, one round trip. Every event
// of a request the bench sends is new, so the statement must store every one.
func rawDoer(pool *pgxpool.Pool) doer {
	return func(ctx context.Context, req request) error {
		w := req.raw
		if w == nil {
			return errors.New("raw ceiling: request without parameters")
		}
		tag, err := pool.Exec(ctx, rawSQL, w.args()...)
		if err != nil {
			return fmt.Errorf("raw ceiling: %w", err)
		}
		if n := tag.RowsAffected(); n != int64(len(w.eventIDs)) {
			return fmt.Errorf("raw ceiling: stored %d of %d events", n, len(w.eventIDs))
		}
		return nil
	}
}
