package postgres

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

// TestCallNumbersMigration takes a store written before migration 4 (events keyed to their call
// by its id) through it: every call gets a number, every event its call's number, and the store
// goes on working with what was on file, a resend of a stored event still a duplicate. Then down
// and up again, as an operator rolling back would.
func TestCallNumbersMigration(t *testing.T) {
	ctx := t.Context()
	s, p := openUnmigrated(t)
	if _, err := p.UpTo(ctx, 3); err != nil {
		t.Fatal(err)
	}

	// Two calls of three events each, written as the store wrote them before the migration.
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	if _, err := s.pool.Exec(ctx, `INSERT INTO orgs (org_id, name, created_at) VALUES ('org', 'clinic', $1)`, at); err != nil {
		t.Fatal(err)
	}
	for _, pcid := range []string{"a", "b"} {
		if _, err := s.pool.Exec(ctx, `INSERT INTO calls (org_id, id, provider, provider_call_id, direction, state,
				block, block_sequence, block_at, first_at, last_at, created_at, updated_at)
			VALUES ('org', 'call-' || $1::text, 'pbx', $1, 'inbound', 3, '{}', 3, $2, $2, $2, $2, $2)`, pcid, at); err != nil {
			t.Fatal(err)
		}
		for k, typ := range []string{"call_received", "call_answered", "call_ended"} {
			if _, err := s.pool.Exec(ctx, `INSERT INTO call_events (org_id, id, call_id, type, dedupe_key, sequence,
					occurred_at, order_at, received_at, body)
				VALUES ('org', $1, 'call-' || $2::text, $3, $4, $5, $6, $6, $6, '{"kept": true}')`,
				pcid+"-event-"+typ, pcid, typ, typ+":"+strconv.Itoa(k+1), k+1, at); err != nil {
				t.Fatal(err)
			}
		}
	}

	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkNumbered := func(t *testing.T, events int) {
		t.Helper()
		var numbered, calls int
		if err := s.pool.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM call_events e JOIN calls c ON c.org_id = e.org_id AND c.call_no = e.call_no AND c.id = e.call_id),
				(SELECT count(DISTINCT call_no) FROM calls)`).Scan(&numbered, &calls); err != nil {
			t.Fatal(err)
		}
		if numbered != events || calls != 2 {
			t.Fatalf("%d of %d events keyed to their call's number, %d numbers for 2 calls", numbered, events, calls)
		}
	}
	checkNumbered(t, 6)

	c, events, err := s.GetCall(ctx, "org", "pbx", "a")
	if err != nil || c.ID != "call-a" || len(events) != 3 || events[2].DedupeKey != "call_ended:3" || string(events[0].Body) != `{"kept": true}` {
		t.Fatalf("call a after the migration: %+v, %+v, %v", c, events, err)
	}
	// A resend of a stored event, beside a new one, to the call on file.
	res, err := s.WriteCalls(ctx, store.Write{OrgID: "org", ReceivedAt: at, Calls: []store.CallWrite{{
		Provider: "pbx", ProviderCallID: "a", Direction: "inbound", State: store.StateEnded,
		Block: json.RawMessage(`{}`), BlockSequence: 4, BlockAt: at, FirstAt: at, LastAt: at,
		Events: []store.EventWrite{
			{ID: "resent", Type: "call_ended", DedupeKey: "call_ended:3", Sequence: 3, OccurredAt: at, OrderAt: at, Body: json.RawMessage(`{}`)},
			{ID: "new", Type: "call_recorded", DedupeKey: "call_recorded:4", Sequence: 4, OccurredAt: at, OrderAt: at, Body: json.RawMessage(`{}`)},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Created || r.ID != "call-a" || !r.Events[0].Duplicate || r.Events[0].ID != "a-event-call_ended" ||
		r.Events[1].Duplicate || r.Events[1].ID != "new" {
		t.Fatalf("write after the migration: %+v", r)
	}
	rings, err := s.Ringing(ctx, "org", []store.EventRef{{Provider: "pbx", ProviderCallID: "b", DedupeKey: "call_received:1"}}, nil)
	if err != nil || !rings[0].Known || rings[0].State != store.StateEnded {
		t.Fatalf("ringing after the migration: %+v, %v", rings, err)
	}
	checkNumbered(t, 7)

	// Down to the events keyed by call id, and up again.
	if _, err := p.DownTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO call_events (org_id, id, call_id, type, dedupe_key, sequence,
			occurred_at, order_at, received_at, body)
		VALUES ('org', 'again', 'call-a', 'call_ended', 'call_ended:3', 3, $1, $1, $1, '{}')`, at); pgCode(err) != codeUniqueViolation {
		t.Fatalf("after the way down, a repeated dedupe key: %v, want a unique violation", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkNumbered(t, 7)
}

// TestCallsKeyedOnce: after the migrations a call has two indexes that a new call lands at a
// random page of: its key (the primary key), and its id, derived from the key, which the call
// history's GET /api/v1/calls/{id} reads by (migration 8); the others are the history's list and
// number search, and the to-call-back list's index of the calls of a party without a number
// (migration 10), which holds only those. The way down gives the id back its own unique key.
func TestCallsKeyedOnce(t *testing.T) {
	ctx := t.Context()
	s, p := openUnmigrated(t)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	indexes := func() []string {
		t.Helper()
		rows, _ := s.pool.Query(ctx, `SELECT regexp_replace(regexp_replace(indexdef, '^.* USING btree ', ''), '\s+', ' ', 'g')
			FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'calls' ORDER BY 1`)
		defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return defs
	}
	if got, want := indexes(), []string{"(org_id, call_no)",
		"(org_id, cb_number) WHERE ((cb_number IS NOT NULL) AND ( CASE WHEN (direction = 'inbound'::text) THEN from_key ELSE to_key END = ''::text))",
		"(org_id, first_at, call_no)", "(org_id, from_key)", "(org_id, id)", "(org_id, provider, provider_call_id)",
		"(org_id, to_key)"}; !slices.Equal(got, want) {
		t.Errorf("indexes of calls = %q, want %q", got, want)
	}
	var pkey string
	if err := s.pool.QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'calls'::regclass AND contype = 'p'`).Scan(&pkey); err != nil || pkey != "PRIMARY KEY (org_id, provider, provider_call_id)" {
		t.Errorf("primary key of calls = %q, %v", pkey, err)
	}

	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if got, want := indexes(), []string{"(org_id, call_no)", "(org_id, id)", "(org_id, provider, provider_call_id)"}; !slices.Equal(got, want) {
		t.Errorf("indexes of calls on the way down = %q, want %q", got, want)
	}
}

// openUnmigrated opens a store on a fresh schema, with no migration applied, and the provider
// that takes it up and down the migrations one at a time.
func openUnmigrated(t *testing.T) (*Store, *goose.Provider) {
	t.Helper()
	s, err := Open(t.Context(), pgtest.URL(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	db := stdlib.OpenDBFromPool(s.pool)
	t.Cleanup(func() { db.Close() })
	p, err := migrationProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	return s, p
}
