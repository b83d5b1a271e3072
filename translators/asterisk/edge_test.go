package asterisk

import (
	"fmt"
	"strings"
	"testing"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/asterisk/ami"
)

// ch builds an event about one channel: name, uniqueid, linkedid, state, then more key-value
// pairs.
func ch(ev, name, uid, lid string, state int, kv ...string) ami.Message {
	m := ami.NewMessage("Event", ev, "Channel", name, "Uniqueid", uid, "Linkedid", lid,
		"ChannelState", string(rune('0'+state)))
	for i := 0; i+1 < len(kv); i += 2 {
		m.Add(kv[i], kv[i+1])
	}
	return m
}

func dial(ev, src, srcUID, dst, dstUID, lid string, kv ...string) ami.Message {
	m := ami.NewMessage("Event", ev, "Channel", src, "Uniqueid", srcUID, "Linkedid", lid,
		"DestChannel", dst, "DestUniqueid", dstUID, "DestLinkedid", lid, "DestChannelState", "0")
	for i := 0; i+1 < len(kv); i += 2 {
		m.Add(kv[i], kv[i+1])
	}
	return m
}

const (
	trunk = "PJSIP/carrier-00000001"
	phone = "PJSIP/201-00000002"
)

func inboundStart() []ami.Message {
	return []ami.Message{
		ch("Newchannel", trunk, "1.1", "1.1", 0, "CallerIDNum", "+31201234567", "Exten", "+31150010004", "Context", "from-pstn"),
		ch("Newstate", trunk, "1.1", "1.1", 4),
	}
}

