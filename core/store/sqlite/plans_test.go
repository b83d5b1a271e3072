package sqlite

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// TestHotStatementsSearchTheirIndexes: every statement of the write path and of the ring's read,
// at every run length, finds its rows of calls and call_events through an index, never by
// scanning a table, on a store whose tables have no statistics (as a new one has).
func TestHotStatementsSearchTheirIndexes(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{"updateCall": updateCallSQL, "updateCallKept": updateCallKeptSQL, "findEvent": findEventSQL, "checkKey": checkKeySQL, "dueCalls": dueCallsSQL,
		"replayCalls/1": ringingCallsSQL(1, 50), "replayCalls/32": ringingCallsSQL(32, 50)}
	for k := range maxRowsLog + 1 {
		n := 1 << k
		for name, text := range map[string]string{"findCalls": findCallsSQL(n), "insertCalls": insertCallsSQL(n),
			"insertEvents": insertEventsSQL(n), "appendEvents": appendEventsSQL(n), "ringing": ringingSQL(n),
			"checkedRinging": checkedRingingSQL(n), "checkedFindCalls": checkedFindCallsSQL(n)} {
			texts[name+"/"+string(rune('0'+k))] = text
		}
	}
	for name, text := range texts {
		args := make([]any, strings.Count(text, "?"))
		for i := range args {
			args[i] = "x"
		}
		if strings.Contains(text, "?1") {
			args = args[:21] // updateCallSQL numbers its parameters
		}
		rows, err := s.reader.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+text, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Close(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// A call is found by its id, in the index its insert changes (migration 9).
		if strings.Contains(strings.ToLower(name), "findcalls") || strings.Contains(strings.ToLower(name), "ringing") {
			if !slices.ContainsFunc(plan, func(step string) bool { return strings.Contains(step, "calls_id_key (org_id=? AND call_id=?)") }) {
				t.Errorf("%s does not find calls by id: %s", name, strings.Join(plan, "; "))
			}
		}
		for _, step := range plan {
			for _, table := range []string{"calls", "call_events", "api_keys", "c", "e"} {
				if step == "SCAN "+table || strings.HasPrefix(step, "SCAN "+table+" ") {
					t.Errorf("%s scans a table: %s", name, strings.Join(plan, "; "))
				}
			}
		}
	}
}

// TestHistoryReadsSearchTheirIndexes asks SQLite how it plans the call history's reads: each
// must search the index made for it (migration 5), never scan the calls. docs/history.md shows
// these plans; run with -v to print them.
func TestHistoryReadsSearchTheirIndexes(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		f     store.CallFilter
		after *store.CallPosition
		index string
	}{
		{"first page", store.CallFilter{}, nil, "calls_started_idx"},
		{"a later page", store.CallFilter{}, &store.CallPosition{StartedAt: at, No: 7}, "calls_started_idx"},
		{"a day", store.CallFilter{From: at, Until: at.Add(24 * time.Hour)}, nil, "calls_started_idx"},
		{"missed calls", store.CallFilter{Outcomes: []string{store.OutcomeMissed}}, nil, "calls_started_idx"},
		{"a number", store.CallFilter{Number: &store.NumberMatch{Key: store.NumberKey("+15550100120")}}, nil, "calls_from_idx"},
		{"trailing digits", store.CallFilter{Number: &store.NumberMatch{Key: "0210", Trailing: true}}, nil, "calls_to_idx"},
	} {
		q, args := listCallsSQL("org", tc.f, tc.after, 51)
		plan := queryPlan(t, s, q, args...)
		t.Logf("%s: %s", tc.name, plan)
		if !strings.Contains(plan, tc.index) || strings.Contains(plan, "SCAN c") ||
			tc.f.Number != nil && !strings.HasPrefix(plan, "SEARCH c USING INTEGER PRIMARY KEY") {
			t.Errorf("%s does not search %s: %s", tc.name, tc.index, plan)
		}
	}
	for _, withKey := range []bool{true, false} {
		plan := queryPlan(t, s, numberCallsSQL(withKey), "org", "+15550100120", store.NumberKey("+15550100120"))
		t.Logf("a number's calls for its to-call-back item (with a key: %v): %s", withKey, plan)
		if !strings.Contains(plan, "calls_cb_text_idx") || strings.Contains(plan, "SCAN") ||
			withKey && (!strings.Contains(plan, "calls_from_idx") || !strings.Contains(plan, "calls_to_idx")) {
			t.Errorf("a number's calls (with a key: %v) do not search their indexes: %s", withKey, plan)
		}
	}
	plan := queryPlan(t, s, `SELECT `+historyColumns+` FROM calls c WHERE c.org_id = ? AND c.call_id = ?`, "org", "x")
	t.Logf("a call by its id: %s", plan)
	if !strings.Contains(plan, "calls_id_key") {
		t.Errorf("a call by its id does not search calls_id_key: %s", plan)
	}
}

// queryPlan returns SQLite's plan of q, its steps joined by "; ".
func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.reader.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	return strings.Join(steps, "; ")
}
