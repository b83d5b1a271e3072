package ringcentral

import (
	"slices"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// waitUntil waits (polling, up to 20 s) until cond holds, and fails the test if it never does.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// normalCall is the telephony session of the normal_call scenario, which tests push last: its
// end shows that everything pushed before it was handled.
const normalCall = "s-a0d7e4d8b7a7fz1885c9bd8e8ez0001"

// waitForEnd waits until rec holds the call_ended of call. Notifications come over one socket and
// are handled in order, so once it is there every notification pushed before that call's end has
// been handled, and its events taken.
func waitForEnd(t *testing.T, rec *recorder, call string) {
	t.Helper()
	waitUntil(t, "the call_ended of "+call, func() bool {
		return slices.ContainsFunc(rec.events(), func(e event.Event) bool { return e.ProviderCallID == call && e.Type == event.CallEnded })
	})
}

// eventsOf are the events of call among evs, in order.
func eventsOf(evs []event.Event, call string) []event.Event {
	var out []event.Event
	for _, e := range evs {
		if e.ProviderCallID == call {
			out = append(out, e)
		}
	}
	return out
}

// wireEnd is one end of a party as the telephony-sessions notification writes it.
type wireEnd struct {
	PhoneNumber     string `json:"phoneNumber,omitempty"`
	Name            string `json:"name,omitempty"`
	ExtensionID     string `json:"extensionId,omitempty"`
	ExtensionNumber string `json:"extensionNumber,omitempty"`
}

// The ends the notifications and records of the tests use: an outside caller, the clinic's front
// desk (extension 101 on the clinic's number), a second clinic phone (102) and an outside number
// the clinic calls.
func endCaller() wireEnd { return wireEnd{PhoneNumber: "+16505550123", Name: "WIRELESS CALLER"} }
func endDesk() wireEnd {
	return wireEnd{PhoneNumber: "+16505550100", Name: "Front Desk", ExtensionID: "400131758008", ExtensionNumber: "101"}
}
func endDoctor() wireEnd {
	return wireEnd{PhoneNumber: "+16505550100", Name: "Dr Smith", ExtensionID: "400131758009", ExtensionNumber: "102"}
}
func endOut() wireEnd { return wireEnd{PhoneNumber: "+14155550142"} }
