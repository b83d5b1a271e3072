package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
)

// writeManySQL is a Write of several calls as one statement: the calls upserted as
// upsertCallSQL does, in the order of the arrays, then the events not on file appended to the
// calls the upsert returned. It returns a row per call (provider, providerCallId, id, created,
// clients; key NULL) and a row per event it stored (call id and dedupe key; the rest NULL).
//
// A statement has one snapshot, taken before the upsert may wait for another writer of a call;
// the events' ON CONFLICT DO NOTHING still sees that writer's events once it has committed (the
// arbiter index is checked against every committed row, not the snapshot), so they count as
// duplicates and their IDs are read after the commit, as for a resend.
//
// Parameters: $1 organization, $2 received time; calls $3 id, $4 provider, $5 providerCallId,
// $6 direction, $7 state, $8 block, $9 block sequence, $10 block time, $11 first and $12 last
// event time, $13 clients; events $14 provider and $15 providerCallId of their call, $16 id,
// $17 type, $18 dedupe key, $19 sequence, $20 provider event id, $21 occurredAt, $22 order time,
// $23 body. checkedWriteManySQL adds the key check, $24 client ID, $25 secret hash, $26 time.
const writeManySQL = writeManyCalls + writeManyRest

const checkedWriteManySQL = writeManyCalls + `
	WHERE callwire_check_key($24, $25, $26)` + writeManyRest

const writeManyCalls = `
WITH c AS (` + upsertCallInto + `
	SELECT $1, u.id, u.provider, u.provider_call_id, u.direction, u.state, u.block, u.block_sequence,
		u.block_at, u.first_at, u.last_at, u.clients, COALESCE($2, now()), COALESCE($2, now())
	FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::smallint[], $8::json[], $9::bigint[],
		$10::timestamptz[], $11::timestamptz[], $12::timestamptz[], $13::json[])
		AS u(id, provider, provider_call_id, direction, state, block, block_sequence, block_at, first_at, last_at, clients)`

const writeManyRest = `
	` + upsertCallConflict + `
	RETURNING c.provider, c.provider_call_id, c.id, c.xmax = 0 AS created, c.clients
), e AS (
	INSERT INTO call_events AS e (org_id, id, call_id, type, dedupe_key, sequence, provider_event_id,
		occurred_at, order_at, received_at, body)
	SELECT $1, n.id, c.id, n.type, n.dedupe_key, n.sequence, NULLIF(n.provider_event_id, ''), n.occurred_at,
		n.order_at, COALESCE($2, now()), n.body
	FROM unnest($14::text[], $15::text[], $16::text[], $17::text[], $18::text[], $19::bigint[], $20::text[],
		$21::timestamptz[], $22::timestamptz[], $23::json[])
		AS n(provider, provider_call_id, id, type, dedupe_key, sequence, provider_event_id, occurred_at, order_at, body)
	JOIN c ON c.provider = n.provider AND c.provider_call_id = n.provider_call_id
	ON CONFLICT (org_id, call_id, dedupe_key) DO NOTHING
	RETURNING e.call_id, e.dedupe_key
)
SELECT c.provider, c.provider_call_id, c.id, c.created, c.clients, NULL::text FROM c
UNION ALL
SELECT NULL, NULL, e.call_id, NULL, NULL, e.dedupe_key FROM e`

