package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/sqlite"
	"github.com/callwire/callwire/core/store/storetest"
)

// openTemp opens and migrates a store in a fresh temporary directory, closed when t ends.
func openTemp(t *testing.T) *sqlite.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "callwire.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}

func TestSurvivesReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "nested", "dir", "callwire.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	when := time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)
	if err := s.CreateOrg(ctx, store.Org{ID: "org-1", Name: "Clinic", CreatedAt: when}); err != nil {
		t.Fatalf("CreateOrg: %v", err)
	}
	if err := s.CreateKey(ctx, store.Key{ClientID: "ci-1", OrgID: "org-1", Scopes: []string{"org.calls.events"},
		SecretHash: []byte{1, 2, 3}, SecretLast8: "abcdefgh", CreatedAt: when}); err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	body := json.RawMessage(`{ "type":"call_received" , "x":"\u0000" }`)
	w := store.Write{OrgID: "org-1", ReceivedAt: when, Calls: []store.CallWrite{{
		Provider: "sip", ProviderCallID: "pc-1", Direction: "inbound", State: store.StateRinging,
		Block: json.RawMessage(`{"direction":"inbound"}`), BlockSequence: 1, BlockAt: when, FirstAt: when, LastAt: when,
		Events: []store.EventWrite{{ID: "ev-1", Type: "call_received", DedupeKey: "call_received:1", Sequence: 1,
			OccurredAt: when, OrderAt: when, Body: body}},
	}}}
	if _, err := s.WriteCalls(ctx, w); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.WriteCalls(ctx, w); err == nil {
		t.Fatal("WriteCalls after Close succeeded")
	}

	s2, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	if err := s2.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	o, err := s2.GetOrg(ctx, "org-1")
	if err != nil || o.Name != "Clinic" || !o.CreatedAt.Equal(when) {
		t.Errorf("GetOrg = %+v, %v", o, err)
	}
	k, err := s2.KeyByClientID(ctx, "ci-1")
	if err != nil || k.OrgID != "org-1" || k.SecretLast8 != "abcdefgh" {
		t.Errorf("KeyByClientID = %+v, %v", k, err)
	}
	c, evs, err := s2.GetCall(ctx, "org-1", "sip", "pc-1")
	if err != nil {
		t.Fatalf("GetCall: %v", err)
	}
	if c.ID != store.CallID("org-1", "sip", "pc-1") || len(evs) != 1 || string(evs[0].Body) != string(body) {
		t.Errorf("GetCall = %+v, %+v", c, evs)
	}
	res, err := s2.WriteCalls(ctx, w)
	if err != nil {
		t.Fatalf("WriteCalls after reopen: %v", err)
	}
	if res[0].Created || !res[0].Events[0].Duplicate {
		t.Errorf("retry after reopen = %+v, want existing call and duplicate event", res[0])
	}
}

// TestTimesUTC checks that every time comes back in UTC at full precision, whatever zone it was
// written in.
func TestTimesUTC(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	when := time.Date(2025, 6, 1, 12, 0, 0, 123456789, zone)
	if err := s.CreateOrg(ctx, store.Org{ID: "org-1", Name: "Clinic", CreatedAt: when}); err != nil {
		t.Fatalf("CreateOrg: %v", err)
	}
	w := store.Write{OrgID: "org-1", ReceivedAt: when, Calls: []store.CallWrite{{
		Provider: "sip", ProviderCallID: "pc-1", Direction: "inbound",
		BlockAt: when, FirstAt: when, LastAt: when,
		Events: []store.EventWrite{{ID: "ev-1", Type: "call_received", DedupeKey: "k", OccurredAt: when, OrderAt: when, Body: json.RawMessage(`{}`)}},
	}}}
	if _, err := s.WriteCalls(ctx, w); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
	o, err := s.GetOrg(ctx, "org-1")
	if err != nil {
		t.Fatalf("GetOrg: %v", err)
	}
	c, evs, err := s.GetCall(ctx, "org-1", "sip", "pc-1")
	if err != nil {
		t.Fatalf("GetCall: %v", err)
	}
	for name, got := range map[string]time.Time{
		"org CreatedAt": o.CreatedAt, "BlockAt": c.BlockAt, "FirstAt": c.FirstAt, "LastAt": c.LastAt,
		"call CreatedAt": c.CreatedAt, "UpdatedAt": c.UpdatedAt,
		"OccurredAt": evs[0].OccurredAt, "OrderAt": evs[0].OrderAt, "ReceivedAt": evs[0].ReceivedAt,
	} {
		if got.Location() != time.UTC || !got.Equal(when) {
			t.Errorf("%s = %v, want %v in UTC", name, got, when.UTC())
		}
	}
}

// TestUnavailableWhenWriterBusy checks that a write that cannot get the write lock before its
// deadline fails with store.ErrUnavailable.
func TestUnavailableWhenWriterBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "callwire.db")
	s := openAt(t, path)

	// Another connection to the file holds the write lock, as another process would.
	defer sqlite.HoldWriteLock(t, path)()

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := s.CreateOrg(ctx, store.Org{ID: "org-1", Name: "Clinic"})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("CreateOrg while another connection writes: error = %v, want ErrUnavailable", err)
	}
	// Reads do not wait for writes.
	if _, err := s.ListOrgs(t.Context()); err != nil {
		t.Fatalf("ListOrgs while another connection writes: %v", err)
	}
}

