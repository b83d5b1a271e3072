package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/store"
)

func TestRingingPopup(t *testing.T) {
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	call := func(block, clients, locs string) *store.Call {
		c := &store.Call{ID: store.CallID("org", "sip", "c1"), OrgID: "org", Provider: "sip", ProviderCallID: "c1",
			Direction: "inbound", State: store.StateRinging, FirstAt: start, Block: json.RawMessage(block)}
		if clients != "" {
			c.Clients = json.RawMessage(clients)
		}
		if locs != "" {
			c.Summary.Locations = json.RawMessage(locs)
		}
		return c
	}
	e164 := `{"direction":"inbound","from":{"kind":"e164","number":"+15550100001"},"to":{"extension":"201"},"trunk":"t1"}`
	tests := []struct {
		name    string
		call    *store.Call
		lookup  popup.LookupOutcome
		clients int
		locs    []string
	}{
		{"matched", call(e164, `[{"externalId":"p1","name":"Ada"}]`, `["front","main"]`), popup.LookupMatched, 1, []string{"front", "main"}},
		{"no match", call(e164, `[]`, `["main"]`), popup.LookupNoMatch, 0, []string{"main"}},
		{"skipped", call(`{"direction":"inbound","from":{"kind":"anonymous"}}`, `[]`, `["main"]`), popup.LookupSkipped, 0, []string{"main"}},
		{"nothing on file", call(e164, "", ""), popup.LookupUnknown, 0, []string{"main"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ingest.RingingPopup(tc.call, start.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != ingest.PopupID("org", "sip", "c1") || p.CallID != tc.call.ID || p.OrgID != "org" || p.Direction != "inbound" {
				t.Errorf("popup = %+v", p)
			}
			if p.Lookup != tc.lookup || len(p.Clients) != tc.clients || p.Clients == nil {
				t.Errorf("lookup %q with %d clients (%v), want %q with %d", p.Lookup, len(p.Clients), p.Clients, tc.lookup, tc.clients)
			}
			if len(p.Locations) != len(tc.locs) || p.Locations[0] != tc.locs[0] {
				t.Errorf("locations = %q, want %q", p.Locations, tc.locs)
			}
			if !p.OccurredAt.Equal(start) || !p.PublishedAt.Equal(start.Add(time.Minute)) {
				t.Errorf("times = %v, %v", p.OccurredAt, p.PublishedAt)
			}
		})
	}
	if _, err := ingest.RingingPopup(call(`{"direction":`, "", ""), start); err == nil {
		t.Error("a block that is not JSON: no error")
	}
}

type ringingReader struct {
	since time.Time
	limit int
	calls []store.Call
	err   error
}

func (r *ringingReader) RingingCalls(_ context.Context, _ string, _ []string, since time.Time, limit int) ([]store.Call, error) {
	r.since, r.limit = since, limit
	return r.calls, r.err
}

func TestReplayBoundsAndErrors(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	r := &ringingReader{calls: []store.Call{{ID: "x", OrgID: "org", Provider: "sip", ProviderCallID: "x", Block: json.RawMessage(`{`)},
		{ID: "y", OrgID: "org", Provider: "sip", ProviderCallID: "y"}}}
	rp, err := ingest.NewReplay(r, 0, 0, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ps, err := rp.RingingPopups(t.Context(), "org", []string{"main"})
	if err != nil || len(ps) != 1 || ps[0].ProviderCallID != "y" {
		t.Fatalf("RingingPopups = %+v, %v; want y's alone (x's block is unreadable)", ps, err)
	}
	if !r.since.Equal(now.Add(-ingest.DefaultReplayWindow)) || r.limit != ingest.DefaultReplayLimit {
		t.Errorf("read since %v, limit %d", r.since, r.limit)
	}
	r.err = store.ErrUnavailable
	if _, err := rp.RingingPopups(t.Context(), "org", []string{"main"}); !errors.Is(err, ingest.ErrUnavailable) {
		t.Errorf("store down: error = %v, want ErrUnavailable", err)
	}
	if _, err := ingest.NewReplay(r, 0, store.MaxRingingLimit+1, nil); err == nil {
		t.Error("a limit past store.MaxRingingLimit: no error")
	}
}
