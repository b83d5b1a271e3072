package storetest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/callwire/callwire/core/store"
)

// summaryTests covers the call's history row (store.Summary): how each write's summary merges
// into the stored one, whatever the order, lateness or repetition of the writes.
func summaryTests() []contractTest {
	// The writes of one inbound call: received, answered by 201, answered again by 305 (a
	// transfer), ended, recorded. Each write's summary says what its own events and block say.
	writes := func() []store.CallWrite {
		mk := func(seq int64, typ string, st store.State, sum store.Summary) store.CallWrite {
			c := cw("sip", "sum-1", st, ev(typ, seq, at(int(seq)*2)))
			sum.FromKey, sum.ToExt = store.NumberKey(fmt.Sprintf("+15550100%03d", seq)), fmt.Sprintf("2%02d", seq)
			sum.Locations = json.RawMessage(fmt.Sprintf(`["desk-%d"]`, seq))
			c.Summary = sum
			return c
		}
		return []store.CallWrite{
			mk(1, "call_received", store.StateRinging, store.Summary{}),
			mk(2, "call_answered", store.StateAnswered, store.Summary{AnsweredAt: at(4), AnsweredBy: "201", Flags: store.FlagAnswered}),
			mk(3, "call_answered", store.StateAnswered, store.Summary{AnsweredAt: at(6), AnsweredBy: "305", Flags: store.FlagAnswered}),
			mk(4, "call_ended", store.StateEnded, store.Summary{EndedAt: at(8)}),
			mk(5, "call_recorded", store.StateUnknown, store.Summary{Flags: store.FlagRecorded}),
		}
	}
	want := store.Summary{
		AnsweredAt: at(4), AnsweredBy: "201", EndedAt: at(8), Flags: store.FlagAnswered | store.FlagRecorded,
		FromKey: store.NumberKey("+15550100005"), ToExt: "205", Locations: json.RawMessage(`["desk-5"]`),
	}
	check := func(t *testing.T, s store.Store, org, how string) {
		t.Helper()
		c, _ := getCall(t, s, org, "sip", "sum-1")
		checkSummary(t, how, c.Summary, want)
	}
	// other is a call written beside sum-1, so that the write of several calls is covered too.
	other := func(i int) store.CallWrite {
		c := cw("sip", fmt.Sprintf("other-%d", i), store.StateRinging, ev("call_received", 1, at(i)))
		c.Summary.FromKey = store.NumberKey("+15550199999")
		return c
	}
	orders := map[string][]int{
		"InOrder":  {0, 1, 2, 3, 4},
		"Reversed": {4, 3, 2, 1, 0},
		"Shuffled": {3, 0, 4, 2, 1},
	}
	var tests []contractTest
	for name, order := range orders {
		tests = append(tests, contractTest{name, func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			ws := writes()
			for _, i := range order {
				write(t, s, store.Write{OrgID: org, ReceivedAt: at(20), Calls: []store.CallWrite{ws[i]}})
			}
			check(t, s, org, name)
		}}, contractTest{name + "Batched", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			ws := writes()
			for n, i := range order {
				write(t, s, store.Write{OrgID: org, ReceivedAt: at(20), Calls: []store.CallWrite{other(n), ws[i]}})
			}
			check(t, s, org, name+" batched")
		}})
	}
	tests = append(tests,
		contractTest{"Repeated", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			ws := writes()
			r := rand.New(rand.NewPCG(7, 48))
			for range 3 {
				for _, i := range r.Perm(len(ws)) {
					w := store.Write{OrgID: org, ReceivedAt: at(20), Calls: []store.CallWrite{ws[i]}}
					write(t, s, refresh(w))
				}
			}
			check(t, s, org, "every write three times")
		}},
		contractTest{"OneWriteOfEveryEvent", func(t *testing.T, s store.Store) {
			// Five events in one write: more than a store may send as one statement's rows.
			org := newOrg(t, s)
			var evs []store.EventWrite
			for _, c := range writes() {
				evs = append(evs, c.Events...)
			}
			c := cw("sip", "sum-1", store.StateEnded, evs...)
			c.Summary = want
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(20), Calls: []store.CallWrite{c}})
			write(t, s, refresh(store.Write{OrgID: org, ReceivedAt: at(21), Calls: []store.CallWrite{c}}))
			check(t, s, org, "one write of every event, and its resend")
		}},
		contractTest{"NothingSaidIsZero", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			c := cw("sip", "bare", store.StateRinging, ev("call_received", 1, at(1)))
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(2), Calls: []store.CallWrite{c}})
			got, _ := getCall(t, s, org, "sip", "bare")
			checkSummary(t, "a call whose write says nothing", got.Summary, store.Summary{})
		}},
	)
	return tests
}

// checkSummary asserts that got is want, locations compared as JSON values.
func checkSummary(t *testing.T, how string, got, want store.Summary) {
	t.Helper()
	sameTime(t, how+": AnsweredAt", got.AnsweredAt, want.AnsweredAt)
	sameTime(t, how+": EndedAt", got.EndedAt, want.EndedAt)
	sameJSON(t, how+": Locations", got.Locations, want.Locations)
	got.AnsweredAt, got.EndedAt, got.Locations = want.AnsweredAt, want.EndedAt, want.Locations
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: Summary = %+v, want %+v", how, got, want)
	}
}
