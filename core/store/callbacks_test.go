package store

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// cbAt is a fixed instant plus m minutes, so that the tests read as a day at a front desk.
func cbAt(m int) time.Time {
	return time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(m) * time.Minute)
}

func cbMissed(id string, m int, locs ...string) CallbackCall {
	return CallbackCall{ID: id, Inbound: true, State: StateEnded, StartedAt: cbAt(m), Locations: locs}
}

func cbVoicemail(id string, m int) CallbackCall {
	c := cbMissed(id, m, "main")
	c.Flags = FlagVoicemail | FlagAnswered // a PBX reports its voicemail's pick-up as an answer
	return c
}

func cbAnsweredIn(id string, m int, ext string) CallbackCall {
	return CallbackCall{ID: id, Inbound: true, State: StateEnded, StartedAt: cbAt(m),
		AnsweredAt: cbAt(m).Add(10 * time.Second), AnsweredBy: ext, Flags: FlagAnswered}
}

func cbOut(id string, m int, ext string, answered bool) CallbackCall {
	c := CallbackCall{ID: id, State: StateEnded, StartedAt: cbAt(m), FromExt: ext}
	if answered {
		c.Flags = FlagAnswered
	}
	return c
}

func TestCallbackOf(t *testing.T) {
	const n = "+15550100101"
	tests := []struct {
		name       string
		calls      []CallbackCall
		dismissals []CallbackDismissal
		needAnswer bool
		want       *Callback // nil: no item
	}{
		{name: "no calls"},
		{name: "only answered calls", calls: []CallbackCall{cbAnsweredIn("a", 0, "201"), cbOut("b", 5, "202", true)}},
		{name: "a ringing inbound call is not yet a miss",
			calls: []CallbackCall{{ID: "r", Inbound: true, State: StateRinging, StartedAt: cbAt(0)}}},
		{name: "one miss opens",
			calls: []CallbackCall{cbMissed("m1", 0, "north")},
			want: &Callback{Number: n, MissedCount: 1, FirstMissedAt: cbAt(0), LastMissedAt: cbAt(0),
				LastCallID: "m1", Locations: []string{"north"}, Open: true}},
		{name: "misses count, voicemail and locations gather",
			calls: []CallbackCall{cbMissed("m1", 0, "north"), cbVoicemail("m2", 3), cbMissed("m3", 7, "south", "north")},
			want: &Callback{Number: n, MissedCount: 3, FirstMissedAt: cbAt(0), LastMissedAt: cbAt(7),
				LastCallID: "m3", Locations: []string{"main", "north", "south"}, Voicemail: true, Open: true}},
		{name: "an outbound attempt calls back, answered or not",
			calls: []CallbackCall{cbMissed("m1", 0), cbOut("o1", 4, "201", false)},
			want: &Callback{Number: n, MissedCount: 1, FirstMissedAt: cbAt(0), LastMissedAt: cbAt(0),
				LastCallID: "m1", Locations: []string{}, ClosedAt: cbAt(4),
				ClosedBy: &CallbackClose{Reason: CallbackCalledBack, CallID: "o1", Extension: "201"}}},
		{name: "with the setting, an unanswered attempt leaves it open",
			needAnswer: true,
			calls:      []CallbackCall{cbMissed("m1", 0), cbOut("o1", 4, "201", false)},
			want: &Callback{Number: n, MissedCount: 1, FirstMissedAt: cbAt(0), LastMissedAt: cbAt(0),
				LastCallID: "m1", Locations: []string{}, Open: true}},
		{name: "with the setting, an answered callback closes",
			needAnswer: true,
			calls:      []CallbackCall{cbMissed("m1", 0), cbOut("o1", 4, "201", false), cbOut("o2", 9, "202", true)},
			want: &Callback{Number: n, MissedCount: 1, FirstMissedAt: cbAt(0), LastMissedAt: cbAt(0),
				LastCallID: "m1", Locations: []string{}, ClosedAt: cbAt(9),
				ClosedBy: &CallbackClose{Reason: CallbackCalledBack, CallID: "o2", Extension: "202"}}},
		{name: "a later answered inbound call closes at its answer",
			calls: []CallbackCall{cbMissed("m1", 0), cbAnsweredIn("a1", 20, "203")},
			want: &Callback{Number: n, MissedCount: 1, FirstMissedAt: cbAt(0), LastMissedAt: cbAt(0),
				LastCallID: "m1", Locations: []string{}, ClosedAt: cbAt(20).Add(10 * time.Second),
				ClosedBy: &CallbackClose{Reason: CallbackAnswered, CallID: "a1", Extension: "203"}}},
		{name: "an earlier call settles nothing",
			calls: []CallbackCall{cbOut("o1", 0, "201", true), cbAnsweredIn("a1", 1, "201"), cbMissed("m1", 5)},
			want: &Callback{Number: n, MissedCount: 1, FirstMissedAt: cbAt(5), LastMissedAt: cbAt(5),
				LastCallID: "m1", Locations: []string{}, Open: true}},
		{name: "a miss after a callback opens a new item",
			calls: []CallbackCall{cbMissed("m1", 0), cbOut("o1", 4, "201", false), cbMissed("m2", 30), cbMissed("m3", 31)},
			want: &Callback{Number: n, MissedCount: 2, FirstMissedAt: cbAt(30), LastMissedAt: cbAt(31),
				LastCallID: "m3", Locations: []string{}, Open: true}},
		{name: "a callback in the same instant as the miss settles it",
			calls: []CallbackCall{cbOut("o1", 0, "201", false), cbMissed("m1", 0)},
			want: &Callback{Number: n, MissedCount: 1, FirstMissedAt: cbAt(0), LastMissedAt: cbAt(0),
				LastCallID: "m1", Locations: []string{}, ClosedAt: cbAt(0),
				ClosedBy: &CallbackClose{Reason: CallbackCalledBack, CallID: "o1", Extension: "201"}}},
		{name: "a dismissal closes what was open at its time",
			calls:      []CallbackCall{cbMissed("m1", 0), cbMissed("m2", 2)},
			dismissals: []CallbackDismissal{{At: cbAt(10), Extension: "204"}},
			want: &Callback{Number: n, MissedCount: 2, FirstMissedAt: cbAt(0), LastMissedAt: cbAt(2),
				LastCallID: "m2", Locations: []string{}, ClosedAt: cbAt(10),
				ClosedBy: &CallbackClose{Reason: CallbackDismissed, Extension: "204"}}},
		{name: "a miss after a dismissal opens a new item",
			calls:      []CallbackCall{cbMissed("m1", 0), cbMissed("m2", 20)},
			dismissals: []CallbackDismissal{{At: cbAt(10)}},
			want: &Callback{Number: n, MissedCount: 1, FirstMissedAt: cbAt(20), LastMissedAt: cbAt(20),
				LastCallID: "m2", Locations: []string{}, Open: true}},
		{name: "a dismissal before any miss closes nothing",
			calls:      []CallbackCall{cbMissed("m1", 20)},
			dismissals: []CallbackDismissal{{At: cbAt(10)}},
			want: &Callback{Number: n, MissedCount: 1, FirstMissedAt: cbAt(20), LastMissedAt: cbAt(20),
				LastCallID: "m1", Locations: []string{}, Open: true}},
		{name: "the name is the latest miss's that has one",
			calls: []CallbackCall{
				{ID: "m1", Inbound: true, State: StateEnded, StartedAt: cbAt(0), Name: "Ada Lovelace"},
				{ID: "m2", Inbound: true, State: StateEnded, StartedAt: cbAt(1)},
			},
			want: &Callback{Number: n, Name: "Ada Lovelace", MissedCount: 2, FirstMissedAt: cbAt(0),
				LastMissedAt: cbAt(1), LastCallID: "m2", Locations: []string{}, Open: true}},
		{name: "the same miss reported by two providers counts twice",
			calls: []CallbackCall{cbMissed("sip-1", 0), cbMissed("rc-1", 0), cbOut("rc-2", 3, "201", false)},
			want: &Callback{Number: n, MissedCount: 2, FirstMissedAt: cbAt(0), LastMissedAt: cbAt(0),
				LastCallID: "sip-1", Locations: []string{}, ClosedAt: cbAt(3),
				ClosedBy: &CallbackClose{Reason: CallbackCalledBack, CallID: "rc-2", Extension: "201"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := CallbackOf(n, tt.calls, tt.dismissals, tt.needAnswer)
			if tt.want == nil {
				if ok {
					t.Fatalf("CallbackOf = %+v, want no item", got)
				}
				return
			}
			if !ok || !reflect.DeepEqual(got, *tt.want) {
				t.Fatalf("CallbackOf =\n %+v (%v), want\n %+v", got, ok, *tt.want)
			}
			// The item does not depend on the order the calls and dismissals come in.
			r := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				calls := append([]CallbackCall(nil), tt.calls...)
				dis := append([]CallbackDismissal(nil), tt.dismissals...)
				r.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
				r.Shuffle(len(dis), func(i, j int) { dis[i], dis[j] = dis[j], dis[i] })
				if again, _ := CallbackOf(n, calls, dis, tt.needAnswer); !reflect.DeepEqual(again, got) {
					t.Fatalf("shuffled to %v: CallbackOf =\n %+v, want\n %+v", calls, again, got)
				}
			}
		})
	}
}

