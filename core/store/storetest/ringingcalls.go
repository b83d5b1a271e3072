package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

func ringingCallsTests() []contractTest {
	// put writes one call of org: started at start, in state st, at the locations locs (a JSON
	// array, or "" for none on file), with the client matches clients ("" for none).
	put := func(t *testing.T, s store.Store, org, id string, start time.Time, st store.State, locs, clients string) {
		t.Helper()
		typ := map[store.State]string{store.StateRinging: "call_received", store.StateAnswered: "call_answered", store.StateEnded: "call_ended"}[st]
		c := cw("sip", id, st, ev(typ, 1, start))
		if locs != "" {
			c.Summary.Locations = json.RawMessage(locs)
		}
		if clients != "" {
			c.Clients = json.RawMessage(clients)
		}
		write(t, s, store.Write{OrgID: org, ReceivedAt: start, Calls: []store.CallWrite{c}})
	}
	ids := func(calls []store.Call) []string {
		out := make([]string, len(calls))
		for i, c := range calls {
			out[i] = c.ProviderCallID
		}
		return out
	}
	return []contractTest{
		{"OnlyRingingInLocationsSinceNewestFirst", func(t *testing.T, s store.Store) {
			org, other := newOrg(t, s), newOrg(t, s)
			put(t, s, org, "old", at(1), store.StateRinging, `["main"]`, "")
			put(t, s, org, "ringing", at(100), store.StateRinging, `["main"]`, `[{"externalId":"p1","name":"Ada"}]`)
			put(t, s, org, "newest", at(200), store.StateRinging, `["front","main"]`, "")
			put(t, s, org, "answered", at(150), store.StateAnswered, `["main"]`, "")
			put(t, s, org, "ended", at(160), store.StateEnded, `["main"]`, "")
			put(t, s, org, "elsewhere", at(170), store.StateRinging, `["back"]`, "")
			put(t, s, org, "nowhere", at(180), store.StateRinging, "", "")
			put(t, s, other, "theirs", at(190), store.StateRinging, `["main"]`, "")
			got, err := s.RingingCalls(t.Context(), org, []string{"main", "front"}, at(50), 10)
			if err != nil {
				t.Fatalf("RingingCalls: %v", err)
			}
			if !slices.Equal(ids(got), []string{"newest", "ringing"}) {
				t.Fatalf("RingingCalls = %q, want newest, ringing", ids(got))
			}
			c := got[1]
			if c.ID != store.CallID(org, "sip", "ringing") || c.OrgID != org || c.Provider != "sip" || c.State != store.StateRinging {
				t.Errorf("call = %+v", c)
			}
			sameTime(t, "FirstAt", c.FirstAt, at(100))
			sameJSON(t, "Clients", c.Clients, json.RawMessage(`[{"externalId":"p1","name":"Ada"}]`))
			sameJSON(t, "Locations", c.Summary.Locations, json.RawMessage(`["main"]`))
			sameJSON(t, "Block", c.Block, json.RawMessage(`{"direction":"inbound","from":{"kind":"e164","number":"+15550100001"}}`))
			if got[0].Clients != nil {
				t.Errorf("Clients of a call without matches = %s, want nil", got[0].Clients)
			}
			// Once answered, a call no longer rings.
			put(t, s, org, "ringing", at(101), store.StateAnswered, "", "")
			got, err = s.RingingCalls(t.Context(), org, []string{"main"}, at(50), 10)
			if err != nil || !slices.Equal(ids(got), []string{"newest"}) {
				t.Errorf("after the answer: RingingCalls = %q, %v, want newest", ids(got), err)
			}
			got, err = s.RingingCalls(t.Context(), org, []string{"back"}, at(0), 10)
			if err != nil || !slices.Equal(ids(got), []string{"elsewhere"}) {
				t.Errorf("RingingCalls(back) = %q, %v, want elsewhere", ids(got), err)
			}
		}},
		{"Limit", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			for i, id := range []string{"a", "b", "c"} {
				put(t, s, org, id, at(i), store.StateRinging, `["main"]`, "")
			}
			got, err := s.RingingCalls(t.Context(), org, []string{"main"}, at(0), 2)
			if err != nil || !slices.Equal(ids(got), []string{"c", "b"}) {
				t.Errorf("RingingCalls(limit 2) = %q, %v, want c, b", ids(got), err)
			}
			got, err = s.RingingCalls(t.Context(), org, []string{"main"}, at(10), 2)
			if err != nil || len(got) != 0 {
				t.Errorf("RingingCalls(since after all) = %q, %v, want none", ids(got), err)
			}
		}},
		{"RefusesBadArguments", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			for _, tc := range []struct {
				name  string
				locs  []string
				limit int
			}{
				{"no locations", nil, 10},
				{"limit 0", []string{"main"}, 0},
				{"limit too large", []string{"main"}, store.MaxRingingLimit + 1},
			} {
				_, err := s.RingingCalls(t.Context(), org, tc.locs, at(0), tc.limit)
				if !errors.Is(err, store.ErrInvalid) {
					t.Errorf("%s: error = %v, want ErrInvalid", tc.name, err)
				}
			}
		}},
	}
}