// openAt opens and migrates the store at path, closed when t ends.
func openAt(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestOpenRejectsBadPath(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"", filepath.Join(dir, "a?b.db"), filepath.Join(blocker, "x.db")} {
		if s, err := sqlite.Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", path)
		}
	}
}

// benchStore opens and migrates a store for a benchmark, with one organization, org-1, and a
// live key of it, whose check it returns.
func benchStore(b *testing.B) (*sqlite.Store, *store.KeyCheck) {
	b.Helper()
	ctx := b.Context()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.CreateOrg(ctx, store.Org{ID: "org-1", Name: "Clinic"}); err != nil {
		b.Fatal(err)
	}
	k := store.Key{ClientID: "cw_ci_bench", OrgID: "org-1", Scopes: []string{"org.calls.events"},
		SecretHash: []byte("a secret's hash, 32 bytes long!!"), SecretLast8: "hash!!!!", CreatedAt: time.Now()}
	if err := s.CreateKey(ctx, k); err != nil {
		b.Fatal(err)
	}
	return s, &store.KeyCheck{ClientID: k.ClientID, SecretHash: k.SecretHash, At: time.Now()}
}

// BenchmarkWriteCalls measures one request's write, one at a time, as the writer runs it, with
// the key check the service sends: the ring of a new call, the tail of a new call (three
// events), and a batch of 10 new calls of five events each.
func BenchmarkWriteCalls(b *testing.B) {
	ctx := b.Context()
	s, check := benchStore(b)
	now := time.Now()
	body := json.RawMessage(`{"type":"call_ended","providerCallId":"x","occurredAt":"2025-01-01T00:00:00Z","call":{"direction":"inbound"}}`)
	call := func(id string, types ...string) store.CallWrite {
		c := store.CallWrite{
			Provider: "sip", ProviderCallID: id, Direction: "inbound", State: store.StateEnded,
			Block: json.RawMessage(`{"direction":"inbound"}`), BlockSequence: int64(len(types)), BlockAt: now, FirstAt: now, LastAt: now,
		}
		for k, typ := range types {
			seq := strconv.Itoa(k + 1)
			c.Events = append(c.Events, store.EventWrite{ID: "e" + seq + "-" + id, Type: typ, DedupeKey: typ + ":" + seq,
				Sequence: int64(k + 1), OccurredAt: now, OrderAt: now, Body: body})
		}
		return c
	}
	n := 0
	for _, bc := range []struct {
		name  string
		calls int
		types []string
	}{
		{"ring", 1, []string{"call_received"}},
		{"tail", 1, []string{"call_answered", "call_ended", "call_recorded"}},
		{"bulk", 10, []string{"call_received", "call_answered", "call_ended", "call_recorded", "call_transcribed"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				w := store.Write{OrgID: "org-1", ReceivedAt: now, Check: check}
				for range bc.calls {
					n++
					w.Calls = append(w.Calls, call(strconv.Itoa(n), bc.types...))
				}
				if _, err := s.WriteCalls(ctx, w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRinging measures the ring's read with the key check the service sends: one ref (a
// call's call_received) and a batch of ten, of calls not on file, as the rings of new calls are.
func BenchmarkRinging(b *testing.B) {
	s, check := benchStore(b)
	var refs []store.EventRef
	for i := range 10 {
		refs = append(refs, store.EventRef{Provider: "sip", ProviderCallID: "ring-" + strconv.Itoa(i), DedupeKey: "call_received:0"})
	}
	for _, n := range []int{1, 10} {
		b.Run("refs="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				rs, err := s.Ringing(b.Context(), "org-1", refs[:n], check)
				if err != nil || len(rs) != n {
					b.Fatalf("%v %+v", err, rs)
				}
			}
		})
	}
}

// BenchmarkPurgeCalls measures one retention batch as the writer runs it, which is how long it
// holds the writer: removing 100, 500 and 2000 due calls of four events each.
func BenchmarkPurgeCalls(b *testing.B) {
	ctx := b.Context()
	s, _ := benchStore(b)
	old := time.Now().Add(-48 * time.Hour)
	body := json.RawMessage(`{"type":"call_ended","providerCallId":"x","occurredAt":"2025-01-01T00:00:00Z","call":{"direction":"inbound"}}`)
	n := 0
	seed := func(calls int) {
		for calls > 0 {
			w := store.Write{OrgID: "org-1", ReceivedAt: old}
			for range min(calls, 50) {
				n++
				id := strconv.Itoa(n)
				c := store.CallWrite{Provider: "sip", ProviderCallID: id, Direction: "inbound", State: store.StateEnded,
					Block: json.RawMessage(`{"direction":"inbound"}`), BlockSequence: 4, BlockAt: old, FirstAt: old, LastAt: old}
				for k, typ := range []string{"call_received", "call_answered", "call_ended", "call_recorded"} {
					seq := strconv.Itoa(k + 1)
					c.Events = append(c.Events, store.EventWrite{ID: "e" + seq + "-" + id, Type: typ, DedupeKey: typ + ":" + seq,
						Sequence: int64(k + 1), OccurredAt: old, OrderAt: old, Body: body})
				}
				w.Calls = append(w.Calls, c)
				calls--
			}
			if _, err := s.WriteCalls(ctx, w); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, size := range []int{100, 500, 2000} {
		b.Run("calls="+strconv.Itoa(size), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				seed(size)
				b.StartTimer()
				p, err := s.PurgeCalls(ctx, "org-1", time.Now().Add(-24*time.Hour), size)
				if err != nil || p.Calls != size {
					b.Fatalf("PurgeCalls = %+v, %v", p, err)
				}
			}
		})
	}
}