// TestEdges pins flows no fixture shows, by the events' types, ids and dispositions.
func TestEdges(t *testing.T) {
	tests := []struct {
		name   string
		msgs   []ami.Message
		resync [][]ami.Message // lists given to Resync after the messages, in order
		sweeps [][]ami.Message // lists given to Sweep instead; want lists only what they emit
		want   []string
	}{
		{
			name: "IVR only: the carrier channel's Up is no answer",
			msgs: append(inboundStart(),
				ch("Newstate", trunk, "1.1", "1.1", 6),
				ch("Hangup", trunk, "1.1", "1.1", 6, "Cause", "16")),
			want: []string{"call_missed 1.1/missed", "call_ended 1.1/ended cancelled"},
		},
		{
			name: "congestion fails the call",
			msgs: append(inboundStart(),
				ch("Newchannel", phone, "1.2", "1.1", 0, "Context", "from-internal"),
				dial("DialBegin", trunk, "1.1", phone, "1.2", "1.1"),
				dial("DialEnd", trunk, "1.1", phone, "1.2", "1.1", "DialStatus", "CHANUNAVAIL"),
				ch("Hangup", phone, "1.2", "1.1", 0, "Cause", "20"),
				ch("Hangup", trunk, "1.1", "1.1", 4, "Cause", "34")),
			want: []string{"call_received 1.1/call_received", "call_missed 1.1/missed", "call_ended 1.1/ended failed"},
		},
		{
			name: "another phone picks the ringing call up",
			msgs: append(inboundStart(),
				ch("Newchannel", phone, "1.2", "1.1", 0, "Context", "from-internal"),
				dial("DialBegin", trunk, "1.1", phone, "1.2", "1.1"),
				ch("Newstate", phone, "1.2", "1.1", 5),
				ch("Newchannel", "PJSIP/205-00000003", "1.3", "1.3", 0, "Exten", "**201", "CallerIDNum", "205", "Context", "from-internal"),
				ch("Newstate", "PJSIP/205-00000003", "1.3", "1.3", 6),
				ami.NewMessage("Event", "Pickup", "Channel", "PJSIP/205-00000003", "Uniqueid", "1.3", "Linkedid", "1.3",
					"TargetChannel", phone, "TargetUniqueid", "1.2", "TargetLinkedid", "1.1"),
				dial("DialEnd", trunk, "1.1", phone, "1.2", "1.1", "DialStatus", "CANCEL"),
				ch("Hangup", phone, "1.2", "1.1", 5, "Cause", "26"),
				ch("Hangup", "PJSIP/205-00000003", "1.3", "1.1", 6, "Cause", "16"),
				ch("Hangup", trunk, "1.1", "1.1", 6, "Cause", "16")),
			want: []string{"call_received 1.1/call_received", "call_answered 1.1/answered/1.3 by 205", "call_ended 1.1/ended answered"},
		},
		{
			name: "a call forwarded to an outside number and answered there is answered elsewhere, not missed",
			msgs: append(inboundStart(),
				ch("Newchannel", phone, "1.2", "1.1", 0, "Context", "from-internal"),
				dial("DialBegin", trunk, "1.1", phone, "1.2", "1.1"),
				ch("Newstate", phone, "1.2", "1.1", 5),
				dial("DialEnd", trunk, "1.1", phone, "1.2", "1.1", "DialStatus", "NOANSWER"),
				ch("Hangup", phone, "1.2", "1.1", 5, "Cause", "19"),
				ch("Newchannel", "PJSIP/carrier-00000003", "1.3", "1.1", 0, "Exten", "+31612345678"),
				dial("DialBegin", trunk, "1.1", "PJSIP/carrier-00000003", "1.3", "1.1"),
				dial("DialEnd", trunk, "1.1", "PJSIP/carrier-00000003", "1.3", "1.1", "DialStatus", "ANSWER"),
				ch("Hangup", "PJSIP/carrier-00000003", "1.3", "1.1", 6, "Cause", "16"),
				ch("Hangup", trunk, "1.1", "1.1", 6, "Cause", "16")),
			want: []string{"call_received 1.1/call_received", "call_ended 1.1/ended answered elsewhere"},
		},
		{
			name: "a ring group's phones that did not answer are not answered elsewhere",
			msgs: append(inboundStart(),
				ch("Newchannel", phone, "1.2", "1.1", 0, "Context", "from-internal"),
				ch("Newchannel", "PJSIP/202-00000003", "1.3", "1.1", 0, "Context", "from-internal"),
				dial("DialBegin", trunk, "1.1", phone, "1.2", "1.1"),
				dial("DialBegin", trunk, "1.1", "PJSIP/202-00000003", "1.3", "1.1"),
				dial("DialEnd", trunk, "1.1", "PJSIP/202-00000003", "1.3", "1.1", "DialStatus", "ANSWER"),
				dial("DialEnd", trunk, "1.1", phone, "1.2", "1.1", "DialStatus", "CANCEL"),
				ch("Hangup", phone, "1.2", "1.1", 5, "Cause", "26"),
				ch("Hangup", "PJSIP/202-00000003", "1.3", "1.1", 6, "Cause", "16"),
				ch("Hangup", trunk, "1.1", "1.1", 6, "Cause", "16")),
			want: []string{"call_received 1.1/call_received", "call_answered 1.1/answered/1.3 by 202", "call_ended 1.1/ended answered"},
		},
		{
			name: "a sweep ends a call only when its channels are missing twice",
			msgs: append(inboundStart(),
				ch("Newchannel", phone, "1.2", "1.1", 0, "Context", "from-internal"),
				dial("DialBegin", trunk, "1.1", phone, "1.2", "1.1"),
				ch("Newstate", phone, "1.2", "1.1", 6)),
			sweeps: [][]ami.Message{
				{ch("CoreShowChannel", trunk, "1.1", "1.1", 6), ch("CoreShowChannel", phone, "1.2", "1.1", 6)},
				{ch("CoreShowChannel", trunk, "1.1", "1.1", 6)},
				{ch("CoreShowChannel", trunk, "1.1", "1.1", 6)},
				nil,
				nil,
			},
			want: []string{"4: call_ended 1.1/ended answered"},
		},
		{
			name: "a withheld number is anonymous, though Asterisk knows it",
			msgs: []ami.Message{
				ch("Newchannel", trunk, "1.1", "1.1", 0, "CallerIDNum", "+31201234567", "Exten", "+31150010004", "Context", "from-pstn"),
				ch("NewCallerid", trunk, "1.1", "1.1", 4, "CallerIDNum", "+31201234567", "CID-CallingPres", "33 (Presentation Prohibited, Passed Screen)"),
				ch("Newchannel", phone, "1.2", "1.1", 0, "Context", "from-internal"),
				dial("DialBegin", trunk, "1.1", phone, "1.2", "1.1"),
				ch("Hangup", phone, "1.2", "1.1", 5, "Cause", "16"),
				ch("Hangup", trunk, "1.1", "1.1", 4, "Cause", "16"),
			},
			want: []string{"call_received 1.1/call_received from anonymous", "call_missed 1.1/missed from anonymous",
				"call_ended 1.1/ended cancelled from anonymous"},
		},
		{
			name: "a hangup of a channel never seen is ignored",
			msgs: []ami.Message{ch("Hangup", phone, "9.9", "9.9", 6, "Cause", "16")},
		},
		{
			name: "a channel whose Linkedid changes joins the other call, which the first one ends into",
			msgs: []ami.Message{
				ch("Newchannel", "PJSIP/201-00000001", "2.1", "2.1", 0, "Exten", "202", "CallerIDNum", "201"),
				ch("Newchannel", "PJSIP/202-00000002", "2.2", "2.1", 0),
				dial("DialBegin", "PJSIP/201-00000001", "2.1", "PJSIP/202-00000002", "2.2", "2.1"),
				ch("Newstate", "PJSIP/202-00000002", "2.2", "2.1", 6),
				ch("Newchannel", "PJSIP/203-00000003", "3.1", "3.1", 0, "Exten", "204", "CallerIDNum", "203"),
				ch("Hangup", "PJSIP/201-00000001", "2.1", "2.1", 6, "Cause", "16"),
				// 202 now shows the other call's Linkedid: it moved.
				ch("BridgeEnter", "PJSIP/202-00000002", "2.2", "3.1", 6),
				ch("Hangup", "PJSIP/202-00000002", "2.2", "3.1", 6, "Cause", "16"),
				ch("Hangup", "PJSIP/203-00000003", "3.1", "3.1", 6, "Cause", "16"),
			},
			want: []string{"call_placed 2.1/call_placed", "call_answered 2.1/answered/2.2 by 202",
				"call_ended 2.1/ended answered", "call_placed 3.1/call_placed", "call_ended 3.1/ended cancelled"},
		},
		{
			name: "a call learnt at a resync, then ended unseen at the next",
			resync: [][]ami.Message{
				{ch("CoreShowChannel", trunk, "1.1", "1.1", 6, "Exten", "+31150010004", "Context", "from-pstn", "CallerIDNum", "+31201234567"),
					ch("CoreShowChannel", phone, "1.2", "1.1", 6, "Context", "from-internal")},
				nil,
			},
			want: []string{"call_received 1.1/call_received", "call_answered 1.1/answered/1.2 by 201", "call_ended 1.1/ended answered"},
		},
		{
			name: "voicemail seen at a resync",
			resync: [][]ami.Message{
				{ch("CoreShowChannel", trunk, "1.1", "1.1", 6, "Exten", "+31150010004", "Context", "from-pstn", "Application", "VoiceMail")},
				nil,
			},
			want: []string{"call_missed 1.1/missed", "call_ended 1.1/ended voicemail"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := testTracker(t)
			if tt.sweeps != nil {
				translate(tr, tt.msgs)
				var got []string
				for i, list := range tt.sweeps {
					for _, e := range tr.Sweep(list, epoch) {
						got = append(got, fmt.Sprintf("%d: %s %s %s", i, e.Type, e.ProviderEventID, e.Disposition))
					}
				}
				if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
					t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
				}
				return
			}
			evs := translate(tr, tt.msgs)
			for _, list := range tt.resync {
				evs = append(evs, tr.Resync(list, epoch)...)
			}
			var got []string
			for _, e := range evs {
				if err := e.Validate(); err != nil {
					t.Errorf("%s: %v", e.Type, err)
				}
				s := string(e.Type) + " " + e.ProviderEventID
				if e.Disposition != "" {
					s += " " + string(e.Disposition)
				}
				if e.AnsweredBy != "" {
					s += " by " + e.AnsweredBy
				}
				if e.AnsweredElsewhere != nil && *e.AnsweredElsewhere {
					s += " elsewhere"
				}
				if f := e.Call.From; f != nil && f.Kind == "anonymous" {
					s += " from anonymous"
					if f.Number != "" || f.Name != "" {
						t.Errorf("an anonymous caller shows %+v", f)
					}
				}
				got = append(got, s)
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if tr.Stats().Active != 0 {
				t.Errorf("calls left: %v", tr.Active())
			}
		})
	}
}

