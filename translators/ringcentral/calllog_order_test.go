package ringcentral

import (
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
