package ingest

import (
	"reflect"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// TestPlanSummary: a call's planned summary says what its events say, by store.Summary's rules.
func TestPlanSummary(t *testing.T) {
	tests := []struct {
		name string
		body string
		want store.Summary
	}{
		{"ringing", ev("call_received", "a", 1, t0, `,"locations":["front"]`), store.Summary{}},
		{"answered twice: the earliest names who", batch(
			ev("call_answered", "a", 3, t0.Add(9*time.Second), `,"answeredBy":"305"`),
			ev("call_answered", "a", 2, t0.Add(4*time.Second), `,"answeredBy":"201"`)),
			store.Summary{AnsweredAt: t0.Add(4 * time.Second), AnsweredBy: "201", Flags: store.FlagAnswered}},
		{"voicemail", ev("call_ended", "a", 4, t0, `,"disposition":"voicemail"`),
			store.Summary{EndedAt: t0, Flags: store.FlagVoicemail}},
		{"answered elsewhere", ev("call_ended", "a", 4, t0, `,"disposition":"cancelled","answeredElsewhere":true`),
			store.Summary{EndedAt: t0, Flags: store.FlagAnswered}},
		{"talked", ev("call_ended", "a", 4, t0, `,"talkTime":12.5`),
			store.Summary{EndedAt: t0, Flags: store.FlagAnswered}},
		{"missed", ev("call_missed", "a", 4, t0, ""), store.Summary{EndedAt: t0}},
		{"recorded and transcribed", batch(
			ev("call_recorded", "a", 5, t0, `,"url":"https://rec.example/1.wav"`),
			ev("call_transcribed", "a", 6, t0, `,"text":"hello"`)),
			store.Summary{Flags: store.FlagRecorded | store.FlagTranscribed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := plan(parse(t, tt.body), t0.Add(time.Minute), func() string { return "e" }, new(planMemory))
			got := calls[0].write.Summary
			if got.FromKey != "00003215551" || got.ToKey != "" || got.FromExt != "" {
				t.Errorf("block's keys = %q, %q, %q; want the from number's", got.FromKey, got.ToKey, got.FromExt)
			}
			if len(got.Locations) == 0 {
				t.Errorf("no locations")
			}
			w := calls[0].write
			if want, _ := store.CallbackParty(w.Direction, w.Block); got.Callback != want || want == "" {
				t.Errorf("to-call-back number = %q, want the block's %q", got.Callback, want)
			}
			got.FromKey, got.Locations, got.Callback = "", nil, ""
			if !got.AnsweredAt.Equal(tt.want.AnsweredAt) || !got.EndedAt.Equal(tt.want.EndedAt) {
				t.Errorf("times = %v, %v; want %v, %v", got.AnsweredAt, got.EndedAt, tt.want.AnsweredAt, tt.want.EndedAt)
			}
			got.AnsweredAt, got.EndedAt = tt.want.AnsweredAt, tt.want.EndedAt
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("summary = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestOutcome(t *testing.T) {
	for _, tt := range []struct {
		s    store.State
		dir  string
		f    store.Flags
		want string
	}{
		{store.StateAnswered, "inbound", store.FlagAnswered, store.OutcomeInProgress},
		{store.StateEnded, "inbound", store.FlagAnswered | store.FlagVoicemail, store.OutcomeVoicemail},
		{store.StateEnded, "inbound", store.FlagAnswered | store.FlagRecorded, store.OutcomeAnswered},
		{store.StateEnded, "inbound", store.FlagRecorded, store.OutcomeMissed},
		{store.StateEnded, "outbound", 0, store.OutcomeNotAnswered},
		{store.StateEnded, "internal", 0, store.OutcomeNotAnswered},
	} {
		if got := store.Outcome(tt.s, tt.dir, tt.f); got != tt.want {
			t.Errorf("Outcome(%v, %s, %b) = %s, want %s", tt.s, tt.dir, tt.f, got, tt.want)
		}
	}
}
