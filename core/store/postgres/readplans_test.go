package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/store"
)

// TestHistoryReadsUseTheirIndexes fills a store with 20,000 calls of ten organizations, asks
// PostgreSQL how it plans the call history's reads, and checks that each reads through the
// index made for it (migration 8) rather than scanning the table. docs/history.md shows these
// plans; run with -v to print them.
func TestHistoryReadsUseTheirIndexes(t *testing.T) {
	s, org := openWithOrg(t, Options{})
	ctx := t.Context()
	if _, err := s.pool.Exec(ctx, `INSERT INTO orgs (org_id, name, created_at)
		SELECT 'other-' || g, 'other', now() FROM generate_series(1, 9) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO calls (org_id, id, provider, provider_call_id, direction, state,
			block, block_sequence, block_at, first_at, last_at, created_at, updated_at, flags, from_key, to_key)
		SELECT CASE WHEN g % 10 = 0 THEN $1 ELSE 'other-' || (g % 10) END, md5(g::text), 'sip', 'c' || g,
			'inbound', 3, '{}', 0, t, t, t, t, t, g % 16, reverse('1555' || lpad(g::text, 7, '0')), ''
		FROM generate_series(1, 20000) g, LATERAL (SELECT now() - g * interval '1 minute' AS t) x`, org); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO call_events (org_id, id, call_id, call_no, type, dedupe_key, sequence,
			occurred_at, order_at, received_at, body)
		SELECT c.org_id, c.id || '-' || k, c.id, c.call_no, 'call_hold', 'call_hold:' || k, k,
			c.first_at, c.first_at, c.first_at, '{}'
		FROM calls c, generate_series(1, 3) k`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE calls; ANALYZE call_events`); err != nil {
		t.Fatal(err)
	}
	pos := &store.CallPosition{StartedAt: time.Now().Add(-time.Hour), No: 1 << 40}
	for _, tc := range []struct {
		name  string
		f     store.CallFilter
		after *store.CallPosition
		index []string
	}{
		{"first page", store.CallFilter{}, nil, []string{"calls_started_idx"}},
		{"a later page", store.CallFilter{}, pos, []string{"calls_started_idx"}},
		{"a day", store.CallFilter{From: time.Now().Add(-24 * time.Hour), Until: time.Now()}, nil, []string{"calls_started_idx"}},
		// Which of the indexes that begin with the organization it reads depends on how many of
		// its calls the planner expects to match; it never scans the table.
		{"missed calls", store.CallFilter{Outcomes: []string{store.OutcomeMissed}}, nil, nil},
		{"a number", store.CallFilter{Number: &store.NumberMatch{Key: store.NumberKey("+15550000120")}}, nil, []string{"calls_from_idx", "calls_to_idx"}},
		{"trailing digits", store.CallFilter{Number: &store.NumberMatch{Key: store.NumberKey("0120"), Trailing: true}}, nil, []string{"calls_from_idx", "calls_to_idx"}},
	} {
		q, args := listCallsSQL(org, tc.f, tc.after, 51)
		plan := explain(t, s, q, args...)
		t.Logf("%s:\n%s", tc.name, plan)
		for _, idx := range tc.index {
			if !strings.Contains(plan, idx) {
				t.Errorf("%s does not read through %s:\n%s", tc.name, idx, plan)
			}
		}
		if strings.Contains(plan, "Seq Scan on calls") {
			t.Errorf("%s scans the calls table:\n%s", tc.name, plan)
		}
	}
	plan := explain(t, s, numberCallsSQL, org, []string{"+15550000120"}, []string{store.NumberKey("+15550000120")})
	t.Logf("a number's calls for its to-call-back item:\n%s", plan)
	for _, idx := range []string{"calls_cb_text_idx", "calls_from_idx", "calls_to_idx"} {
		if !strings.Contains(plan, idx) || strings.Contains(plan, "Seq Scan on calls") {
			t.Errorf("a number's calls do not read through %s:\n%s", idx, plan)
		}
	}
	plan = explain(t, s, `SELECT `+historyColumns+` FROM calls c WHERE c.org_id = $1 AND c.id = $2`, org, "x")
	t.Logf("a call by its id:\n%s", plan)
	if !strings.Contains(plan, "calls_id_idx") {
		t.Errorf("a call by its id does not read through calls_id_idx:\n%s", plan)
	}
	// The calls ringing now, replayed to a popup stream as it opens, add no index of their own:
	// the organization's calls of the last minutes, through calls_started_idx.
	plan = explain(t, s, ringingCallsSQL+"50", org, time.Now().Add(-2*time.Minute), int16(store.StateRinging), []string{"front", "main"})
	t.Logf("the calls ringing now:\n%s", plan)
	if !strings.Contains(plan, "calls_started_idx") || strings.Contains(plan, "Seq Scan on calls") {
		t.Errorf("the calls ringing now are not read through calls_started_idx:\n%s", plan)
	}
	plan = explain(t, s, eventsOfSQL, org, []int64{1, 2, 3})
	t.Logf("the events of a page:\n%s", plan)
	// The page's calls are found in the events' unique key (org_id, call_no, dedupe_key): the
	// numbers are an index condition, not a filter over all the organization's events.
	if strings.Contains(plan, "Seq Scan on call_events") || !strings.Contains(plan, "call_no = ANY") ||
		strings.Contains(plan, "Filter: (call_no = ANY") {
		t.Errorf("the events of a page scan the events table:\n%s", plan)
	}
	// A retention batch adds no index of its own (migration 9). It finds its calls among the
	// organization's: here, with 2,000 of them, through any index that starts with org_id and a
	// sort; with 30,000 and more, through calls_started_idx in order, stopping at the batch's
	// size. It removes events and calls by their numbers, in the keys that start with them.
	plan = explain(t, s, dueCallsSQL, org, time.Now().Add(-7*24*time.Hour), 100) + "\n" +
		explain(t, s, purgeSQL, org, []int64{1, 2, 3})
	t.Logf("a retention batch:\n%s", plan)
	if strings.Contains(plan, "Seq Scan") ||
		!strings.Contains(plan, "Index Scan using call_events_call_no_dedupe_key_key on call_events") ||
		!strings.Contains(plan, "Index Scan using calls_call_no_key on calls") {
		t.Errorf("a retention batch scans a table, or removes rows not by their keys:\n%s", plan)
	}
}

// explain returns PostgreSQL's plan of q.
func explain(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
