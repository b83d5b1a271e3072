package sqlite

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/testwait"
)

// TestCheckpointsBesideTheWriter: writes too few for the writer's own checkpoint still reach the
// database file, copied there by the store's checkpointer.
func TestCheckpointsBesideTheWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "callwire.db")
	s := openGroupStoreAt(t, path)
	var pages int
	if err := s.writer.QueryRowContext(t.Context(), "PRAGMA wal_autocheckpoint").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages <= 0 {
		t.Fatalf("the writer never checkpoints (wal_autocheckpoint %d): it alone starts the WAL over", pages)
	}
	before := fileSize(t, path)
	now := time.Now()
	body := json.RawMessage(`{"type":"call_ended","providerCallId":"x","occurredAt":"2025-01-01T00:00:00Z"}`)
	for i := range 20 {
		w := store.Write{OrgID: "org", ReceivedAt: now}
		for j := range 10 {
			id := strconv.Itoa(i*10 + j)
			w.Calls = append(w.Calls, store.CallWrite{Provider: "sip", ProviderCallID: id, Direction: "inbound",
				State: store.StateEnded, BlockAt: now, FirstAt: now, LastAt: now, Events: []store.EventWrite{
					{ID: "e" + id, Type: "call_ended", DedupeKey: "call_ended:1", Sequence: 1, OccurredAt: now, OrderAt: now, Body: body}}})
		}
		if _, err := s.WriteCalls(t.Context(), w); err != nil {
			t.Fatal(err)
		}
	}
	var pageSize int64
	if err := s.writer.QueryRowContext(t.Context(), "PRAGMA page_size").Scan(&pageSize); err != nil {
		t.Fatal(err)
	}
	if frames := (fileSize(t, path+"-wal") - 32) / (pageSize + 24); frames >= int64(pages) {
		t.Fatalf("the writes took the WAL to %d pages, past the writer's own checkpoint at %d", frames, pages)
	}
	if !testwait.Poll(10*time.Second, func() bool { return fileSize(t, path) > before }) {
		t.Fatalf("the database file stayed at %d bytes for 10 s after 200 calls were committed: no checkpoint", before)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestWALStartsOverUnderLoad: while writes go on without a pause, the WAL still starts over from
// its beginning (its header's checkpoint sequence number changes), rather than growing for as
// long as they last.
func TestWALStartsOverUnderLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "callwire.db")
	s := openGroupStoreAt(t, path)
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	var next atomic.Int64
	body := json.RawMessage(`{"type":"call_ended","providerCallId":"x","occurredAt":"2025-01-01T00:00:00Z","note":"` + strings.Repeat("x", 300) + `"}`)
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				now := time.Now()
				w := store.Write{OrgID: "org", ReceivedAt: now}
				for range 10 {
					id := strconv.FormatInt(next.Add(1), 10)
					w.Calls = append(w.Calls, store.CallWrite{Provider: "sip", ProviderCallID: id, Direction: "inbound",
						State: store.StateEnded, BlockAt: now, FirstAt: now, LastAt: now, Events: []store.EventWrite{
							{ID: "e" + id, Type: "call_ended", DedupeKey: "call_ended:1", Sequence: 1, OccurredAt: now, OrderAt: now, Body: body}}})
				}
				if _, err := s.WriteCalls(ctx, w); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		})
	}
	first, starts := walSequence(t, path+"-wal"), 0
	if !testwait.Poll(20*time.Second, func() bool {
		if seq := walSequence(t, path+"-wal"); seq != first {
			first, starts = seq, starts+1
		}
		return starts >= 2
	}) {
		t.Fatalf("the WAL started over %d times in 20 s of writes (%d calls, WAL %d bytes), want 2", starts, next.Load(), fileSize(t, path+"-wal"))
	}
}

// walSequence returns the checkpoint sequence number in the header of the WAL at path: SQLite
// adds one each time the WAL starts over.
func walSequence(t *testing.T, path string) uint32 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var h [16]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return 0 // not written yet
	}
	return binary.BigEndian.Uint32(h[12:16])
}
