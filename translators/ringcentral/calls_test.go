package ringcentral

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/numbering"
)

// TestWhatIsAnAnswer runs sessions that tell the answer from the parties' status codes through
// the mapping. The rules and their sources:
//   - RingCentral's developer guide, "Telephony Session Notifications", Call Status Codes
//     (https://developers.ringcentral.com/guide/voice/telephony-session-notifications): an
//     Outbound party (the one making the call) is Answered when "RingCentral destination
//     (Company/User/Call Queue) is reached and Call Handling Rules started to execute"; an
//     Inbound party is Answered "when the call is answered on a target endpoint and media is
//     established". The recorded streams that guide links
//     (https://github.com/dibyenduroy/csn-data, PSTN-RingCentral-DataStreams.txt and
//     RingCentral-RingCentral.txt) show the caller's Outbound party Answered 58 to 143 ms
//     after its Setup, while the called phone's Inbound party still rings.
//   - The guide's FAQ on the same page: notifications can arrive out of sequence order.
//   - The Account Telephony Sessions Event page
//     (https://developers.ringcentral.com/guide/notifications/event-filters/account-telephony-sessions)
//     lists Voicemail among the status reasons.
//
// Each session's notifications are written here in the shapes of testdata/*.json, with made-up
// identifiers and 555-01xx numbers.
func TestWhatIsAnAnswer(t *testing.T) {
	caller := func(code string) wireParty {
		return wireParty{ID: "p-1", Direction: "Outbound", Code: code, From: endCaller(), To: endDesk()}
	}
	desk := func(code, reason string) wireParty {
		return wireParty{ID: "p-2", Direction: "Inbound", Code: code, Reason: reason, From: endCaller(), To: endDesk()}
	}
	doctor := func(code, reason string) wireParty {
		return wireParty{ID: "p-3", Direction: "Inbound", Code: code, Reason: reason, From: endCaller(), To: endDoctor()}
	}
	queue := wireEnd{PhoneNumber: "+16505550100", Name: "Reception Queue", ExtensionID: "400131758011", ExtensionNumber: "800"}
	inQueue := func(code, reason string) wireParty {
		return wireParty{ID: "p-4", Direction: "Inbound", Code: code, Reason: reason, From: endCaller(), To: queue}
	}
	deskCalls := func(code string) wireParty {
		return wireParty{ID: "p-1", Direction: "Outbound", Code: code, From: endDesk(), To: endOut()}
	}
	outside := func(code string) wireParty {
		return wireParty{ID: "p-2", Direction: "Inbound", Code: code, From: endDesk(), To: endOut()}
	}
	missed := func(p wireParty) wireParty { p.Missed = true; return p }
	type note struct {
		seq, at int
		parties []wireParty
	}
	tests := []struct {
		name  string
		notes []note // in the order they arrive; sequence seq, at seconds after 10:00
		want  []string
	}{
		{"the caller's party answers at setup, the desk rings out: missed, not answered", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{2, 2, []wireParty{caller(statusAnswered), desk(statusProceeding, "")}},
			{3, 30, []wireParty{caller(statusDisconn)}},
			{4, 31, []wireParty{missed(desk(statusDisconn, ""))}},
		}, []string{"call_received@1", "call_missed@31", "call_ended@31 no_answer"}},
		{"the desk answers after ringing: the answer is the desk's, and talk time counts from it", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{2, 2, []wireParty{caller(statusAnswered), desk(statusProceeding, "")}},
			{3, 9, []wireParty{desk(statusAnswered, "")}},
			{4, 40, []wireParty{desk(statusDisconn, ""), caller(statusDisconn)}},
		}, []string{"call_received@1", "call_answered@9 by 101", "call_ended@40 answered talk=31"}},
		{"the ringing desk is ended with reason Voicemail: voicemail, missed", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{2, 2, []wireParty{caller(statusAnswered), desk(statusProceeding, "")}},
			{3, 20, []wireParty{desk(statusDisconn, reasonVoicemail)}},
			{4, 45, []wireParty{caller(statusDisconn)}},
		}, []string{"call_received@1", "call_missed@45", "call_ended@45 voicemail"}},
		{"a queue's agent answers: the agent is answeredBy", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{2, 2, []wireParty{caller(statusAnswered), inQueue(statusSetup, "")}},
			{3, 5, []wireParty{doctor(statusProceeding, "")}},
			{4, 12, []wireParty{doctor(statusAnswered, ""), inQueue(statusDisconn, "AgentAnswered")}},
			{5, 50, []wireParty{doctor(statusDisconn, ""), caller(statusDisconn)}},
		}, []string{"call_received@1", "call_answered@12 by 102", "call_ended@50 answered talk=38"}},
		{"notifications out of sequence order: a late Proceeding does not undo the answer", []note{
			{1, 1, []wireParty{desk(statusSetup, "")}},
			{3, 3, []wireParty{desk(statusAnswered, "")}},
			{2, 2, []wireParty{desk(statusProceeding, "")}},
			{4, 20, []wireParty{desk(statusDisconn, "")}},
		}, []string{"call_received@1", "call_answered@3 by 101", "call_ended@20 answered talk=17"}},
		{"a late Hold its party's newer Answered superseded is dropped: no hold told without its release", []note{
			{1, 1, []wireParty{desk(statusSetup, "")}},
			{2, 2, []wireParty{desk(statusAnswered, "")}},
			{4, 4, []wireParty{desk(statusAnswered, "")}},
			{3, 3, []wireParty{desk(statusHold, "")}},
			{5, 20, []wireParty{desk(statusDisconn, "")}},
		}, []string{"call_received@1", "call_answered@2 by 101", "call_ended@20 answered talk=18"}},
		{"a Hold that overtook its Answered: the late Answered is still the answer", []note{
			{1, 1, []wireParty{desk(statusSetup, "")}},
			{3, 3, []wireParty{desk(statusHold, "")}},
			{2, 2, []wireParty{desk(statusAnswered, "")}},
			{4, 4, []wireParty{desk(statusAnswered, "")}},
			{5, 20, []wireParty{desk(statusDisconn, "")}},
		}, []string{"call_received@1", "call_answered@2 by 101", "call_hold@3", "call_hold@4 released", "call_ended@20 answered talk=18"}},
		{"an end that overtook the release of a hold: the late Answered still releases it", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{2, 2, []wireParty{desk(statusAnswered, "")}},
			{3, 3, []wireParty{desk(statusHold, "")}},
			{5, 5, []wireParty{desk(statusDisconn, "")}},
			{4, 4, []wireParty{desk(statusAnswered, "")}},
			{6, 6, []wireParty{caller(statusDisconn)}},
		}, []string{"call_received@1", "call_answered@2 by 101", "call_hold@3", "call_hold@4 released", "call_ended@6 answered talk=4"}},
		{"a second Hold that overtook the release before it: the call is on hold again", []note{
			{1, 1, []wireParty{desk(statusSetup, "")}},
			{2, 2, []wireParty{desk(statusAnswered, "")}},
			{3, 3, []wireParty{desk(statusHold, "")}},
			{5, 5, []wireParty{desk(statusHold, "")}},
			{4, 4, []wireParty{desk(statusAnswered, "")}},
			{6, 20, []wireParty{desk(statusDisconn, "")}},
		}, []string{"call_received@1", "call_answered@2 by 101", "call_hold@3", "call_hold@4 released", "call_hold@5", "call_ended@20 answered talk=18"}},
		{"three Holds ahead of their releases, which come oldest first: each release and hold told", []note{
			{1, 1, []wireParty{desk(statusSetup, "")}},
			{2, 2, []wireParty{desk(statusAnswered, "")}},
			{3, 3, []wireParty{desk(statusHold, "")}},
			{5, 5, []wireParty{desk(statusHold, "")}},
			{7, 7, []wireParty{desk(statusHold, "")}},
			{4, 4, []wireParty{desk(statusAnswered, "")}},
			{6, 6, []wireParty{desk(statusAnswered, "")}},
			{8, 20, []wireParty{desk(statusDisconn, "")}},
		}, []string{"call_received@1", "call_answered@2 by 101", "call_hold@3", "call_hold@4 released", "call_hold@5", "call_hold@6 released", "call_hold@7", "call_ended@20 answered talk=18"}},
		{"three Holds ahead of their releases, which come newest first: the call ends on hold, the hold between folded", []note{
			{1, 1, []wireParty{desk(statusSetup, "")}},
			{2, 2, []wireParty{desk(statusAnswered, "")}},
			{3, 3, []wireParty{desk(statusHold, "")}},
			{5, 5, []wireParty{desk(statusHold, "")}},
			{7, 7, []wireParty{desk(statusHold, "")}},
			{6, 6, []wireParty{desk(statusAnswered, "")}},
			{4, 4, []wireParty{desk(statusAnswered, "")}},
			{8, 20, []wireParty{desk(statusDisconn, "")}},
		}, []string{"call_received@1", "call_answered@2 by 101", "call_hold@3", "call_hold@6 released", "call_hold@7", "call_ended@20 answered talk=18"}},
		{"a Hold repeated with no release between: told once", []note{
			{1, 1, []wireParty{desk(statusSetup, "")}},
			{2, 2, []wireParty{desk(statusAnswered, "")}},
			{3, 3, []wireParty{desk(statusHold, "")}},
			{4, 4, []wireParty{desk(statusHold, "")}},
			{5, 9, []wireParty{desk(statusAnswered, "")}},
			{6, 20, []wireParty{desk(statusDisconn, "")}},
		}, []string{"call_received@1", "call_answered@2 by 101", "call_hold@3", "call_hold@9 released", "call_ended@20 answered talk=18"}},
		{"a late notification of another party is still read", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{3, 3, []wireParty{caller(statusAnswered)}},
			{2, 2, []wireParty{desk(statusProceeding, "")}},
			{4, 9, []wireParty{desk(statusAnswered, "")}},
			{5, 40, []wireParty{desk(statusDisconn, ""), caller(statusDisconn)}},
		}, []string{"call_received@1", "call_answered@9 by 101", "call_ended@40 answered talk=31"}},
		{"an Answered that arrives after the end: the end waits for it, and the call is answered", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{2, 2, []wireParty{caller(statusAnswered), desk(statusProceeding, "")}},
			{4, 40, []wireParty{caller(statusDisconn), desk(statusDisconn, "")}},
			{3, 9, []wireParty{desk(statusAnswered, "")}},
		}, []string{"call_received@1", "call_answered@9 by 101", "call_ended@40 answered talk=31"}},
		{"an end with notifications missing below it that never come: the call log ends the call", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{2, 2, []wireParty{caller(statusAnswered), desk(statusProceeding, "")}},
			{10, 40, []wireParty{caller(statusDisconn), desk(statusDisconn, "")}},
			{9, 9, []wireParty{desk(statusAnswered, "")}},
		}, []string{"call_received@1", "call_answered@9 by 101"}},
		{"a Hold that arrives after the end: the end waits for it, and a hold the end overtook is not told", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{2, 2, []wireParty{caller(statusAnswered), desk(statusAnswered, "")}},
			{4, 40, []wireParty{caller(statusDisconn), desk(statusDisconn, "")}},
			{3, 30, []wireParty{desk(statusHold, "")}},
		}, []string{"call_received@1", "call_answered@2 by 101", "call_ended@40 answered talk=38"}},
		{"another party's Disconnected that arrives last: the end is the newest notification's", []note{
			{1, 1, []wireParty{caller(statusSetup)}},
			{2, 2, []wireParty{caller(statusAnswered), desk(statusProceeding, ""), doctor(statusProceeding, "")}},
			{3, 8, []wireParty{doctor(statusAnswered, "")}},
			{5, 40, []wireParty{caller(statusDisconn), doctor(statusDisconn, "")}},
			{4, 8, []wireParty{desk(statusDisconn, "")}},
		}, []string{"call_received@1", "call_answered@8 by 102", "call_ended@40 answered talk=32"}},
		{"an outbound call: the answer is the called party's, and nobody in the clinic is answeredBy", []note{
			{1, 1, []wireParty{deskCalls(statusSetup)}},
			{2, 2, []wireParty{outside(statusProceeding)}},
			{3, 3, []wireParty{deskCalls(statusProceeding)}},
			{4, 11, []wireParty{outside(statusAnswered)}},
			{5, 12, []wireParty{deskCalls(statusAnswered)}},
			{6, 30, []wireParty{deskCalls(statusDisconn), outside(statusDisconn)}},
		}, []string{"call_placed@1", "call_answered@11", "call_ended@30 answered talk=19"}},
		{"an outbound call the called party never answers", []note{
			{1, 1, []wireParty{deskCalls(statusSetup)}},
			{2, 2, []wireParty{outside(statusProceeding)}},
			{3, 25, []wireParty{deskCalls(statusDisconn)}},
			{4, 26, []wireParty{outside(statusDisconn)}},
		}, []string{"call_placed@1", "call_ended@26 no_answer"}},
		{"an outbound call whose called party never shows: the calling party's Answered stands for it", []note{
			{1, 1, []wireParty{deskCalls(statusSetup)}},
			{2, 3, []wireParty{deskCalls(statusProceeding)}},
			{3, 8, []wireParty{deskCalls(statusAnswered)}},
			{4, 30, []wireParty{deskCalls(statusDisconn)}},
		}, []string{"call_placed@1", "call_answered@8", "call_ended@30 answered talk=22"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := newCalls(testPlan(t), DefaultProvider, time.Hour)
			session := "s-answer-" + string(rune('a'+i))
			var evs []event.Event
			for _, n := range tt.notes {
				raw := sessionNoteAt(t, session, n.seq, n.at, n.parties...)
				ev, ok, err := decodeSessionEvent(raw)
				if err != nil || !ok {
					t.Fatalf("decode: ok=%v err=%v", ok, err)
				}
				evs = append(evs, cs.observe(ev, raw, time.Now())...)
			}
			slices.SortStableFunc(evs, contractOrder)
			t0 := time.Date(2023, 6, 6, 10, 0, 0, 0, time.UTC)
			var got []string
			for _, e := range evs {
				if err := e.Validate(); err != nil {
					t.Errorf("invalid %s: %v", e.Type, err)
				}
				s := string(e.Type) + "@" + e.OccurredAt.Sub(t0).String()
				s = strings.TrimSuffix(s, "s")
				if e.Released != nil && *e.Released {
					s += " released"
				}
				if e.AnsweredBy != "" {
					s += " by " + e.AnsweredBy
				}
				if e.Disposition != "" {
					s += " " + string(e.Disposition)
				}
				if e.TalkTime != nil {
					s += " talk=" + time.Duration(*e.TalkTime*float64(time.Second)).String()
					s = strings.TrimSuffix(s, "s")
				}
				got = append(got, s)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events\n got: %s\nwant: %s", strings.Join(got, ", "), strings.Join(tt.want, ", "))
			}
		})
	}
}

