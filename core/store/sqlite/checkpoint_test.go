package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWritesAreCheckpointed: the writer does not checkpoint in its commits, and the store's own
// checkpointer copies what they wrote into the database file soon after.
func TestWritesAreCheckpointed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "callwire.db")
	s := openGroupStoreAt(t, path)
	var auto int
	if err := s.writer.QueryRowContext(t.Context(), "PRAGMA wal_autocheckpoint").Scan(&auto); err != nil {
		t.Fatal(err)
	}
	if auto != 0 {
		t.Fatalf("the writer's wal_autocheckpoint is %d, want 0", auto)
	}
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	time.Sleep(3 * checkpointInterval) // what opening wrote settles
	before := size()
	body := json.RawMessage(`{"type":"call_received","raw":"` + strings.Repeat("x", 8<<10) + `"}`)
	for i := range 200 {
		w := groupWrite("org", fmt.Sprint("ckpt-", i))
		w.Calls[0].Events[0].Body = body
		if _, err := s.WriteCalls(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	const want = 1 << 20 // 200 events of 8 KiB
	deadline := time.Now().Add(10 * time.Second)
	for size()-before < want {
		if time.Now().After(deadline) {
			t.Fatalf("the database file grew by %d bytes after 1.6 MiB of writes, want at least %d: the WAL was not checkpointed",
				size()-before, want)
		}
		time.Sleep(checkpointInterval)
	}
}

// TestTheWALRestarts: under writes that never pause, a checkpoint never finds every frame
// copied when the next write begins, so the WAL would only grow; the checkpointer restarts it
// once it is restart frames long. The same writes with and without restarts: with them, the WAL
// file stays a fraction of the size it reaches without.
func TestTheWALRestarts(t *testing.T) {
	walSize := func(restart int) int64 {
		path := filepath.Join(t.TempDir(), "callwire.db")
		s := openGroupStoreAt(t, path)
		// A checkpointer of the same kind with the threshold under test, in place of the store's.
		if err := s.ckpt.close(); err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", path+"?_busy_timeout=5000")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		s.ckpt = startCheckpointer(t.Context(), db, s.gate, restart)
		body := json.RawMessage(`{"type":"call_received","raw":"` + strings.Repeat("x", 8<<10) + `"}`)
		for i := range 300 {
			w := groupWrite("org", fmt.Sprint("restart-", i))
			w.Calls[0].Events[0].Body = body
			if _, err := s.WriteCalls(t.Context(), w); err != nil {
				t.Fatal(err)
			}
		}
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	never, restarted := walSize(1<<30), walSize(64)
	if restarted*2 > never {
		t.Errorf("the WAL reached %d bytes restarted at 64 frames, %d never restarted: want less than half", restarted, never)
	}
}
