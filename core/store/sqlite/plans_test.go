package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
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
	texts := map[string]string{"updateCall": updateCallSQL, "findEvent": findEventSQL, "checkKey": checkKeySQL}
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
			args = args[:20] // updateCallSQL numbers its parameters
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
		for _, step := range plan {
			for _, table := range []string{"calls", "call_events", "api_keys", "c", "e"} {
				if step == "SCAN "+table || strings.HasPrefix(step, "SCAN "+table+" ") {
					t.Errorf("%s scans a table: %s", name, strings.Join(plan, "; "))
				}
			}
		}
	}
}