// TestUnholdNeedsAHold: an Unhold resumes only what may have been held. A channel seen from its
// Newchannel is known to be off hold, so an Unhold with no Hold before it (Asterisk sends one
// before a BlindTransfer) reports nothing; a channel first seen mid-call, at a resync after a
// reconnect or a restart, may have been held while nobody listened, so its Unhold is reported.
func TestUnholdNeedsAHold(t *testing.T) {
	brief := func(evs []event.Event) string {
		var s []string
		for _, e := range evs {
			if e.Type == event.CallHold {
				s = append(s, fmt.Sprintf("%s released=%v %s", e.Type, *e.Released, e.ProviderEventID))
			}
		}
		return strings.Join(s, "; ")
	}
	answered := append(inboundStart(),
		dial("DialBegin", trunk, "1.1", phone, "1.2", "1.1"),
		ch("Newchannel", phone, "1.2", "1.1", 0, "Context", "from-internal"),
		ch("Newstate", phone, "1.2", "1.1", 6),
		ch("Newstate", trunk, "1.1", "1.1", 6))

	live := testTracker(t)
	translate(live, answered)
	if got := brief(translate(live, []ami.Message{ch("Unhold", phone, "1.2", "1.1", 6)})); got != "" {
		t.Errorf("an Unhold with no Hold before it gave %q", got)
	}
	got := brief(translate(live, []ami.Message{ch("Hold", phone, "1.2", "1.1", 6), ch("Unhold", phone, "1.2", "1.1", 6),
		ch("Unhold", phone, "1.2", "1.1", 6)}))
	if want := "call_hold released=false 1.1/hold/1.2/1; call_hold released=true 1.1/unhold/1.2/1"; got != want {
		t.Errorf("Hold, Unhold, Unhold gave %q, want %q", got, want)
	}

	resynced := testTracker(t)
	resynced.Resync([]ami.Message{
		ch("CoreShowChannel", trunk, "1.1", "1.1", 6, "Exten", "+31150010004", "Context", "from-pstn", "CallerIDNum", "+31201234567"),
		ch("CoreShowChannel", phone, "1.2", "1.1", 6, "Context", "from-internal")}, epoch)
	if got := brief(translate(resynced, []ami.Message{ch("Unhold", phone, "1.2", "1.1", 6)})); got != "call_hold released=true 1.1/unhold/1.2/1" {
		t.Errorf("an Unhold on a channel learnt at a resync gave %q", got)
	}
}