// writeMany sends w (several calls) as one statement and reads its results, in the order of
// w.Calls. order is w.Calls sorted by (provider, providerCallId), the order calls are locked in.
func writeMany(ctx context.Context, conn *pgxpool.Conn, w store.Write, order []int) ([]store.CallResult, error) {
	nc, ne := len(w.Calls), 0
	for i := range w.Calls {
		ne += len(w.Calls[i].Events)
	}
	var (
		ids, providers, pcids, directions = make([]string, 0, nc), make([]string, 0, nc), make([]string, 0, nc), make([]string, 0, nc)
		states                            = make([]int16, 0, nc)
		blocks, clients                   = make([]json.RawMessage, 0, nc), make([]json.RawMessage, 0, nc)
		blockSeqs                         = make([]int64, 0, nc)
		blockAts, firstAts, lastAts       = make([]time.Time, 0, nc), make([]time.Time, 0, nc), make([]time.Time, 0, nc)

		eProviders, ePcids, eIDs, eTypes, eKeys, ePeids = make([]string, 0, ne), make([]string, 0, ne), make([]string, 0, ne), make([]string, 0, ne), make([]string, 0, ne), make([]string, 0, ne)
		eSeqs                                           = make([]int64, 0, ne)
		eOccurred, eOrdered                             = make([]time.Time, 0, ne), make([]time.Time, 0, ne)
		eBodies                                         = make([]json.RawMessage, 0, ne)
	)
	for _, i := range order {
		c := &w.Calls[i]
		ids, providers, pcids, directions = append(ids, c.ID), append(providers, c.Provider), append(pcids, c.ProviderCallID), append(directions, c.Direction)
		states = append(states, int16(c.State))
		blocks, clients = append(blocks, nullJSON(c.Block)), append(clients, nullJSON(c.Clients))
		blockSeqs = append(blockSeqs, c.BlockSequence)
		blockAts, firstAts, lastAts = append(blockAts, c.BlockAt), append(firstAts, c.FirstAt), append(lastAts, c.LastAt)
		for _, e := range c.Events {
			eProviders, ePcids = append(eProviders, c.Provider), append(ePcids, c.ProviderCallID)
			eIDs, eTypes, eKeys, ePeids = append(eIDs, e.ID), append(eTypes, e.Type), append(eKeys, e.DedupeKey), append(ePeids, e.ProviderEventID)
			eSeqs = append(eSeqs, e.Sequence)
			eOccurred, eOrdered = append(eOccurred, e.OccurredAt), append(eOrdered, e.OrderAt)
			eBodies = append(eBodies, e.Body)
		}
	}
	args := []any{w.OrgID, nullTime(w.ReceivedAt),
		ids, providers, pcids, directions, states, blocks, blockSeqs, blockAts, firstAts, lastAts, clients,
		eProviders, ePcids, eIDs, eTypes, eKeys, eSeqs, ePeids, eOccurred, eOrdered, eBodies}
	sql := writeManySQL
	if w.Check != nil {
		sql = checkedWriteManySQL
		args = append(args, w.Check.ClientID, w.Check.SecretHash, w.Check.At)
	}

	type key struct{ provider, providerCallID string }
	index := make(map[key]int, nc)
	for i := range w.Calls {
		index[key{w.Calls[i].Provider, w.Calls[i].ProviderCallID}] = i
	}
	results := make([]store.CallResult, nc)
	seen := make([]bool, nc)
	stored := make(map[[2]string]bool, ne) // call id, dedupe key
	rows, _ := conn.Query(ctx, sql, args...)
	var (
		provider, pcid *string
		id             string
		created        *bool
		clientsOnFile  []byte
		dedupeKey      *string
	)
	_, err := pgx.ForEachRow(rows, []any{&provider, &pcid, &id, &created, &clientsOnFile, &dedupeKey}, func() error {
		if dedupeKey != nil {
			stored[[2]string{id, *dedupeKey}] = true
			return nil
		}
		if provider == nil || pcid == nil || created == nil {
			return errors.New("write returned a call row without its key")
		}
		i, ok := index[key{*provider, *pcid}]
		if !ok || seen[i] {
			return fmt.Errorf("write returned call %q/%q, not asked for or twice", *provider, *pcid)
		}
		seen[i] = true
		results[i] = store.CallResult{ID: id, Created: *created}
		if clientsOnFile != nil {
			results[i].Clients = append(json.RawMessage(nil), clientsOnFile...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if w.Check != nil && !slices.Contains(seen, true) {
		// No call row at all: the guard returned false (see keyCheckFalse), the upsert formed
		// no row, and so no event joined one: nothing was written.
		return nil, keyCheckFalse()
	}
	for i := range results {
		if !seen[i] {
			return nil, fmt.Errorf("write returned no row for call %q/%q", w.Calls[i].Provider, w.Calls[i].ProviderCallID)
		}
		c := &w.Calls[i]
		r := &results[i]
		r.Events = make([]store.EventResult, len(c.Events))
		for j, e := range c.Events {
			if stored[[2]string{r.ID, e.DedupeKey}] {
				r.Events[j] = store.EventResult{ID: e.ID}
			} else {
				r.Events[j] = store.EventResult{Duplicate: true}
			}
		}
	}
	return results, nil
}
