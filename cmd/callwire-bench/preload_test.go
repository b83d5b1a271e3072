package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// TestPreload checks against a real PostgreSQL that the preloaded calls read back through the
// store with their events, each keyed to its own call, also when calls were written before the
// preload; and that the preload's provider call ids do not sit side by side in the key.
func TestPreload(t *testing.T) {
	ctx, _, st, pool := openSchema(t)
	const org = "org-preload"
	if err := st.CreateOrg(ctx, store.Org{ID: org, Name: "clinic"}); err != nil {
		t.Fatal(err)
	}
	// A call on file before the preload draws the first number.
	at := time.Now().UTC().Truncate(time.Microsecond)
	if _, err := st.WriteCalls(ctx, store.Write{OrgID: org, ReceivedAt: at, Calls: []store.CallWrite{{
		Provider: "sip", ProviderCallID: "before@pbx", Direction: "inbound", State: store.StateRinging,
		Block: json.RawMessage(`{}`), BlockAt: at, FirstAt: at, LastAt: at,
		Events: []store.EventWrite{{ID: "e-before", Type: "call_received", DedupeKey: "call_received:1", Sequence: 1,
			OccurredAt: at, OrderAt: at, Body: json.RawMessage(`{}`)}},
	}}}); err != nil {
		t.Fatal(err)
	}

	calls, events, err := preload(ctx, pool, org, 23, func(string, ...any) {})
	if err != nil || calls != 5 || events != 23 {
		t.Fatalf("preload: %d calls, %d events, %v; want 5, 23", calls, events, err)
	}
	for i := range calls {
		pcid := preloadCallID(i)
		c, evs, err := st.GetCall(ctx, org, "sip", pcid)
		want := min(preloadEventsPerCall, 23-i*preloadEventsPerCall)
		if err != nil || len(evs) != int(want) {
			t.Fatalf("preloaded call %d (%s): %d events, %v; want %d", i, pcid, len(evs), err, want)
		}
		var body struct{ ProviderCallID string }
		if err := json.Unmarshal(evs[want-1].Body, &body); err != nil || body.ProviderCallID != pcid || evs[0].CallID != c.ID {
			t.Fatalf("preloaded call %d: last event %s of call %q, %v", i, evs[want-1].Body, evs[0].CallID, err)
		}
	}
	if a, b := preloadCallID(1), preloadCallID(2); a[:4] == b[:4] {
		t.Errorf("consecutive preloaded calls share a prefix: %q, %q", a, b)
	}
	if _, _, err := st.GetCall(ctx, org, "sip", "before@pbx"); err != nil {
		t.Fatalf("the call written before the preload: %v", err)
	}
}
