package ringcentral

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// TestCallLogOrdersAfterLive merges what the live path and the call-log poll send for one call,
// keeps the first of each dedupe key (as the core does), and reads the call back in the
// contract's order (sequence, then occurredAt; the stores' ORDER BY sequence, order_at): the
// call-log events must come after the live path's, in the order the call went, whether the
// live path saw the call's end or lost it with its socket.
func TestCallLogOrdersAfterLive(t *testing.T) {
	records := map[string]callLogRecord{}
	for _, page := range callLogPages(t) {
		for _, r := range page {
			records[r.TelephonySessionID] = r
		}
	}
	tests := []struct {
		scenario string
		live     int // how many of the scenario's notifications the live path heard
		want     []string
	}{
		{"normal_call", 4, []string{"call_received", "call_answered", "call_ended", "call_recorded"}},
		{"normal_call", 3, []string{"call_received", "call_answered", "call_ended", "call_recorded"}},
		{"missed_call", 3, []string{"call_received", "call_missed", "call_ended"}},
		{"missed_call", 2, []string{"call_received", "call_missed", "call_ended"}},
		{"missed_call", 0, []string{"call_missed", "call_ended"}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			cs := newCalls(testPlan(t), DefaultProvider, time.Hour)
			var evs []event.Event
			var session string
			for _, n := range scenario(t, tt.scenario)[:tt.live] {
				ev, _, err := decodeSessionEvent(n)
				if err != nil {
					t.Fatal(err)
				}
				session = ev.TelephonySessionID
				evs = append(evs, cs.observe(ev, n, time.Now())...)
			}
			if session == "" {
				first, _, _ := decodeSessionEvent(scenario(t, tt.scenario)[0])
				session = first.TelephonySessionID
			}
			r, ok := records[session]
			if !ok {
				t.Fatalf("no call-log record of %s in testdata/call_log_pages.json", session)
			}
			p := &poller{calls: cs, ended: &endedSet{m: map[string]time.Time{}, keep: time.Hour}}
			evs = append(evs, p.events(r)...)

			seen := map[string]bool{}
			var stored []event.Event
			for _, e := range evs {
				if k := string(e.DedupeKey()); !seen[k] {
					seen[k] = true
					stored = append(stored, e)
				}
			}
			slices.SortStableFunc(stored, contractOrder)
			var got []string
			for _, e := range stored {
				got = append(got, string(e.Type))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("live %d notifications: stored in order %s, want %s", tt.live, strings.Join(got, ", "), strings.Join(tt.want, ", "))
			}
		})
	}
}

// TestHeldEndLeftToCallLog follows a call whose end came while notifications below it were
// still missing, and never came: the live path tells the ring and the late answer but no end,
// and the call log's record ends the call, answered, after the live path's events.
func TestHeldEndLeftToCallLog(t *testing.T) {
	const session = "s-held-end"
	caller := func(code string) wireParty {
		return wireParty{ID: "p-1", Direction: "Outbound", Code: code, From: endCaller(), To: endDesk()}
	}
	desk := func(code string) wireParty {
		return wireParty{ID: "p-2", Direction: "Inbound", Code: code, From: endCaller(), To: endDesk()}
	}
	cs := newCalls(testPlan(t), DefaultProvider, time.Hour)
	var evs []event.Event
	for _, n := range []json.RawMessage{
		sessionNoteAt(t, session, 1, 1, caller(statusSetup)),
		sessionNoteAt(t, session, 2, 2, caller(statusAnswered), desk(statusProceeding)),
		sessionNoteAt(t, session, 10, 40, caller(statusDisconn), desk(statusDisconn)),
		sessionNoteAt(t, session, 9, 9, desk(statusAnswered)),
	} {
		ev, _, err := decodeSessionEvent(n)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, cs.observe(ev, n, time.Now())...)
	}
	if got := types(evs); !slices.Equal(got, []string{"call_received/rc-received", "call_answered/rc-answered"}) {
		t.Fatalf("live path sent %v, want call_received, call_answered and no end", got)
	}
	t0 := time.Date(2023, 6, 6, 10, 0, 0, 0, time.UTC)
	p := &poller{calls: cs, ended: &endedSet{m: map[string]time.Time{}, keep: time.Hour}}
	evs = append(evs, p.events(logRecord(session, "Inbound", "Accepted", t0.Add(time.Second), 39, t0.Add(time.Minute)))...)
	slices.SortStableFunc(evs, contractOrder)
	var got []string
	for _, e := range evs {
		got = append(got, string(e.Type)+" "+string(e.Disposition))
	}
	want := []string{"call_received ", "call_answered ", "call_ended answered"}
	if !slices.Equal(got, want) {
		t.Errorf("stored in order %q, want %q", got, want)
	}
}
