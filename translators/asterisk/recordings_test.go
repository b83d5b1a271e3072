package asterisk

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/callwire/callwire/sdk/event"
)

// brief is one event as "type", with what matters for the flow appended: the disposition, who
// answered, hold or unhold, the transfer mode and target.
func brief(e event.Event) string {
	s := string(e.Type)
	if e.Disposition != "" {
		s += " " + string(e.Disposition)
	}
	if e.AnsweredBy != "" {
		s += " by " + e.AnsweredBy
	}
	if e.Released != nil {
		s += " released=" + strconv.FormatBool(*e.Released)
	}
	if e.Mode != "" {
		s += " " + string(e.Mode)
	}
	if e.TransferTo != nil {
		s += " to " + e.TransferTo.Extension + e.TransferTo.Number
	}
	return s
}

// TestRealRecordings states, for each flow recorded from Asterisk 20 (ami/testdata/
// asterisk-20-*.ami), what a person at the desk must see, independently of the golden files, so
// that an -update that changes the meaning of a real call cannot pass unnoticed. talkTime comes
// from Asterisk's own Timestamps and is checked against how long the flow was scripted to talk
// (the SIPp agents' pauses), to within half a second.
func TestRealRecordings(t *testing.T) {
	tests := []struct {
		flow string
		want []string
		talk float64 // seconds the flow was scripted to talk
	}{
		{"basic", []string{"call_received", "call_answered by 201", "call_ended answered"}, 3},
		{"hold", []string{"call_received", "call_answered by 201", "call_hold released=false",
			"call_hold released=true", "call_ended answered"}, 7},
		{"voicemail", []string{"call_received", "call_missed", "call_ended voicemail"}, 0},
		{"busy", []string{"call_received", "call_missed", "call_ended busy"}, 0},
		{"no-answer", []string{"call_received", "call_missed", "call_ended no_answer"}, 0},
		{"ring-group", []string{"call_received", "call_answered by 202", "call_ended answered"}, 3},
		{"queue-abandon", []string{"call_received", "call_missed", "call_ended cancelled"}, 0},
		{"outbound", []string{"call_placed", "call_answered", "call_ended answered"}, 3},
		// Asterisk emits an Unhold for the transferer that no Hold preceded: nothing was on
		// hold, so the desk sees no resume.
		{"blind-transfer", []string{"call_received", "call_answered by 201",
			"call_transferred blind to 202", "call_answered by 202", "call_ended answered"}, 8},
		// The transfer feature emits a Hold for the transferer and never an Unhold: the transfer
		// itself ends the hold. Its TransferTarget is a Local channel, whose other half dialled
		// the phone the transfer went to (203).
		// 203 answers 201's consultation, not the caller: no call_answered until the transfer,
		// which names 203.
		{"attended-transfer", []string{"call_received", "call_answered by 201", "call_hold released=false",
			"call_hold released=true", "call_transferred attended to 203", "call_ended answered"}, 10},
	}
	for _, tt := range tests {
		t.Run(tt.flow, func(t *testing.T) {
			tr := testTracker(t)
			got := translate(tr, load(t, "ami/testdata/asterisk-20-"+tt.flow+".ami"))
			var briefs []string
			for _, e := range got {
				briefs = append(briefs, brief(e))
			}
			if g, w := strings.Join(briefs, "\n"), strings.Join(tt.want, "\n"); g != w {
				t.Errorf("events:\n%s\nwant:\n%s", g, w)
			}
			if len(got) == 0 {
				return
			}
			end := got[len(got)-1]
			if end.TalkTime == nil || math.Abs(*end.TalkTime-tt.talk) > 0.5 {
				t.Errorf("talkTime %v, want about %v s", end.TalkTime, tt.talk)
			}
			ids := map[string]bool{}
			for _, e := range got {
				if ids[e.ProviderEventID] {
					t.Errorf("providerEventId %s twice", e.ProviderEventID)
				}
				ids[e.ProviderEventID] = true
			}
		})
	}
}
