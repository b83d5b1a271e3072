package ringcentral

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// wireParty is one party of a telephony-sessions notification.
type wireParty struct {
	ID        string
	Direction string
	Code      string
	Reason    string
	From, To  wireEnd
	Missed    bool
}

// sessionNote is the body of an account telephony-sessions notification (what follows the
// ServerNotification header on the socket) in the shape of the developer guide's "Account
// Telephony Sessions Event" page, the shape of testdata/*.json: session's sequence-th
// notification, seq seconds after 10:00 UTC on 2023-06-06, listing parties.
func sessionNote(t testing.TB, session string, seq int, parties ...wireParty) json.RawMessage {
	t.Helper()
	return sessionNoteAt(t, session, seq, seq, parties...)
}

// sessionNoteAt is sessionNote at sec seconds after 10:00 UTC on 2023-06-06.
func sessionNoteAt(t testing.TB, session string, seq, sec int, parties ...wireParty) json.RawMessage {
	t.Helper()
	at := time.Date(2023, 6, 6, 10, 0, sec, 0, time.UTC).Format("2006-01-02T15:04:05.000Z")
	type status struct {
		Code   string `json:"code"`
		Reason string `json:"reason,omitempty"`
		RCC    bool   `json:"rcc"`
	}
	type party struct {
		AccountID   string         `json:"accountId"`
		ExtensionID string         `json:"extensionId,omitempty"`
		ID          string         `json:"id"`
		Direction   string         `json:"direction"`
		To          wireEnd        `json:"to"`
		From        wireEnd        `json:"from"`
		Status      status         `json:"status"`
		Park        map[string]any `json:"park"`
		MissedCall  bool           `json:"missedCall"`
		StandAlone  bool           `json:"standAlone"`
		Muted       bool           `json:"muted"`
	}
	var ps []party
	for _, p := range parties {
		ext := p.To.ExtensionID
		if p.Direction == "Outbound" {
			ext = p.From.ExtensionID
		}
		ps = append(ps, party{AccountID: "400129284008", ExtensionID: ext, ID: p.ID, Direction: p.Direction, To: p.To, From: p.From,
			Status: status{Code: p.Code, Reason: p.Reason}, Park: map[string]any{}, MissedCall: p.Missed})
	}
	b, err := json.Marshal(map[string]any{
		"uuid":           fmt.Sprintf("%s-%d", session, seq),
		"event":          "/restapi/v1.0/account/400129284008/telephony/sessions",
		"timestamp":      at,
		"subscriptionId": "b6d5bde8-f5c5-4e3b-a5c1-6f1f3d1c5f4a",
		"ownerId":        "400129284008",
		"body": map[string]any{
			"sequence":           seq,
			"sessionId":          "4503991099",
			"telephonySessionId": session,
			"serverId":           "10.13.123.26.TAM",
			"eventTime":          at,
			"parties":            ps,
			"origin":             map[string]string{"type": "Call"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// brief is an event as the reason tests compare it: its type, and its answeredBy and disposition
// when it has them.
func brief(e event.Event) string {
	s := string(e.Type)
	if e.AnsweredBy != "" {
		s += " by " + e.AnsweredBy
	}
	if e.Disposition != "" {
		s += " " + string(e.Disposition)
	}
	return s
}

// TestPartyStatusReasons runs calls ended with each party status reason the mapping tells apart,
// and missedCall, through the fake gateway and the translator, and checks the events of each
// call. A reason comes with a Disconnected (or Gone) party only, as the API reference says.
func TestPartyStatusReasons(t *testing.T) {
	in := func(id, code, reason string, to wireEnd) wireParty {
		return wireParty{ID: id, Direction: "Inbound", Code: code, Reason: reason, From: endCaller(), To: to}
	}
	out := func(code, reason string) wireParty {
		return wireParty{ID: "p-1", Direction: "Outbound", Code: code, Reason: reason, From: endDesk(), To: endOut()}
	}
	missed := func(p wireParty) wireParty { p.Missed = true; return p }
	ringing := func(id string, to wireEnd) []wireParty {
		return []wireParty{in(id, statusSetup, "", to)}
	}
	tests := []struct {
		name  string
		notes [][]wireParty // one notification per element, sequence 1, 2, ...
		want  []string
	}{
		{"Pickup: the ringing phone's end comes before the picking phone's answer", [][]wireParty{
			ringing("p-1", endDesk()),
			{in("p-1", statusProceeding, "", endDesk())},
			{in("p-1", statusDisconn, "Pickup", endDesk())},
			{in("p-2", statusAnswered, "", endDoctor())},
			{in("p-2", statusDisconn, "", endDoctor())},
		}, []string{"call_received", "call_answered by 102", "call_ended answered"}},
		{"Pickup: the picking phone answers first", [][]wireParty{
			ringing("p-1", endDesk()),
			{in("p-1", statusProceeding, "", endDesk())},
			{in("p-2", statusAnswered, "", endDoctor())},
			{in("p-1", statusDisconn, "Pickup", endDesk())},
			{in("p-2", statusDisconn, "", endDoctor())},
		}, []string{"call_received", "call_answered by 102", "call_ended answered"}},
		{"Pickup: both in one notification, the ringing phone marked missed", [][]wireParty{
			ringing("p-1", endDesk()),
			{missed(in("p-1", statusDisconn, "Pickup", endDesk())), in("p-2", statusAnswered, "", endDoctor())},
			{in("p-2", statusDisconn, "", endDoctor())},
		}, []string{"call_received", "call_answered by 102", "call_ended answered"}},
		{"NoAnswer: an inbound call rings out", [][]wireParty{
			ringing("p-1", endDesk()),
			{in("p-1", statusProceeding, "", endDesk())},
			{in("p-1", statusDisconn, "NoAnswer", endDesk())},
		}, []string{"call_received", "call_missed", "call_ended no_answer"}},
		{"NoAnswer: an inbound call rings out, marked missedCall", [][]wireParty{
			ringing("p-1", endDesk()),
			{missed(in("p-1", statusDisconn, "NoAnswer", endDesk()))},
		}, []string{"call_received", "call_missed", "call_ended no_answer"}},
		{"NoAnswer: the outside number the clinic calls does not answer", [][]wireParty{
			{out(statusSetup, "")},
			{out(statusProceeding, "")},
			{out(statusDisconn, "NoAnswer")},
		}, []string{"call_placed", "call_ended no_answer"}},
		{"Cancelled: the caller hangs up while it rings", [][]wireParty{
			ringing("p-1", endDesk()),
			{in("p-1", statusProceeding, "", endDesk())},
			{in("p-1", statusDisconn, "Cancelled", endDesk())},
		}, []string{"call_received", "call_missed", "call_ended cancelled"}},
		{"Cancelled: the clinic hangs up before the outside number answers", [][]wireParty{
			{out(statusSetup, "")},
			{out(statusProceeding, "")},
			{out(statusDisconn, "Cancelled")},
		}, []string{"call_placed", "call_ended cancelled"}},
		{"missedCall: the only phone never answers", [][]wireParty{
			ringing("p-1", endDesk()),
			{missed(in("p-1", statusDisconn, "", endDesk()))},
		}, []string{"call_received", "call_missed", "call_ended no_answer"}},
		{"missedCall: a ring group where the other phone answers", [][]wireParty{
			{in("p-1", statusProceeding, "", endDesk()), in("p-2", statusProceeding, "", endDoctor())},
			{in("p-2", statusAnswered, "", endDoctor())},
			{missed(in("p-1", statusDisconn, "", endDesk()))},
			{in("p-2", statusDisconn, "", endDoctor())},
		}, []string{"call_received", "call_answered by 102", "call_ended answered"}},
		{"the caller reaches voicemail: missed, as the other translators report it", [][]wireParty{
			ringing("p-1", endDesk()),
			{in("p-1", statusVoiceMail, "", endDesk())},
			{missed(in("p-1", statusDisconn, "", endDesk()))},
		}, []string{"call_received", "call_missed", "call_ended voicemail"}},
		{"TargetBusy: an outbound call to a busy line", [][]wireParty{
			{out(statusSetup, "")},
			{out(statusDisconn, "TargetBusy")},
		}, []string{"call_placed", "call_ended busy"}},
		{"an inbound call the clinic's phone is busy for is missed", [][]wireParty{
			ringing("p-1", endDesk()),
			{in("p-1", statusDisconn, "TargetBusy", endDesk())},
		}, []string{"call_received", "call_missed", "call_ended busy"}},
		{"a call first heard of at its end (after a restart): left to the call log, which knows whether it was answered", [][]wireParty{
			{in("p-1", statusDisconn, "", endDesk())},
		}, nil},
		{"an outbound call to a number that does not exist", [][]wireParty{
			{out(statusSetup, "")},
			{out(statusDisconn, "InvalidNumber")},
		}, []string{"call_placed", "call_ended failed"}},
	}

	f := newFakeRC(t)
	rec := &recorder{}
	stop := run(t, config(f, t.TempDir(), true), rec)
	sessions := make([]string, len(tests))
	for i, tt := range tests {
		sessions[i] = fmt.Sprintf("s-reason-%02d", i)
		for j, parties := range tt.notes {
			f.push <- sessionNote(t, sessions[i], j+1, parties...)
		}
	}
	// A normal call last: once its end is out, every notification before it has been handled
	// (one socket, read in order).
	pushAll(f, scenario(t, "normal_call"))
	waitForEnd(t, rec, normalCall)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	evs := rec.events()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range eventsOf(evs, sessions[i]) {
				if err := e.Validate(); err != nil {
					t.Errorf("invalid %s: %v", e.Type, err)
				}
				got = append(got, brief(e))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events\n got: %s\nwant: %s", strings.Join(got, ", "), strings.Join(tt.want, ", "))
			}
		})
	}
}

// TestCallLogResults checks the events the poll makes of each call-log result: an inbound call
// that rang out or whose caller gave up is missed, as on the live path; nothing else is.
func TestCallLogResults(t *testing.T) {
	t0 := time.Date(2023, 6, 6, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		direction, result string
		want              []string
	}{
		{"Inbound", "Accepted", []string{"call_ended answered"}},
		{"Inbound", "Missed", []string{"call_missed", "call_ended no_answer"}},
		{"Inbound", "No Answer", []string{"call_missed", "call_ended no_answer"}},
		{"Inbound", "Hang Up", []string{"call_missed", "call_ended cancelled"}},
		{"Inbound", "Abandoned", []string{"call_missed", "call_ended cancelled"}},
		{"Inbound", "Voicemail", []string{"call_missed", "call_ended voicemail"}},
		{"Inbound", "Busy", []string{"call_missed", "call_ended busy"}},
		{"Inbound", "Rejected", []string{"call_missed", "call_ended rejected"}},
		{"Outbound", "No Answer", []string{"call_ended no_answer"}},
		{"Outbound", "Hang Up", []string{"call_ended cancelled"}},
		{"Outbound", "Call connected", []string{"call_ended answered"}},
		// The API reference's reason Connected: a voicemail system answered and nobody accepted.
		{"Inbound", "Answered Not Accepted", []string{"call_missed", "call_ended no_answer"}},
		// Its reason Stopped: the call was answered by another phone.
		{"Inbound", "Stopped", []string{"call_ended answered"}},
		{"Inbound", "Reply", []string{"call_missed", "call_ended rejected"}},
		// A call not over yet is ended only when its record comes back finished.
		{"Inbound", "In Progress", nil},
	}
	f := newFakeRC(t)
	var recs []callLogRecord
	for i, tt := range tests {
		recs = append(recs, logRecord(fmt.Sprintf("s-result-%02d", i), tt.direction, tt.result, t0, 20, t0.Add(time.Minute)))
	}
	f.setPages(recs)
	rec := &recorder{}
	p := newTestPoller(t, f, t.TempDir(), rec.Emit, func() time.Time { return t0.Add(5 * time.Minute) }, noSleep)
	if _, err := p.pollOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	evs := rec.events()
	for i, tt := range tests {
		t.Run(tt.direction+" "+tt.result, func(t *testing.T) {
			var got []string
			for _, e := range eventsOf(evs, recs[i].TelephonySessionID) {
				if err := e.Validate(); err != nil {
					t.Errorf("invalid %s: %v", e.Type, err)
				}
				got = append(got, brief(e))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events %v, want %v", got, tt.want)
			}
		})
	}
}
