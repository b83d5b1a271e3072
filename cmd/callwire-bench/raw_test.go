package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
	"github.com/callwire/callwire/sdk/event"
)

// TestRawParams checks that the raw ceiling's parameters, built without decoding, are what the
// endpoint's decoder and the service's planner make of the same body: the payloads byte for
// byte, the call blocks of the latest events, the states of the ladder, the derived call ids.
func TestRawParams(t *testing.T) {
	const org = "org-raw"
	for _, name := range []string{mixRealistic, mixBulk} {
		mix, err := newMix(name)
		if err != nil {
			t.Fatal(err)
		}
		// Ids and numbers of other lengths than the sample's move every offset.
		for _, unit := range []struct {
			label  string
			worker int
			n      int
		}{{"r1-raw", 3, 7}, {"realistic-r12-raw", 31, 123456}} {
			now := time.Date(2026, 11, 20, 9, 30, 0, 987654321, time.UTC)
			for k, req := range mix.render(unit.label, unit.worker, unit.n, now, org) {
				what := fmt.Sprintf("%s %s %s", name, unit.label, mix.reqs[k].name)
				parsed, _, err := event.ParseBody(req.body)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				checkRawWrite(t, what, org, req.raw, parsed)
			}
		}
	}
}

func checkRawWrite(t *testing.T, what, org string, w *rawWrite, parsed []event.Parsed) {
	t.Helper()
	if w == nil || w.orgID != org || len(w.eventIDs) != len(parsed) {
		t.Fatalf("%s: parameters %+v for %d events", what, w, len(parsed))
	}
	type want struct {
		state int16
		last  int
	}
	calls := map[string]*want{}
	for i, p := range parsed {
		e := p.Event
		if !bytes.Equal(w.bodies[i], p.Body) {
			t.Errorf("%s: event %d body\n%s\nwant\n%s", what, i, w.bodies[i], p.Body)
		}
		if w.types[i] != string(e.Type) || w.dedupeKeys[i] != e.DedupeKey() || w.sequences[i] != e.Sequence ||
			!w.occurredAts[i].Equal(e.OccurredAt) {
			t.Errorf("%s: event %d is %s %s %d %v, want %s %s %d %v", what, i, w.types[i], w.dedupeKeys[i], w.sequences[i],
				w.occurredAts[i], e.Type, e.DedupeKey(), e.Sequence, e.OccurredAt)
		}
		if want := store.CallID(org, e.EffectiveProvider(), e.ProviderCallID); w.eventCallIDs[i] != want {
			t.Errorf("%s: event %d call id %s, want %s", what, i, w.eventCallIDs[i], want)
		}
		c := calls[e.ProviderCallID]
		if c == nil {
			c = &want{}
			calls[e.ProviderCallID] = c
		}
		if s, ok := ingest.StateOf(e.Type); ok && int16(s) > c.state {
			c.state = int16(s)
		}
		if e.Sequence >= parsed[c.last].Event.Sequence || parsed[c.last].Event.ProviderCallID != e.ProviderCallID {
			c.last = i
		}
	}
	if len(w.callIDs) != len(calls) {
		t.Fatalf("%s: %d calls, want %d", what, len(w.callIDs), len(calls))
	}
	for i, pcid := range w.providerCallIDs {
		if i > 0 && w.providerCallIDs[i-1] >= pcid {
			t.Errorf("%s: calls not in providerCallId order: %q before %q", what, w.providerCallIDs[i-1], pcid)
		}
		c := calls[pcid]
		if c == nil {
			t.Fatalf("%s: call %q is in no event", what, pcid)
		}
		last := parsed[c.last]
		if w.states[i] != c.state || w.blockSeqs[i] != last.Event.Sequence || !bytes.Equal(w.blocks[i], last.Block) ||
			w.directions[i] != string(last.Event.Call.Direction) || w.callIDs[i] != store.CallID(org, w.providers[i], pcid) {
			t.Errorf("%s: call %q: state %d, block %d %s, direction %s; want %d, %d %s, %s", what, pcid, w.states[i],
				w.blockSeqs[i], w.blocks[i], w.directions[i], c.state, last.Event.Sequence, last.Block, last.Event.Call.Direction)
		}
	}
}

