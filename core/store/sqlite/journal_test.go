package sqlite

import (
	"path/filepath"
	"testing"
)

// TestWritesJournalStatementsInMemory: the writer keeps its statements' journals in memory
// (temp_store=MEMORY), where a batch's multi-row inserts no longer create a temporary file each,
// from the moment the store opens and again after a migration, which journals to files.
func TestWritesJournalStatementsInMemory(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "callwire.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	wantMemory := func(when string) {
		t.Helper()
		var tempStore int
		if err := s.writer.QueryRowContext(t.Context(), "PRAGMA temp_store").Scan(&tempStore); err != nil {
			t.Fatal(err)
		}
		if tempStore != 2 {
			t.Fatalf("%s, the writer's temp_store is %d, want 2 (MEMORY)", when, tempStore)
		}
	}
	wantMemory("once open")
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantMemory("after migrating")
}
