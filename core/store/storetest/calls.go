package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/callwire/callwire/core/store"
)

// callTests covers the call upsert half of WriteCalls and GetCall.
func callTests() []contractTest {
	return []contractTest{
		{"Create", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			received := ev("call_received", 1, at(1))
			answered := ev("call_answered", 2, at(3))
			answered.ProviderEventID = "pbx-evt-77"
			answered.DedupeKey = "pbx-evt-77"
			// A reporter clock ahead of the server: OccurredAt is kept as sent, OrderAt clamped.
			answered.OccurredAt = at(9999)
			c := cw("sip", "call-1", store.StateAnswered, received, answered)
			c.Clients = json.RawMessage(`[{"externalId":"p-1","name":"Ada Lovelace"}]`)
			w := store.Write{OrgID: org, ReceivedAt: at(5), Calls: []store.CallWrite{c}}

			res := write(t, s, w)
			r := res[0]
			if !r.Created || r.ID != callID(org, c) {
				t.Errorf("result = (ID %q, Created %v), want (%q, true)", r.ID, r.Created, callID(org, c))
			}
			sameJSON(t, "result Clients", r.Clients, c.Clients)
			for i, e := range r.Events {
				if e.Duplicate || e.ID != c.Events[i].ID {
					t.Errorf("event result %d = %+v, want (ID %q, Duplicate false)", i, e, c.Events[i].ID)
				}
			}

			got, evs := getCall(t, s, org, "sip", "call-1")
			if got.ID != callID(org, c) {
				t.Errorf("call ID = %q, want %q", got.ID, callID(org, c))
			}
			checkCall(t, got, org, c)
			if len(evs) != 2 {
				t.Fatalf("GetCall returned %d events, want 2", len(evs))
			}
			checkEvent(t, evs[0], callID(org, c), received, w.ReceivedAt)
			checkEvent(t, evs[1], callID(org, c), answered, w.ReceivedAt)
		}},
		{"SecondWriteKeepsID", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			first := cw("sip", "call-1", store.StateRinging, ev("call_received", 1, at(1)))
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(2), Calls: []store.CallWrite{first}})

			second := cw("sip", "call-1", store.StateEnded, ev("call_ended", 2, at(10)))
			r := write(t, s, store.Write{OrgID: org, ReceivedAt: at(11), Calls: []store.CallWrite{second}})[0]
			if r.Created || r.ID != callID(org, first) {
				t.Errorf("second result = (ID %q, Created %v), want (%q, false)", r.ID, r.Created, callID(org, first))
			}
			if r.Events[0].Duplicate || r.Events[0].ID != second.Events[0].ID {
				t.Errorf("second event result = %+v, want (ID %q, Duplicate false)", r.Events[0], second.Events[0].ID)
			}
			got, evs := getCall(t, s, org, "sip", "call-1")
			if got.ID != callID(org, first) {
				t.Errorf("call ID = %q, want %q", got.ID, callID(org, first))
			}
			if got.State != store.StateEnded {
				t.Errorf("State = %v, want ended", got.State)
			}
			if want := []string{first.Events[0].ID, second.Events[0].ID}; !slices.Equal(eventIDs(evs), want) {
				t.Errorf("event IDs = %q, want %q", eventIDs(evs), want)
			}
			checkEvent(t, evs[0], callID(org, first), first.Events[0], at(2))
			checkEvent(t, evs[1], callID(org, first), second.Events[0], at(11))
		}},
		{"StateOnlyClimbs", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			states := []store.State{store.StateUnknown, store.StateRinging, store.StateAnswered, store.StateEnded}
			for _, stored := range states {
				for _, incoming := range states {
					t.Run(fmt.Sprintf("%v then %v", stored, incoming), func(t *testing.T) {
						id := fmt.Sprintf("state-%d-%d", stored, incoming)
						write(t, s, store.Write{OrgID: org, ReceivedAt: at(1), Calls: []store.CallWrite{
							cw("sip", id, stored, ev("call_hold", 1, at(1))),
						}})
						write(t, s, store.Write{OrgID: org, ReceivedAt: at(2), Calls: []store.CallWrite{
							cw("sip", id, incoming, ev("call_transferred", 2, at(2))),
						}})
						got, _ := getCall(t, s, org, "sip", id)
						if want := max(stored, incoming); got.State != want {
							t.Errorf("State = %v, want %v", got.State, want)
						}
					})
				}
			}
		}},
		{"BlockReplacedOnlyFromLaterPosition", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			tests := []struct {
				name     string
				seq      int64
				when     int
				replaced bool
			}{
				{"lower sequence, later time", 4, 20, false},
				{"same sequence, earlier time", 5, 9, false},
				{"same position", 5, 10, true},
				{"same sequence, later time", 5, 11, true},
				{"higher sequence, earlier time", 6, 0, true},
			}
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					id := fmt.Sprintf("block-%d", i)
					first := cw("sip", id, store.StateRinging, ev("call_received", 5, at(10)))
					first.Direction = "inbound"
					first.Block = json.RawMessage(`{"direction":"inbound","trunk":"old"}`)
					write(t, s, store.Write{OrgID: org, ReceivedAt: at(30), Calls: []store.CallWrite{first}})

					second := cw("sip", id, store.StateRinging, ev("call_hold", 100, at(25)))
					second.Direction = "outbound"
					second.Block = json.RawMessage(`{"direction":"outbound","trunk":"new"}`)
					second.BlockSequence = tt.seq
					second.BlockAt = at(tt.when)
					write(t, s, store.Write{OrgID: org, ReceivedAt: at(31), Calls: []store.CallWrite{second}})

					want := first
					if tt.replaced {
						want = second
					}
					got, _ := getCall(t, s, org, "sip", id)
					if got.Direction != want.Direction {
						t.Errorf("Direction = %q, want %q", got.Direction, want.Direction)
					}
					sameJSON(t, "Block", got.Block, want.Block)
					if got.BlockSequence != want.BlockSequence {
						t.Errorf("BlockSequence = %d, want %d", got.BlockSequence, want.BlockSequence)
					}
					sameTime(t, "BlockAt", got.BlockAt, want.BlockAt)
				})
			}
		}},
		{"FirstAndLastWiden", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			tests := []struct {
				name                  string
				first, last           int
				wantFirst, wantLastAt int
			}{
				{"earlier start", 5, 15, 5, 20},
				{"later end", 15, 25, 10, 25},
				{"inside", 12, 18, 10, 20},
				{"covering", 0, 30, 0, 30},
				{"same", 10, 20, 10, 20},
			}
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					id := fmt.Sprintf("span-%d", i)
					c := cw("sip", id, store.StateRinging, ev("call_received", 1, at(10)), ev("call_hold", 2, at(20)))
					write(t, s, store.Write{OrgID: org, ReceivedAt: at(40), Calls: []store.CallWrite{c}})
					c2 := cw("sip", id, store.StateRinging, ev("call_hold", 3, at(tt.first)), ev("call_hold", 4, at(tt.last)))
					write(t, s, store.Write{OrgID: org, ReceivedAt: at(41), Calls: []store.CallWrite{c2}})
					got, _ := getCall(t, s, org, "sip", id)
					sameTime(t, "FirstAt", got.FirstAt, at(tt.wantFirst))
					sameTime(t, "LastAt", got.LastAt, at(tt.wantLastAt))
				})
			}
		}},
		{"Clients", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			ada := json.RawMessage(`[{"externalId":"p-1","name":"Ada Lovelace"}]`)
			grace := json.RawMessage(`[{"externalId":"p-2","name":"Grace Hopper"},{"externalId":"p-3","name":"G. Hopper"}]`)
			none := json.RawMessage(`[]`)
			tests := []struct {
				name          string
				first, second json.RawMessage
				want          json.RawMessage
			}{
				{"nil then nil", nil, nil, nil},
				{"nil then set", nil, ada, ada},
				{"set then nil keeps", ada, nil, ada},
				{"set then other replaces", ada, grace, grace},
				{"set then empty replaces", ada, none, none},
			}
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					id := fmt.Sprintf("clients-%d", i)
					c := cw("sip", id, store.StateRinging, ev("call_received", 1, at(1)))
					c.Clients = tt.first
					r := write(t, s, store.Write{OrgID: org, ReceivedAt: at(2), Calls: []store.CallWrite{c}})[0]
					sameJSON(t, "first result Clients", r.Clients, tt.first)
					c2 := cw("sip", id, store.StateEnded, ev("call_ended", 2, at(3)))
					c2.Clients = tt.second
					r = write(t, s, store.Write{OrgID: org, ReceivedAt: at(4), Calls: []store.CallWrite{c2}})[0]
					sameJSON(t, "second result Clients", r.Clients, tt.want)
					got, _ := getCall(t, s, org, "sip", id)
					sameJSON(t, "stored Clients", got.Clients, tt.want)
				})
			}
		}},
		{"ResultsInCallerOrder", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			existing := cw("sip", "m-existing", store.StateRinging, ev("call_received", 1, at(1)))
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(1), Calls: []store.CallWrite{existing}})

			var calls []store.CallWrite
			for i := range 40 {
				provider := []string{"sip", "acme", "zeta"}[i%3]
				calls = append(calls, cw(provider, fmt.Sprintf("c-%02d", i), store.StateRinging,
					ev("call_received", 1, at(i)), ev("call_hold", 2, at(i+1))))
			}
			calls = append(calls, cw("sip", "m-existing", store.StateAnswered, ev("call_answered", 2, at(2))))
			rand.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })

			res := write(t, s, store.Write{OrgID: org, ReceivedAt: at(60), Calls: calls})
			for i, c := range calls {
				wantID, wantCreated := callID(org, c), true
				if c.ProviderCallID == "m-existing" {
					wantID, wantCreated = callID(org, existing), false
				}
				if res[i].ID != wantID || res[i].Created != wantCreated {
					t.Errorf("result %d (%s/%s) = (ID %q, Created %v), want (%q, %v)",
						i, c.Provider, c.ProviderCallID, res[i].ID, res[i].Created, wantID, wantCreated)
				}
				for j, e := range res[i].Events {
					if e.ID != c.Events[j].ID || e.Duplicate {
						t.Errorf("result %d event %d = %+v, want (ID %q, Duplicate false)", i, j, e, c.Events[j].ID)
					}
				}
				got, evs := getCall(t, s, org, c.Provider, c.ProviderCallID)
				if got.ID != wantID {
					t.Errorf("GetCall(%s/%s) ID = %q, want %q", c.Provider, c.ProviderCallID, got.ID, wantID)
				}
				for _, e := range evs {
					if e.CallID != wantID {
						t.Errorf("event %s of %s/%s has CallID %q, want %q", e.DedupeKey, c.Provider, c.ProviderCallID, e.CallID, wantID)
					}
				}
			}
		}},
		{"RingsOnFileAndNot", func(t *testing.T, s store.Store) {
			// One write of calls that ring and calls that do not, each on file or new: whichever
			// way a store looks its calls up, each comes out as if written alone.
			org := newOrg(t, s)
			rang := cw("sip", "r-rang", store.StateRinging, ev("call_received", 0, at(1)))
			answered := cw("sip", "r-answered", store.StateAnswered, ev("call_answered", 1, at(1)))
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(1), Calls: []store.CallWrite{rang, answered}})

			calls := []store.CallWrite{
				// rang's ring again, and its answer
				cw("sip", "r-rang", store.StateAnswered, ev("call_received", 0, at(1)), ev("call_answered", 1, at(2))),
				cw("sip", "r-new", store.StateRinging, ev("call_received", 0, at(2))),
				cw("sip", "r-unrung", store.StateAnswered, ev("call_answered", 1, at(2))),
				cw("sip", "r-answered", store.StateEnded, ev("call_ended", 2, at(2))),
				cw("acme", "r-new", store.StateRinging, ev("call_placed", 0, at(2))),
			}
			res := write(t, s, store.Write{OrgID: org, ReceivedAt: at(2), Calls: calls})
			want := []struct {
				created bool
				dup     []bool
				state   store.State
				events  int
			}{
				{false, []bool{true, false}, store.StateAnswered, 2},
				{true, []bool{false}, store.StateRinging, 1},
				{true, []bool{false}, store.StateAnswered, 1},
				{false, []bool{false}, store.StateEnded, 2},
				{true, []bool{false}, store.StateRinging, 1},
			}
			for i, c := range calls {
				r, w := res[i], want[i]
				if r.ID != callID(org, c) || r.Created != w.created {
					t.Errorf("result %d (%s/%s) = (ID %q, Created %v), want (%q, %v)", i, c.Provider, c.ProviderCallID, r.ID, r.Created, callID(org, c), w.created)
				}
				for j, e := range r.Events {
					wantID := c.Events[j].ID
					if w.dup[j] {
						wantID = rang.Events[0].ID
					}
					if e.Duplicate != w.dup[j] || e.ID != wantID {
						t.Errorf("result %d event %d = %+v, want (ID %q, Duplicate %v)", i, j, e, wantID, w.dup[j])
					}
				}
				got, evs := getCall(t, s, org, c.Provider, c.ProviderCallID)
				if got.ID != r.ID || got.State != w.state || len(evs) != w.events {
					t.Errorf("GetCall(%s/%s) = (ID %q, state %v, %d events), want (%q, %v, %d)",
						c.Provider, c.ProviderCallID, got.ID, got.State, len(evs), r.ID, w.state, w.events)
				}
			}
		}},
		{"GetCallMissing", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(1), Calls: []store.CallWrite{
				cw("sip", "call-1", store.StateRinging, ev("call_received", 1, at(1))),
			}})
			wantNoCall(t, s, org, "sip", "call-2")
			wantNoCall(t, s, org, "acme", "call-1")
			wantNoCall(t, s, newID(), "sip", "call-1")
		}},
	}
}