func TestCallbackNumber(t *testing.T) {
	tests := []struct {
		party string
		want  string
		ok    bool
	}{
		{`{"kind":"e164","number":"+15550100101"}`, "+15550100101", true},
		{`{"number":"+15550100101"}`, "+15550100101", true},
		{`{"kind":"unknown","uri":"sip:0101 555@pbx.example","name":"RECEPTION"}`, "sip:0101 555@pbx.example", true},
		{`{"kind":"unknown","name":" 555-0101 ext "}`, "555-0101 ext", true},
		{`{"kind":"unknown"}`, "", false},
		{`{"kind":"anonymous","name":"Anonymous","uri":"sip:anonymous@anonymous.invalid"}`, "", false},
		{`{"kind":"extension","extension":"201"}`, "", false},
		{`{"kind":"e164"}`, "", false},
		{`null`, "", false},
		{``, "", false},
		{`[1]`, "", false},
	}
	for _, tt := range tests {
		got, ok := CallbackNumber(json.RawMessage(tt.party))
		if got != tt.want || ok != tt.ok {
			t.Errorf("CallbackNumber(%s) = %q, %v; want %q, %v", tt.party, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzCallbackNumber(f *testing.F) {
	for _, s := range []string{`{"number":"+15550100101"}`, `{"kind":"unknown","uri":"x"}`, `{"kind":"anonymous"}`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := CallbackNumber(b)
		if ok != (n != "") {
			t.Fatalf("CallbackNumber(%q) = %q, %v: listed exactly when it names a number", b, n, ok)
		}
	})
}
