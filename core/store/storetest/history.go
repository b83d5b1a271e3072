package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// historyTests covers the call history's reads: GetCallByID and ListCalls.
func historyTests() []contractTest {
	// put writes one call of org: started at start, in direction dir, with state st, the
	// summary sum, and one event per type in types.
	put := func(t *testing.T, s store.Store, org, provider, id, dir string, start time.Time, st store.State, sum store.Summary, types ...string) string {
		t.Helper()
		var evs []store.EventWrite
		for i, typ := range types {
			evs = append(evs, ev(typ, int64(i+1), start.Add(time.Duration(i)*time.Second)))
		}
		c := cw(provider, id, st, evs...)
		c.Direction, c.Summary = dir, sum
		write(t, s, store.Write{OrgID: org, ReceivedAt: start, Calls: []store.CallWrite{c}})
		return callID(org, c)
	}
	list := func(t *testing.T, s store.Store, org string, f store.CallFilter) []string {
		t.Helper()
		recs, err := s.ListCalls(t.Context(), org, f, nil, store.MaxListLimit)
		if err != nil {
			t.Fatalf("ListCalls(%+v): %v", f, err)
		}
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.Call.ProviderCallID
		}
		return ids
	}
	return []contractTest{
		{"GetCallByID", func(t *testing.T, s store.Store) {
			org, other := newOrg(t, s), newOrg(t, s)
			id := put(t, s, org, "sip", "c1", "inbound", at(1), store.StateEnded, store.Summary{EndedAt: at(2)},
				"call_received", "call_ended")
			c, evs, err := s.GetCallByID(t.Context(), org, id)
			if err != nil {
				t.Fatalf("GetCallByID: %v", err)
			}
			if c.ID != id || c.ProviderCallID != "c1" || c.Provider != "sip" || c.State != store.StateEnded || c.No == 0 {
				t.Errorf("call = %+v", c)
			}
			sameTime(t, "EndedAt", c.Summary.EndedAt, at(2))
			if len(evs) != 2 || evs[0].Type != "call_received" || evs[1].Type != "call_ended" || evs[0].CallID != id {
				t.Errorf("events = %+v, want received then ended", evs)
			}
			_, _, err = s.GetCallByID(t.Context(), other, id)
			wantErr(t, "GetCallByID of another organization's call", err, store.ErrNotFound)
			_, _, err = s.GetCallByID(t.Context(), org, "no-such-call")
			wantErr(t, "GetCallByID of no call", err, store.ErrNotFound)
		}},
		{"NewestFirstWithEvents", func(t *testing.T, s store.Store) {
			org, other := newOrg(t, s), newOrg(t, s)
			put(t, s, org, "sip", "old", "inbound", at(1), store.StateRinging, store.Summary{}, "call_received")
			put(t, s, org, "sip", "new", "inbound", at(100), store.StateRinging, store.Summary{}, "call_received")
			put(t, s, org, "sip", "mid", "inbound", at(50), store.StateRinging, store.Summary{}, "call_received", "call_hold")
			put(t, s, other, "sip", "theirs", "inbound", at(60), store.StateRinging, store.Summary{}, "call_received")
			recs, err := s.ListCalls(t.Context(), org, store.CallFilter{}, nil, 10)
			if err != nil {
				t.Fatalf("ListCalls: %v", err)
			}
			var ids []string
			for _, r := range recs {
				ids = append(ids, r.Call.ProviderCallID)
			}
			if !slices.Equal(ids, []string{"new", "mid", "old"}) {
				t.Fatalf("ListCalls = %q, want new, mid, old", ids)
			}
			if len(recs[1].Events) != 2 || recs[1].Events[1].Type != "call_hold" || len(recs[0].Events) != 1 {
				t.Errorf("events of the page: %d, %d", len(recs[0].Events), len(recs[1].Events))
			}
			sameTime(t, "FirstAt", recs[0].Call.FirstAt, at(100))
		}},
		{"Filters", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			loc := func(l string) json.RawMessage { return json.RawMessage(`["` + l + `"]`) }
			put(t, s, org, "sip", "ringing", "inbound", at(1), store.StateRinging,
				store.Summary{FromKey: store.NumberKey("+442071234567"), Locations: loc("front")}, "call_received")
			put(t, s, org, "sip", "answered", "inbound", at(2), store.StateEnded,
				store.Summary{Flags: store.FlagAnswered | store.FlagRecorded, AnsweredBy: "201", AnsweredAt: at(3), EndedAt: at(4),
					FromKey: store.NumberKey("+15550100123"), ToExt: "200", Locations: loc("front")}, "call_received", "call_answered", "call_ended")
			put(t, s, org, "sip", "voicemail", "inbound", at(3), store.StateEnded,
				store.Summary{Flags: store.FlagVoicemail, EndedAt: at(5), FromKey: store.NumberKey("+15550100124"), Locations: loc("back")},
				"call_received", "call_ended")
			put(t, s, org, "rc", "missed", "inbound", at(4), store.StateEnded,
				store.Summary{EndedAt: at(6), FromKey: store.NumberKey("+15550100123"), Locations: loc("back")}, "call_received", "call_missed")
			put(t, s, org, "sip", "unanswered", "outbound", at(5), store.StateEnded,
				store.Summary{EndedAt: at(7), FromExt: "201", ToKey: store.NumberKey("+15550100123")}, "call_placed", "call_ended")
			put(t, s, org, "sip", "internal", "internal", at(6), store.StateEnded,
				store.Summary{Flags: store.FlagAnswered, FromExt: "202", ToExt: "203"}, "call_placed", "call_answered", "call_ended")

			for _, tc := range []struct {
				name string
				f    store.CallFilter
				want []string
			}{
				{"all", store.CallFilter{}, []string{"internal", "unanswered", "missed", "voicemail", "answered", "ringing"}},
				{"from", store.CallFilter{From: at(4)}, []string{"internal", "unanswered", "missed"}},
				{"until", store.CallFilter{Until: at(3)}, []string{"answered", "ringing"}},
				{"from until", store.CallFilter{From: at(2), Until: at(4)}, []string{"voicemail", "answered"}},
				{"direction", store.CallFilter{Directions: []string{"outbound", "internal"}}, []string{"internal", "unanswered"}},
				{"in progress", store.CallFilter{Outcomes: []string{store.OutcomeInProgress}}, []string{"ringing"}},
				{"answered", store.CallFilter{Outcomes: []string{store.OutcomeAnswered}}, []string{"internal", "answered"}},
				{"voicemail", store.CallFilter{Outcomes: []string{store.OutcomeVoicemail}}, []string{"voicemail"}},
				{"missed", store.CallFilter{Outcomes: []string{store.OutcomeMissed}}, []string{"missed"}},
				{"not answered", store.CallFilter{Outcomes: []string{store.OutcomeNotAnswered}}, []string{"unanswered"}},
				{"missed or voicemail", store.CallFilter{Outcomes: []string{store.OutcomeMissed, store.OutcomeVoicemail}}, []string{"missed", "voicemail"}},
				{"number", store.CallFilter{Number: &store.NumberMatch{Key: store.NumberKey("+15550100123")}}, []string{"unanswered", "missed", "answered"}},
				{"trailing digits", store.CallFilter{Number: &store.NumberMatch{Key: store.NumberKey("0124"), Trailing: true}}, []string{"voicemail"}},
				{"trailing digits of several", store.CallFilter{Number: &store.NumberMatch{Key: store.NumberKey("0100123"), Trailing: true}}, []string{"unanswered", "missed", "answered"}},
				{"a whole number is not a suffix", store.CallFilter{Number: &store.NumberMatch{Key: store.NumberKey("5550100123")}}, nil},
				{"extension", store.CallFilter{Extension: "201"}, []string{"unanswered", "answered"}},
				{"extension called", store.CallFilter{Extension: "203"}, []string{"internal"}},
				{"location", store.CallFilter{Location: "back"}, []string{"missed", "voicemail"}},
				{"provider", store.CallFilter{Provider: "rc"}, []string{"missed"}},
				{"recorded", store.CallFilter{Recorded: true}, []string{"answered"}},
				{"all together", store.CallFilter{From: at(1), Until: at(10), Directions: []string{"inbound"}, Outcomes: []string{store.OutcomeAnswered},
					Number: &store.NumberMatch{Key: store.NumberKey("0123"), Trailing: true}, Extension: "201", Location: "front", Provider: "sip", Recorded: true},
					[]string{"answered"}},
			} {
				if got := list(t, s, org, tc.f); !slices.Equal(got, tc.want) {
					t.Errorf("%s: ListCalls = %q, want %q", tc.name, got, tc.want)
				}
			}
		}},
		{"CursorWalksEachCallOnce", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			// Thirty calls, some starting at the same instant, so that the call's number breaks ties.
			want := map[string]bool{}
			for i := range 30 {
				id := fmt.Sprintf("c%02d", i)
				put(t, s, org, "sip", id, "inbound", at(i/3), store.StateRinging, store.Summary{}, "call_received")
				want[id] = true
			}
			seen := map[string]int{}
			var after *store.CallPosition
			for page := 0; ; page++ {
				recs, err := s.ListCalls(t.Context(), org, store.CallFilter{}, after, 4)
				if err != nil {
					t.Fatalf("ListCalls: %v", err)
				}
				for _, r := range recs {
					seen[r.Call.ProviderCallID]++
				}
				if len(recs) < 4 {
					break
				}
				p := recs[len(recs)-1].Call.Position()
				after = &p
				// Calls keep arriving while the pages are read: newer ones, and one reported late
				// that started among the calls already read.
				put(t, s, org, "sip", fmt.Sprintf("new-%d", page), "inbound", at(100+page), store.StateRinging, store.Summary{}, "call_received")
				put(t, s, org, "sip", fmt.Sprintf("late-%d", page), "inbound", at(9), store.StateRinging, store.Summary{}, "call_received")
				if page > 20 {
					t.Fatal("the walk does not end")
				}
			}
			for id := range want {
				if seen[id] != 1 {
					t.Errorf("call %s seen %d times, want once", id, seen[id])
				}
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("call %s seen %d times", id, n)
				}
			}
		}},
		{"RefusesInvalid", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			for _, tc := range []struct {
				f     store.CallFilter
				limit int
			}{
				{store.CallFilter{}, 0},
				{store.CallFilter{}, store.MaxListLimit + 1},
				{store.CallFilter{Outcomes: []string{"lost"}}, 10},
				{store.CallFilter{Directions: []string{"sideways"}}, 10},
				{store.CallFilter{Number: &store.NumberMatch{Key: "12a"}}, 10},
			} {
				_, err := s.ListCalls(t.Context(), org, tc.f, nil, tc.limit)
				wantErr(t, fmt.Sprintf("ListCalls(%+v, %d)", tc.f, tc.limit), err, store.ErrInvalid)
			}
		}},
	}
}
