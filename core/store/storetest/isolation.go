package storetest

import (
	"slices"
	"testing"

	"github.com/callwire/callwire/core/store"
)

// isolationTests covers tenant isolation: nothing written under one organization is visible
// through another.
func isolationTests() []contractTest {
	return []contractTest{
		{"SameCallKeyTwoOrgs", func(t *testing.T, s store.Store) {
			orgA, orgB := newOrg(t, s), newOrg(t, s)
			a := cw("sip", "shared-call", store.StateEnded, ev("call_received", 1, at(1)), ev("call_ended", 2, at(2)))
			b := cw("sip", "shared-call", store.StateRinging, ev("call_received", 1, at(1)))
			ra := write(t, s, store.Write{OrgID: orgA, ReceivedAt: at(3), Calls: []store.CallWrite{a}})[0]
			rb := write(t, s, store.Write{OrgID: orgB, ReceivedAt: at(4), Calls: []store.CallWrite{b}})[0]
			if !ra.Created || !rb.Created {
				t.Errorf("Created = (%v, %v), want (true, true): the same call key under two orgs is two calls", ra.Created, rb.Created)
			}
			if ra.ID == rb.ID {
				t.Errorf("both orgs' calls have ID %q", ra.ID)
			}
			if rb.Events[0].Duplicate || rb.Events[0].ID != b.Events[0].ID {
				t.Errorf("org B's event = %+v, want new event %q", rb.Events[0], b.Events[0].ID)
			}

			gotA, evsA := getCall(t, s, orgA, "sip", "shared-call")
			gotB, evsB := getCall(t, s, orgB, "sip", "shared-call")
			checkCall(t, gotA, orgA, a)
			checkCall(t, gotB, orgB, b)
			if want := []string{a.Events[0].ID, a.Events[1].ID}; !slices.Equal(eventIDs(evsA), want) {
				t.Errorf("org A events = %q, want %q", eventIDs(evsA), want)
			}
			if want := []string{b.Events[0].ID}; !slices.Equal(eventIDs(evsB), want) {
				t.Errorf("org B events = %q, want %q", eventIDs(evsB), want)
			}
		}},
		{"GetCallOtherOrg", func(t *testing.T, s store.Store) {
			orgA, orgB := newOrg(t, s), newOrg(t, s)
			write(t, s, store.Write{OrgID: orgA, ReceivedAt: at(1), Calls: []store.CallWrite{
				cw("sip", "call-1", store.StateRinging, ev("call_received", 1, at(1))),
			}})
			wantNoCall(t, s, orgB, "sip", "call-1")
		}},
		{"KnownEventsPerOrg", func(t *testing.T, s store.Store) {
			orgA, orgB := newOrg(t, s), newOrg(t, s)
			write(t, s, store.Write{OrgID: orgA, ReceivedAt: at(1), Calls: []store.CallWrite{
				cw("sip", "call-1", store.StateRinging, ev("call_received", 1, at(1))),
			}})
			write(t, s, store.Write{OrgID: orgB, ReceivedAt: at(1), Calls: []store.CallWrite{
				cw("sip", "call-2", store.StateRinging, ev("call_received", 1, at(1))),
			}})
			refs := []store.EventRef{
				{Provider: "sip", ProviderCallID: "call-1", DedupeKey: "call_received:1"},
				{Provider: "sip", ProviderCallID: "call-2", DedupeKey: "call_received:1"},
			}
			for _, tt := range []struct {
				org  string
				want []bool
			}{
				{orgA, []bool{true, false}},
				{orgB, []bool{false, true}},
				{newID(), []bool{false, false}},
			} {
				got, err := s.KnownEvents(t.Context(), tt.org, refs, nil)
				if err != nil {
					t.Fatalf("KnownEvents: %v", err)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("KnownEvents = %v, want %v", got, tt.want)
				}
			}
		}},
	}
}
