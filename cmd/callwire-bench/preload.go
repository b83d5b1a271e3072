package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
)

// preloadEventsPerCall is how many events each preloaded call has: a realistic call's five.
const preloadEventsPerCall = 5

// preload stores events events, in calls of preloadEventsPerCall, for the organization the bench
// measures, with COPY: the store a clinic group has after years, so that -preload shows what a
// write costs once the indexes no longer fit in memory. The rows are shaped as the service
// stores them (call ids from store.CallID, time-ordered event ids, bodies of the realistic
// mix's size). They are filed under the measured calls' provider, with provider call ids shaped
// as the measured ones (random-looking, so spread over the whole key of organization, provider
// and providerCallId, as a PBX's Call-IDs are) but under a label of their own, so that no
// measured call meets them. It returns the calls and events stored.
func preload(ctx context.Context, pool *pgxpool.Pool, orgID string, events int64, logf func(string, ...any)) (calls, stored int64, err error) {
	calls = (events + preloadEventsPerCall - 1) / preloadEventsPerCall
	if calls == 0 {
		return 0, 0, nil
	}
	const provider = "sip"
	start := time.Now()
	base := start.Add(-365 * 24 * time.Hour).UTC()
	at := func(i int64) time.Time { return base.Add(time.Duration(i) * 3 * time.Second) }
	types := [preloadEventsPerCall]string{"call_received", "call_answered", "call_ended", "call_recorded", "call_transcribed"}
	block := []byte(`{"direction":"inbound","from":{"number":"+442071234567","name":"Preloaded Caller"},"to":{"number":"+442071234500"}}`)

	// One COPY draws the calls' numbers in the order of its rows, one after another, after the
	// last number drawn so far; the events are keyed to their call by that number.
	var before int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(max(call_no), 0) FROM calls`).Scan(&before); err != nil {
		return 0, 0, fmt.Errorf("preload: read the calls' numbers: %w", err)
	}
	var i int64
	n, err := pool.CopyFrom(ctx, pgx.Identifier{"calls"},
		[]string{"org_id", "id", "provider", "provider_call_id", "direction", "state", "block", "block_sequence", "block_at",
			"first_at", "last_at", "clients", "created_at", "updated_at"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i >= calls {
				return nil, nil
			}
			pcid := preloadCallID(i)
			t := at(i)
			row := []any{orgID, store.CallID(orgID, provider, pcid), provider, pcid, "inbound", int16(3), block, int64(1), t,
				t, t.Add(95 * time.Second), nil, t, t}
			i++
			return row, nil
		}))
	if err != nil {
		return 0, 0, fmt.Errorf("preload calls: %w", err)
	}
	logf("preload: %d calls in %v", n, time.Since(start).Round(time.Millisecond))

	var first, last, numbered int64
	if err := pool.QueryRow(ctx, `SELECT min(call_no), max(call_no), count(*) FROM calls WHERE call_no > $1`,
		before).Scan(&first, &last, &numbered); err != nil {
		return 0, 0, fmt.Errorf("preload: read the calls' numbers: %w", err)
	}
	if numbered != calls || last-first+1 != calls {
		return 0, 0, fmt.Errorf("preload: %d calls were numbered %d to %d, not one after another", calls, first, last)
	}

	start = time.Now()
	var c, k int64
	n, err = pool.CopyFrom(ctx, pgx.Identifier{"call_events"},
		[]string{"org_id", "id", "call_id", "call_no", "type", "dedupe_key", "sequence", "provider_event_id", "occurred_at", "order_at",
			"received_at", "body"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if c >= calls || c*preloadEventsPerCall+k >= events {
				return nil, nil
			}
			pcid := preloadCallID(c)
			t := at(c).Add(time.Duration(k) * 20 * time.Second)
			id, err := uuid.NewV7()
			if err != nil {
				return nil, err
			}
			typ := types[k]
			body := fmt.Sprintf(`{"type":%q,"providerCallId":%q,"occurredAt":%q,"provider":"sip","sequence":%d,`+
				`"call":{"direction":"inbound","from":{"number":"+442071234567","name":"Preloaded Caller"},"to":{"number":"+442071234500"}},`+
				`"locations":["front-desk"],"providerEventId":"%s-%d","raw":{"note":"a preloaded event, about the size of a realistic one"}}`,
				typ, pcid, t.Format(time.RFC3339), k+1, pcid, k)
			row := []any{orgID, id.String(), store.CallID(orgID, provider, pcid), first + c, typ, typ + ":" + strconv.FormatInt(k+1, 10),
				k + 1, pcid + "-" + strconv.FormatInt(k, 10), t, t, t, []byte(body)}
			if k++; k == preloadEventsPerCall {
				c, k = c+1, 0
			}
			return row, nil
		}))
	if err != nil {
		return 0, 0, fmt.Errorf("preload events: %w", err)
	}
	logf("preload: %d events in %v", n, time.Since(start).Round(time.Millisecond))
	return calls, n, nil
}

// preloadCallID returns the provider call id of the i-th preloaded call.
func preloadCallID(i int64) string {
	return callIDStem("preload", i, 0) + "-" + strconv.FormatInt(i, 10) + "@pbx.clinic.example"
}
