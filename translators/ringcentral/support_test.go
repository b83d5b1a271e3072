package ringcentral

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
)

// contractOrder orders a call's events as the contract does: by sequence, then occurredAt.
func contractOrder(a, b event.Event) int {
	if c := cmp.Compare(a.Sequence, b.Sequence); c != 0 {
		return c
	}
	return a.OccurredAt.Compare(b.OccurredAt)
}

// normalCall is the telephony session of the normal_call scenario, which tests push last: its
// end shows that everything pushed before it was handled.
const normalCall = "s-a0d7e4d8b7a7fz1885c9bd8e8ez0001"

// waitForEnd waits until rec holds the call_ended of call. Notifications come over one socket and
// are handled in order, so once it is there every notification pushed before that call's end has
// been handled, and its events taken.
func waitForEnd(t *testing.T, rec *recorder, call string) {
	t.Helper()
	testwait.Until(t, 20*time.Second, "the call_ended of "+call, func() bool {
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

// matchGolden checks that evs are exactly the events of the golden file name, in order: none
// lost, none twice.
func matchGolden(t *testing.T, name string, evs []event.Event) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var got []string
	for _, e := range evs {
		got = append(got, summary(e))
	}
	if !slices.Equal(got, want) {
		t.Errorf("events differ from golden/%s.txt\n got:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
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

// logRecord is a call-log record in the Detailed view's shape (as in
// testdata/call_log_pages.json): the call of telephony session session, "Inbound" (the caller to
// the front desk) or "Outbound" (the front desk to an outside number), started at start, lasting
// dur seconds, with result, last modified at mod.
func logRecord(session, direction, result string, start time.Time, dur float64, mod time.Time) callLogRecord {
	c, d := endCaller(), endDesk()
	caller := endpoint{PhoneNumber: c.PhoneNumber, Name: c.Name}
	desk := endpoint{PhoneNumber: d.PhoneNumber, ExtensionNumber: d.ExtensionNumber, ExtensionID: flexString(d.ExtensionID), Name: d.Name}
	r := callLogRecord{ID: "Y" + session, SessionID: "4503990099", TelephonySessionID: session, StartTime: start.Format(time.RFC3339Nano),
		Duration: dur, Direction: direction, Type: "Voice", Result: result, From: caller, To: desk, LastModifiedTime: mod.Format(time.RFC3339Nano)}
	if direction == "Outbound" {
		r.From, r.To = desk, endpoint{PhoneNumber: endOut().PhoneNumber}
	}
	return r
}

// recorded is r with an automatic recording of id.
func recorded(r callLogRecord, id string) callLogRecord {
	r.Recording = &struct {
		ID         flexString `json:"id"`
		ContentURI string     `json:"contentUri"`
		Type       string     `json:"type"`
	}{ID: flexString(id), ContentURI: "https://media.ringcentral.com/restapi/v1.0/account/400129284008/recording/" + id + "/content", Type: "Automatic"}
	return r
}

// newTestPoller is a poller of f's call log, as one run of the translator makes it (its own
// sign-in and ended calls), keeping its cursor in dir and handing its events to emit; now and
// sleep are the test's.
func newTestPoller(t *testing.T, f *fakeRC, dir string, emit func(context.Context, event.Event) error, now func() time.Time, sleep func(context.Context, time.Duration) error) *poller {
	a := &auth{server: f.srv.URL, clientID: "client-id", secrets: Secrets{ClientSecret: "client-secret", JWT: "the-jwt"}, hc: f.srv.Client(), now: time.Now}
	return &poller{api: &client{server: f.srv.URL, auth: a, hc: f.srv.Client()}, calls: newCalls(testPlan(t), DefaultProvider, time.Hour),
		ended: &endedSet{m: map[string]time.Time{}, keep: time.Hour}, emit: emit, log: quiet(),
		path: filepath.Join(dir, "cursor.json"), overlap: 10 * time.Minute, lookback: time.Hour, now: now, sleep: sleep}
}

func noSleep(context.Context, time.Duration) error { return nil }

// setPages sets the call log the fake serves.
func (f *fakeRC) setPages(pages ...[]callLogRecord) {
	f.mu.Lock()
	f.pages = pages
	f.mu.Unlock()
}
