package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/callwire/callwire/core/store"
)

// atomicityTests covers the all-or-nothing rule: a Write that fails leaves no trace.
func atomicityTests() []contractTest {
	// setup stores one call ("sip", "m-existing") and returns it.
	setup := func(t *testing.T, s store.Store, org string) store.CallWrite {
		t.Helper()
		existing := cw("sip", "m-existing", store.StateRinging, ev("call_received", 1, at(1)))
		write(t, s, store.Write{OrgID: org, ReceivedAt: at(2), Calls: []store.CallWrite{existing}})
		return existing
	}
	// update is a valid write to the existing call that would climb its state and add an event.
	update := func() store.CallWrite {
		return cw("sip", "m-existing", store.StateEnded, ev("call_ended", 9, at(9)))
	}
	// unchanged asserts that the failed write left no trace: no new calls, the existing one as it was.
	unchanged := func(t *testing.T, s store.Store, org string, existing store.CallWrite, absent ...string) {
		t.Helper()
		for _, id := range absent {
			wantNoCall(t, s, org, "sip", id)
		}
		got, evs := getCall(t, s, org, "sip", "m-existing")
		checkCall(t, got, org, existing)
		if want := []string{existing.Events[0].ID}; !slices.Equal(eventIDs(evs), want) {
			t.Errorf("existing call events = %q, want %q", eventIDs(evs), want)
		}
		refs := []store.EventRef{{Provider: "sip", ProviderCallID: "m-existing", DedupeKey: "call_ended:9"}}
		for _, id := range absent {
			refs = append(refs, store.EventRef{Provider: "sip", ProviderCallID: id, DedupeKey: "call_received:1"})
		}
		known, err := s.KnownEvents(t.Context(), org, refs, nil)
		if err != nil {
			t.Fatalf("KnownEvents: %v", err)
		}
		if slices.Contains(known, true) {
			t.Errorf("KnownEvents after a failed write = %v, want all false", known)
		}
	}

	return []contractTest{
		{"FailedWriteLeavesNothing", func(t *testing.T, s store.Store) {
			tests := []struct {
				name string
				// calls builds the write's calls; "a-new" and "z-new" are new calls, exactly one of
				// which is invalid.
				calls func(existing store.CallWrite) []store.CallWrite
			}{
				{"event ID taken, invalid call applied last", func(existing store.CallWrite) []store.CallWrite {
					bad := cw("sip", "z-new", store.StateRinging, ev("call_received", 1, at(1)))
					bad.Events[0].ID = existing.Events[0].ID
					return []store.CallWrite{bad, update(), cw("sip", "a-new", store.StateRinging, ev("call_received", 1, at(1)))}
				}},
				{"event ID taken, invalid call applied first", func(existing store.CallWrite) []store.CallWrite {
					bad := cw("sip", "a-new", store.StateRinging, ev("call_received", 1, at(1)))
					bad.Events[0].ID = existing.Events[0].ID
					return []store.CallWrite{cw("sip", "z-new", store.StateRinging, ev("call_received", 1, at(1))), update(), bad}
				}},
				{"event ID repeated across calls of the write", func(existing store.CallWrite) []store.CallWrite {
					good := cw("sip", "a-new", store.StateRinging, ev("call_received", 1, at(1)))
					bad := cw("sip", "z-new", store.StateRinging, ev("call_received", 1, at(1)))
					bad.Events[0].ID = good.Events[0].ID
					return []store.CallWrite{update(), good, bad}
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					org := newOrg(t, s)
					existing := setup(t, s, org)
					w := store.Write{OrgID: org, ReceivedAt: at(10), Calls: tt.calls(existing)}
					res, err := s.WriteCalls(t.Context(), w)
					if err == nil {
						t.Fatalf("WriteCalls with a colliding identifier succeeded: %+v", res)
					}
					unchanged(t, s, org, existing, "a-new", "z-new")
				})
			}
		}},
		{"CancelledContextWritesNothing", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			existing := setup(t, s, org)
			w := store.Write{OrgID: org, ReceivedAt: at(10), Calls: []store.CallWrite{
				cw("sip", "a-new", store.StateRinging, ev("call_received", 1, at(1))),
				update(),
			}}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if res, err := s.WriteCalls(ctx, w); err == nil {
				t.Fatalf("WriteCalls with a cancelled context succeeded: %+v", res)
			}
			unchanged(t, s, org, existing, "a-new")
		}},
	}
}