// TestDirectionFromExtensions checks the direction of a call whose numbers the clinic did not
// list: the ends with an extensionId are the account's own (the Account Telephony Sessions
// Event page: extensionId, "Internal identifier of a Callee/Caller extension"), and the first
// party of a call from the public network is the caller's, of direction Outbound and of no
// extension (the recorded stream PSTN-RingCentral-DataStreams.txt of
// https://github.com/dibyenduroy/csn-data shows it so). The call log's from and to carry the
// same extensionId (the API reference's CallLogFromParty and CallLogToParty), and its record of
// the same ends must give the same call block.
func TestDirectionFromExtensions(t *testing.T) {
	plan, err := numbering.New(numbering.Config{DefaultCountry: "US"})
	if err != nil {
		t.Fatal(err)
	}
	desk := wireEnd{PhoneNumber: "+16505550100", Name: "Front Desk", ExtensionID: "400131758008"}
	main := wireEnd{PhoneNumber: "+16505550100"}
	tests := []struct {
		name  string
		party wireParty
		want  event.Type
	}{
		{"an outside caller's own leg, direction Outbound, to the main number", wireParty{ID: "p-1", Direction: "Outbound", Code: statusSetup, From: endCaller(), To: main}, event.CallReceived},
		{"the desk's leg to the caller", wireParty{ID: "p-1", Direction: "Inbound", Code: statusSetup, From: endCaller(), To: desk}, event.CallReceived},
		{"the desk calling out", wireParty{ID: "p-1", Direction: "Outbound", Code: statusSetup, From: desk, To: endOut()}, event.CallPlaced},
		{"the called outside number's leg, direction Inbound, first to arrive", wireParty{ID: "p-2", Direction: "Inbound", Code: statusProceeding, From: desk, To: endOut()}, event.CallPlaced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := newCalls(plan, DefaultProvider, time.Hour)
			raw := sessionNote(t, "s-direction", 1, tt.party)
			ev, ok, err := decodeSessionEvent(raw)
			if err != nil || !ok {
				t.Fatalf("decode: ok=%v err=%v", ok, err)
			}
			evs := cs.observe(ev, raw, time.Now())
			if len(evs) != 1 || evs[0].Type != tt.want {
				t.Fatalf("got %v, want one %s", types(evs), tt.want)
			}
			// The call log's record of the same ends, without a direction of its own, gives
			// the call block the live path gave: its events come last, so theirs is the one
			// the core keeps.
			end := func(w wireEnd) endpoint {
				return endpoint{PhoneNumber: w.PhoneNumber, ExtensionNumber: w.ExtensionNumber, ExtensionID: flexString(w.ExtensionID), Name: w.Name}
			}
			r := callLogRecord{ID: "Y1", TelephonySessionID: "s-direction", StartTime: "2023-06-06T10:00:01Z", Duration: 30,
				Type: "Voice", Result: "Accepted", From: end(tt.party.From), To: end(tt.party.To)}
			p := &poller{calls: cs, ended: &endedSet{m: map[string]time.Time{}, keep: time.Hour}}
			logged := p.events(r)
			if len(logged) == 0 {
				t.Fatal("the call log's record gave no event")
			}
			if got, want := logged[0].Call, evs[0].Call; !reflect.DeepEqual(got, want) {
				t.Errorf("call log's call block %+v, live path's %+v", got, want)
			}
		})
	}
}
