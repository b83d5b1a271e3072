package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/sqlite"
)

// TestPreload checks against a real PostgreSQL that the preloaded calls read back through the
// store with their events, each keyed to its own call, also when calls were written before the
// preload; and that the preload's provider call ids do not sit side by side in the key.
func TestPreload(t *testing.T) {
	ctx, _, st, pool := openSchema(t)
	const org = "org-preload"
	writeBeforePreload(ctx, t, st, org)
	calls, events, err := preloadPostgres(ctx, pool, org, 23, func(string, ...any) {})
	checkPreloaded(ctx, t, st, org, calls, events, err)
	if a, b := preloadCallID(1), preloadCallID(2); a[:4] == b[:4] {
		t.Errorf("consecutive preloaded calls share a prefix: %q, %q", a, b)
	}
}

// TestPreloadSQLite checks the same of the embedded store's preload, over more than one of its
// transactions.
func TestPreloadSQLite(t *testing.T) {
	// A bound against a hang, not a speed test: under the race detector on a busy machine the
	// preload takes most of a minute.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "callwire.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := openSQLiteRaw(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	const org = "org-preload"
	writeBeforePreload(ctx, t, st, org)
	const events = preloadSQLiteCallsPerTx*preloadEventsPerCall + 13
	calls, stored, err := preloadSQLite(ctx, path, org, events, func(string, ...any) {})
	checkPreloaded(ctx, t, st, org, calls, stored, err)
	if c, e, err := countSQLite(ctx, r); err != nil || c != calls+1 || e != events+1 {
		t.Fatalf("on file: %d calls, %d events, %v; want %d, %d", c, e, err, calls+1, events+1)
	}
}

// writeBeforePreload makes org and writes a call of it, as the warm-up would before a preload.
func writeBeforePreload(ctx context.Context, t *testing.T, st store.Store, org string) {
	t.Helper()
	if err := st.CreateOrg(ctx, store.Org{ID: org, Name: "clinic"}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := st.WriteCalls(ctx, store.Write{OrgID: org, ReceivedAt: at, Calls: []store.CallWrite{{
		Provider: "sip", ProviderCallID: "before@pbx", Direction: "inbound", State: store.StateRinging,
		Block: json.RawMessage(`{}`), BlockAt: at, FirstAt: at, LastAt: at,
		Events: []store.EventWrite{{ID: "e-before", Type: "call_received", DedupeKey: "call_received:1", Sequence: 1,
			OccurredAt: at, OrderAt: at, Body: json.RawMessage(`{}`)}},
	}}}); err != nil {
		t.Fatal(err)
	}
}

// checkPreloaded checks a preload's result: every preloaded call, the last one cut short, reads
// back under its derived id with its events and their bodies, and so does the call written
// before.
func checkPreloaded(ctx context.Context, t *testing.T, st store.Store, org string, calls, events int64, err error) {
	t.Helper()
	wantCalls := (events + preloadEventsPerCall - 1) / preloadEventsPerCall
	if err != nil || calls != wantCalls || events == 0 {
		t.Fatalf("preload: %d calls, %d events, %v; want %d calls", calls, events, err, wantCalls)
	}
	for _, i := range []int64{0, 1, calls / 2, calls - 1} {
		pcid := preloadCallID(i)
		c, evs, err := st.GetCall(ctx, org, "sip", pcid)
		want := min(preloadEventsPerCall, events-i*preloadEventsPerCall)
		if err != nil || int64(len(evs)) != want {
			t.Fatalf("preloaded call %d (%s): %d events, %v; want %d", i, pcid, len(evs), err, want)
		}
		var body struct{ ProviderCallID string }
		if err := json.Unmarshal(evs[want-1].Body, &body); err != nil || body.ProviderCallID != pcid ||
			evs[0].CallID != c.ID || c.ID != store.CallID(org, "sip", pcid) || c.State != store.StateEnded {
			t.Fatalf("preloaded call %d: %+v; last event %s of call %q, %v", i, c, evs[want-1].Body, evs[0].CallID, err)
		}
	}
	if _, _, err := st.GetCall(ctx, org, "sip", "before@pbx"); err != nil {
		t.Fatalf("the call written before the preload: %v", err)
	}
}