// TestRawSQL checks against a real PostgreSQL that the raw ceiling stores the very rows the
// service's pipeline stores for the same requests, that a resend stores nothing, and that a late
// request does not move the call's state down the ladder.
func TestRawSQL(t *testing.T) {
	ctx, url, st, pool := openSchema(t)
	svc, err := ingest.New(ingest.Options{Writer: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, org := range []string{"org-pipeline", "org-raw"} {
		if err := st.CreateOrg(ctx, store.Org{ID: org, Name: org, CreatedAt: time.Now().UTC()}); err != nil {
			t.Fatal(err)
		}
	}
	viaPipeline, viaRaw := storeDoer(svc, "org-pipeline"), rawDoer(pool)
	now := time.Now().Add(-time.Minute)
	for _, name := range []string{mixRealistic, mixBulk} {
		mix, err := newMix(name)
		if err != nil {
			t.Fatal(err)
		}
		// The same unit, for each organization.
		for k, req := range mix.render(name, 1, 1, now, "") {
			if err := viaPipeline(ctx, req); err != nil {
				t.Fatalf("%s pipeline %s: %v", name, mix.reqs[k].name, err)
			}
		}
		reqs := mix.render(name, 1, 1, now, "org-raw")
		for k, req := range reqs {
			if err := viaRaw(ctx, req); err != nil {
				t.Fatalf("%s raw %s: %v", name, mix.reqs[k].name, err)
			}
		}
		// Sent again, in reverse: nothing new, and no state moves down.
		for k := len(reqs) - 1; k >= 0; k-- {
			tag, err := pool.Exec(ctx, rawSQL, reqs[k].raw.args()...)
			if err != nil {
				t.Fatalf("%s raw resend %s: %v", name, mix.reqs[k].name, err)
			}
			if tag.RowsAffected() != 0 {
				t.Errorf("%s raw resend %s stored %d events", name, mix.reqs[k].name, tag.RowsAffected())
			}
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Every column but the organization and what is made from it or from the clock of the write.
	rows := func(org string) []string {
		t.Helper()
		rs, err := conn.Query(ctx, `
			SELECT concat_ws(' | ', c.provider, c.provider_call_id, c.direction, c.state, c.block::text,
				c.block_sequence, c.block_at, c.first_at, c.last_at, c.clients::text,
				e.type, e.dedupe_key, e.sequence, e.provider_event_id, e.occurred_at, e.order_at, e.body::text,
				e.call_id = c.id, length(e.id))
			FROM calls c JOIN call_events e ON e.org_id = c.org_id AND e.call_id = c.id
			WHERE c.org_id = $1 ORDER BY c.provider_call_id, e.sequence`, org)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rs, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := rows("org-raw"), rows("org-pipeline")
	if len(want) != 5+bulkCalls*eventsPerCall {
		t.Fatalf("the pipeline stored %d events, want %d", len(want), 5+bulkCalls*eventsPerCall)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the raw ceiling's rows differ from the pipeline's:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var states string
	if err := conn.QueryRow(ctx, `SELECT string_agg(DISTINCT state::text, ',') FROM calls WHERE org_id = 'org-raw'`).Scan(&states); err != nil {
		t.Fatal(err)
	}
	if states != "3" {
		t.Errorf("states of the raw ceiling's calls after the resend: %s, want 3 (ended)", states)
	}
	var ids int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM calls WHERE org_id = 'org-raw' AND id = $1`,
		store.CallID("org-raw", "sip", unitID(mixRealistic, 1, 1))).Scan(&ids); err != nil || ids != 1 {
		t.Errorf("the realistic call under its derived id: %d rows (%v), want 1", ids, err)
	}
}

// openSchema gives t a schema of its own in the test database: its URL, a migrated store and a
// pool on it, and a context that ends after 30 s.
func openSchema(t *testing.T) (context.Context, string, *postgres.Store, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	st, err := postgres.Open(ctx, url, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return ctx, url, st, pool
}
