package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// eventTests covers the event append half of WriteCalls, GetCall's event order and KnownEvents.
func eventTests() []contractTest {
	return []contractTest{
		{"DuplicateComesBackWithStoredID", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			e1, e2 := ev("call_received", 1, at(1)), ev("call_answered", 2, at(2))
			c := cw("sip", "call-1", store.StateAnswered, e1, e2)
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(3), Calls: []store.CallWrite{c}})

			again := ev("call_answered", 2, at(2))
			again.Body = json.RawMessage(`{"type":"call_answered","sequence":2,"note":"resent with another body"}`)
			e3 := ev("call_ended", 3, at(4))
			r := write(t, s, store.Write{OrgID: org, ReceivedAt: at(5), Calls: []store.CallWrite{
				cw("sip", "call-1", store.StateEnded, again, e3),
			}})[0]
			if r.Created || r.ID != callID(org, c) {
				t.Errorf("result = (ID %q, Created %v), want (%q, false)", r.ID, r.Created, callID(org, c))
			}
			if want := (store.EventResult{ID: e2.ID, Duplicate: true}); r.Events[0] != want {
				t.Errorf("duplicate event result = %+v, want %+v", r.Events[0], want)
			}
			if want := (store.EventResult{ID: e3.ID}); r.Events[1] != want {
				t.Errorf("new event result = %+v, want %+v", r.Events[1], want)
			}

			_, evs := getCall(t, s, org, "sip", "call-1")
			if len(evs) != 3 {
				t.Fatalf("GetCall returned %d events, want 3", len(evs))
			}
			checkEvent(t, evs[0], callID(org, c), e1, at(3))
			checkEvent(t, evs[1], callID(org, c), e2, at(3)) // the first copy, body and receipt time included
			checkEvent(t, evs[2], callID(org, c), e3, at(5))
		}},
		{"WriteKeepsNothingOfItsInput", func(t *testing.T, s store.Store) {
			// A caller may reuse a write's memory once WriteCalls returns (the service reuses
			// its events' and its bodies'): what was stored must not change with it.
			org := newOrg(t, s)
			e1, e2 := ev("call_received", 1, at(1)), ev("call_answered", 2, at(2))
			c := cw("sip", "call-1", store.StateAnswered, e1, e2)
			want := c
			want.Block = bytes.Clone(c.Block)
			wantEvents := []store.EventWrite{e1, e2}
			for i := range wantEvents {
				wantEvents[i].Body = bytes.Clone(wantEvents[i].Body)
			}
			w := store.Write{OrgID: org, ReceivedAt: at(3), Calls: []store.CallWrite{c}}
			write(t, s, w)
			scribble := func(b []byte) {
				for i := range b {
					b[i] = ' '
				}
			}
			scribble(c.Block)
			for i := range c.Events {
				scribble(c.Events[i].Body)
				c.Events[i] = store.EventWrite{}
			}
			w.Calls[0] = store.CallWrite{}
			call, evs := getCall(t, s, org, "sip", "call-1")
			checkCall(t, call, org, want)
			if len(evs) != 2 {
				t.Fatalf("GetCall returned %d events, want 2", len(evs))
			}
			for i, e := range evs {
				checkEvent(t, e, call.ID, wantEvents[i], at(3))
			}
		}},
		{"BatchPartlyOnFile", func(t *testing.T, s store.Store) {
			// A batch of several calls whose events are some on file, some new, spread over
			// calls old and new: each event is told apart, not the batch as a whole.
			org := newOrg(t, s)
			e1, e2, e3 := ev("call_received", 1, at(1)), ev("call_answered", 2, at(2)), ev("call_received", 1, at(1))
			first := write(t, s, store.Write{OrgID: org, ReceivedAt: at(3), Calls: []store.CallWrite{
				cw("sip", "call-1", store.StateAnswered, e1, e2),
				cw("sip", "call-2", store.StateRinging, e3),
			}})
			again := ev("call_answered", 2, at(2))
			e4, e5 := ev("call_ended", 3, at(4)), ev("call_ended", 2, at(4))
			e6, e7 := ev("call_received", 1, at(2)), ev("call_answered", 2, at(3))
			w := store.Write{OrgID: org, ReceivedAt: at(5), Calls: []store.CallWrite{
				cw("sip", "call-1", store.StateEnded, again, e4),
				cw("sip", "call-2", store.StateEnded, e5),
				cw("sip", "call-3", store.StateAnswered, e6, e7),
			}}
			res := write(t, s, w)
			want := [][]store.EventResult{
				{{ID: e2.ID, Duplicate: true}, {ID: e4.ID}},
				{{ID: e5.ID}},
				{{ID: e6.ID}, {ID: e7.ID}},
			}
			for i, r := range res {
				if wantCreated := i == 2; r.Created != wantCreated {
					t.Errorf("call %d Created = %v, want %v", i, r.Created, wantCreated)
				}
				if i < 2 && r.ID != first[i].ID {
					t.Errorf("call %d ID = %q, want %q", i, r.ID, first[i].ID)
				}
				if !slices.Equal(r.Events, want[i]) {
					t.Errorf("call %d events = %+v, want %+v", i, r.Events, want[i])
				}
			}
			for i, c := range []struct {
				id   string
				want []store.EventWrite
			}{{"call-1", []store.EventWrite{e1, e2, e4}}, {"call-2", []store.EventWrite{e3, e5}}, {"call-3", []store.EventWrite{e6, e7}}} {
				_, evs := getCall(t, s, org, "sip", c.id)
				if len(evs) != len(c.want) {
					t.Fatalf("%s has %d events, want %d", c.id, len(evs), len(c.want))
				}
				for j := range evs {
					if evs[j].ID != c.want[j].ID {
						t.Errorf("call %d event %d = %s, want %s", i, j, evs[j].ID, c.want[j].ID)
					}
				}
			}
		}},
		{"ProviderEventIDDedupe", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			hold := func(peid string, released bool) store.EventWrite {
				e := ev("call_hold", 0, at(2))
				e.ProviderEventID, e.DedupeKey = peid, peid
				e.Body = json.RawMessage(fmt.Sprintf(`{"type":"call_hold","providerEventId":%q,"released":%t}`, peid, released))
				return e
			}
			on, off := hold("evt-a", false), hold("evt-b", true)
			c := cw("sip", "call-1", store.StateAnswered, on, off)
			r := write(t, s, store.Write{OrgID: org, ReceivedAt: at(3), Calls: []store.CallWrite{c}})[0]
			for i, e := range r.Events {
				if e.Duplicate {
					t.Errorf("event %d reported duplicate; distinct provider event IDs are distinct events", i)
				}
			}
			resent := hold("evt-b", true)
			r = write(t, s, store.Write{OrgID: org, ReceivedAt: at(4), Calls: []store.CallWrite{
				cw("sip", "call-1", store.StateAnswered, resent),
			}})[0]
			if want := (store.EventResult{ID: off.ID, Duplicate: true}); r.Events[0] != want {
				t.Errorf("resent event result = %+v, want %+v", r.Events[0], want)
			}
			_, evs := getCall(t, s, org, "sip", "call-1")
			if len(evs) != 2 {
				t.Fatalf("GetCall returned %d events, want 2", len(evs))
			}
			for _, e := range evs {
				want := on
				if e.ID == off.ID {
					want = off
				}
				checkEvent(t, e, callID(org, c), want, at(3))
			}
		}},
		{"DedupeKeyIsPerCall", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			a := cw("sip", "call-a", store.StateRinging, ev("call_received", 1, at(1)))
			b := cw("sip", "call-b", store.StateRinging, ev("call_received", 1, at(1)))
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(2), Calls: []store.CallWrite{a}})
			r := write(t, s, store.Write{OrgID: org, ReceivedAt: at(3), Calls: []store.CallWrite{b}})[0]
			if !r.Created || r.Events[0].Duplicate || r.Events[0].ID != b.Events[0].ID {
				t.Errorf("result for call-b = %+v, want a new call with a new event", r)
			}
		}},
		{"RetryStoresNothingNew", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			w := store.Write{OrgID: org, ReceivedAt: at(10), Calls: []store.CallWrite{
				cw("sip", "call-1", store.StateEnded, ev("call_answered", 2, at(2)), ev("call_ended", 3, at(5))),
				cw("acme", "call-2", store.StateRinging, ev("call_received", 1, at(1))),
			}}
			w.Calls[0].Clients = json.RawMessage(`[{"externalId":"p-1","name":"Ada"}]`)
			first := write(t, s, w)
			before := map[string]store.Call{}
			beforeEvents := map[string][]store.Event{}
			for _, c := range w.Calls {
				before[c.ProviderCallID], beforeEvents[c.ProviderCallID] = getCall(t, s, org, c.Provider, c.ProviderCallID)
			}

			retries := []struct {
				name string
				w    store.Write
			}{
				{"identical write", w},
				{"same body, fresh IDs", refresh(w)},
				{"fresh IDs, later receipt", func() store.Write { r := refresh(w); r.ReceivedAt = at(20); return r }()},
			}
			for _, rt := range retries {
				t.Run(rt.name, func(t *testing.T) {
					res := write(t, s, rt.w)
					for i, r := range res {
						if r.Created || r.ID != first[i].ID {
							t.Errorf("call %d = (ID %q, Created %v), want (%q, false)", i, r.ID, r.Created, first[i].ID)
						}
						for j, e := range r.Events {
							if want := (store.EventResult{ID: first[i].Events[j].ID, Duplicate: true}); e != want {
								t.Errorf("call %d event %d = %+v, want %+v", i, j, e, want)
							}
						}
					}
					for _, c := range w.Calls {
						got, evs := getCall(t, s, org, c.Provider, c.ProviderCallID)
						was := before[c.ProviderCallID]
						checkCall(t, got, org, c)
						if got.ID != was.ID || !got.CreatedAt.Equal(was.CreatedAt) {
							t.Errorf("call %s = (ID %q, CreatedAt %v), want (%q, %v)", c.ProviderCallID, got.ID, got.CreatedAt, was.ID, was.CreatedAt)
						}
						wasEvents := beforeEvents[c.ProviderCallID]
						if !slices.Equal(eventIDs(evs), eventIDs(wasEvents)) {
							t.Errorf("call %s event IDs = %q, want %q", c.ProviderCallID, eventIDs(evs), eventIDs(wasEvents))
							continue
						}
						for i := range evs {
							checkEvent(t, evs[i], was.ID, c.Events[i], w.ReceivedAt)
						}
					}
				})
			}
		}},
		{"BodyVerbatim", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			bodies := []string{
				`{"type":"call_received","sequence":0}`,
				"{ \"b\" :1 ,\n\t\"a\":  [ 1 , 2 ]\r\n}",
				`{"z":1,"a":2,"m":{"y":true,"b":null}}`,
				`{"name":"Zoë Ångström 🦷 歯科医院","escaped":"\ud83e\uddb7 \u00e9"}`,
				`{"nul":"a\u0000b","ctl":"\u001f\t\n"}`,
				`{"html":"<a href=\"x\">&amp;</a>","slash":"\/path"}`,
				`{"big":12345678901234567890123,"float":1.50,"exp":1E+2,"neg":-0}`,
				`{"dup":1,"dup":2}`,
				`{"raw":{"sip":"INVITE sip:+15550100@example.com SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.1"}}`,
				`{"long":"` + strings.Repeat("x", 64<<10) + `"}`,
				"\n  {\"leading\":\"and trailing whitespace\"}  \n",
			}
			var events []store.EventWrite
			for i, b := range bodies {
				e := ev("call_hold", int64(i), at(i))
				e.Body = json.RawMessage(b)
				events = append(events, e)
			}
			c := cw("sip", "call-1", store.StateAnswered, events...)
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(100), Calls: []store.CallWrite{c}})
			_, evs := getCall(t, s, org, "sip", "call-1")
			if len(evs) != len(bodies) {
				t.Fatalf("GetCall returned %d events, want %d", len(evs), len(bodies))
			}
			for i, e := range evs {
				if string(e.Body) != bodies[i] {
					t.Errorf("body %d = %q, want %q", i, e.Body, bodies[i])
				}
			}
		}},
		{"GetCallEventOrder", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			named := func(name string, seq int64, when time.Time) store.EventWrite {
				e := ev("call_hold", seq, when)
				e.DedupeKey = name
				e.ProviderEventID = name
				return e
			}
			// Two events tied on sequence and OrderAt and received together: the ID decides.
			idLo, idHi := newID(), newID()
			if idHi < idLo {
				idLo, idHi = idHi, idLo
			}
			tieHi, tieLo := named("tie-hi", 3, at(7)), named("tie-lo", 3, at(7))
			tieHi.ID, tieLo.ID = idHi, idLo
			// Two events of one sequence whose wall clocks, read as text, sort the wrong way round.
			east := named("east", 4, at(19).In(time.FixedZone("UTC+10", 10*3600)))
			west := named("west", 4, at(20).In(time.FixedZone("UTC-8", -8*3600)))

			seq2 := named("seq2", 2, at(1))
			seq1t5 := named("seq1-t5", 1, at(5))
			seq1t3late := named("seq1-t3-late", 1, at(3))
			seq0 := named("seq0", 0, at(50))
			first := cw("sip", "call-1", store.StateAnswered, west, seq2, tieHi, seq1t5, seq1t3late, east, seq0, tieLo)
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(100), Calls: []store.CallWrite{first}})

			// Ties seq1t3late on sequence and OrderAt but was received earlier.
			seq1t3early := named("seq1-t3-early", 1, at(3))
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(90), Calls: []store.CallWrite{
				cw("sip", "call-1", store.StateAnswered, seq1t3early),
			}})

			want := []store.EventWrite{seq0, seq1t3early, seq1t3late, seq1t5, seq2, tieLo, tieHi, east, west}
			_, evs := getCall(t, s, org, "sip", "call-1")
			var got, wantNames []string
			for _, e := range evs {
				got = append(got, e.DedupeKey)
			}
			for _, e := range want {
				wantNames = append(wantNames, e.DedupeKey)
			}
			if !slices.Equal(got, wantNames) {
				t.Fatalf("event order = %q, want %q", got, wantNames)
			}
			for i := range evs {
				received := at(100)
				if want[i].DedupeKey == "seq1-t3-early" {
					received = at(90)
				}
				checkEvent(t, evs[i], callID(org, first), want[i], received)
			}
		}},
		{"KnownEvents", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			tagged := ev("call_recorded", 4, at(4))
			tagged.ProviderEventID, tagged.DedupeKey = "rec-1", "rec-1"
			write(t, s, store.Write{OrgID: org, ReceivedAt: at(10), Calls: []store.CallWrite{
				cw("sip", "c1", store.StateEnded, ev("call_received", 1, at(1)), ev("call_ended", 3, at(3))),
				cw("acme", "c2", store.StateUnknown, tagged),
			}})

			got, err := s.KnownEvents(t.Context(), org, nil, nil)
			if err != nil {
				t.Fatalf("KnownEvents(no refs): %v", err)
			}
			if len(got) != 0 {
				t.Errorf("KnownEvents(no refs) = %v, want empty", got)
			}

			tests := []struct {
				ref  store.EventRef
				want bool
			}{
				{store.EventRef{Provider: "sip", ProviderCallID: "c1", DedupeKey: "call_ended:3"}, true},
				{store.EventRef{Provider: "sip", ProviderCallID: "c1", DedupeKey: "call_answered:2"}, false},
				{store.EventRef{Provider: "acme", ProviderCallID: "c2", DedupeKey: "rec-1"}, true},
				{store.EventRef{Provider: "sip", ProviderCallID: "c2", DedupeKey: "rec-1"}, false},
				{store.EventRef{Provider: "acme", ProviderCallID: "c1", DedupeKey: "call_ended:3"}, false},
				{store.EventRef{Provider: "sip", ProviderCallID: "nope", DedupeKey: "call_received:1"}, false},
				{store.EventRef{Provider: "sip", ProviderCallID: "c1", DedupeKey: "call_received:1"}, true},
				{store.EventRef{Provider: "sip", ProviderCallID: "c1", DedupeKey: "call_ended:3"}, true},
				{store.EventRef{Provider: "acme", ProviderCallID: "c2", DedupeKey: "call_recorded:4"}, false},
			}
			var refs []store.EventRef
			var want []bool
			for _, tt := range tests {
				refs = append(refs, tt.ref)
				want = append(want, tt.want)
			}
			got, err = s.KnownEvents(t.Context(), org, refs, nil)
			if err != nil {
				t.Fatalf("KnownEvents: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("KnownEvents = %v, want %v", got, want)
			}
			// Reversed, to catch answers returned in storage order rather than ref order.
			slices.Reverse(refs)
			slices.Reverse(want)
			got, err = s.KnownEvents(t.Context(), org, refs, nil)
			if err != nil {
				t.Fatalf("KnownEvents: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("KnownEvents (reversed) = %v, want %v", got, want)
			}
		}},
	}
}
