package ringcentral

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// FuzzNotification feeds arbitrary WebSocket messages, and arrays of notification bodies,
// through the decoder and the mapping: they must never panic, and every event they produce must
// validate.
func FuzzNotification(f *testing.F) {
	for _, name := range []string{"normal_call", "missed_call", "transfer", "hold", "voicemail", "outbound",
		"inbound_answered", "inbound_rang_out", "inbound_voicemail", "internal_call", "outbound_answered"} {
		b, err := os.ReadFile("testdata/" + name + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`[{"type":"ServerNotification","messageId":"1"},{"event":"/restapi/v1.0/account/1/telephony/sessions","body":{"telephonySessionId":"s-1","eventTime":"2023-06-06T10:00:00Z","sequence":1,"parties":[{"id":"p","direction":"Inbound","status":{"code":"Disconnected"},"missedCall":true}]}}]`))
	f.Add([]byte(`[{"type":"Heartbeat","messageId":"x"}]`))
	plan := testPlan(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		cs := newCalls(plan, DefaultProvider, time.Hour)
		feed := func(body []byte) {
			ev, ok, err := decodeSessionEvent(body)
			if err != nil || !ok {
				return
			}
			for _, e := range cs.observe(ev, body, time.Now()) {
				if err := e.Validate(); err != nil {
					t.Fatalf("invalid %s: %v", e.Type, err)
				}
			}
		}
		if _, body, err := decodeMessage(b); err == nil && body != nil {
			feed(body)
		}
		feed(b)
		// A session's notifications in a row, as the fixtures hold them: the mapping's state
		// across notifications (answers, holds, transfers, ends) meets arbitrary input too.
		var notes []json.RawMessage
		if json.Unmarshal(b, &notes) == nil {
			for _, n := range notes {
				feed(n)
			}
		}
	})
}
