package ringcentral

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/numbering"
)

// envStreams names the directory of recorded telephony-session notification streams the
// corpus test replays. The public streams it was written against are the three files of
// https://github.com/dibyenduroy/csn-data (PSTN-RingCentral-DataStreams.txt,
// RingCentral-RingCentral.txt, RingCentral-PSTN.txt; no licence stated), which RingCentral's
// developer guide links as its examples of a typical call flow ("Telephony Session
// Notifications", https://developers.ringcentral.com/guide/voice/telephony-session-notifications).
// They are not part of this repository.
const envStreams = "CALLWIRE_TEST_RINGCENTRAL_STREAMS"

// defaultStreams is where the streams are looked for when envStreams is unset: beside the
// repository, in the shared folder.
const defaultStreams = "../../../shared/corpus/ringcentral-telephony-sessions"

// TestRecordedStreams replays every recorded notification stream of the corpus through the
// mapping and checks, for every session, what must hold whatever the call did:
//   - one call_received or call_placed, before every other event of the call;
//   - call_answered at most once, and only at the first Answered of a party of direction
//     Inbound (the party receiving the call), never at the calling party's own Answered;
//   - call_missed for an inbound call that nobody answered, and for no answered call;
//   - call_ended exactly once, last, answered exactly when the call was answered, with
//     0 ≤ talkTime ≤ duration;
//   - every event valid, and the events in the contract's order (sequence, then occurredAt)
//     in the order they happened.
//
// Each line of a file is one notification: JSON, or the Python literal the public streams
// are printed in.
func TestRecordedStreams(t *testing.T) {
	dir := os.Getenv(envStreams)
	if dir == "" {
		dir = defaultStreams
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
	more, _ := filepath.Glob(filepath.Join(dir, "*.json*"))
	files = append(files, more...)
	if len(files) == 0 {
		t.Skipf("SKIPPED: no recorded RingCentral notification streams in %s: set %s to a directory "+
			"holding the files of https://github.com/dibyenduroy/csn-data (one notification a line)", dir, envStreams)
	}
	for _, f := range files {
		recorded := readStreams(t, f)
		t.Run(filepath.Base(f)+"/in order", func(t *testing.T) { replayStreams(t, recorded) })
		// And once for every pair of neighbouring notifications, with that pair swapped:
		// RingCentral's guide says notifications can arrive out of sequence order (its FAQ, "an
		// event with a sequence number of 5 can be received before sequence 2 or 3").
		for i := 0; i+1 < len(recorded); i++ {
			swapped := slices.Clone(recorded)
			swapped[i], swapped[i+1] = swapped[i+1], swapped[i]
			t.Run(fmt.Sprintf("%s/swapped %d-%d", filepath.Base(f), i+1, i+2), func(t *testing.T) { replayStreams(t, swapped) })
		}
	}
}

// replayStreams replays notes through the mapping and checks every session's events.
func replayStreams(t *testing.T, notes []json.RawMessage) {
	t.Helper()
	cs := newCalls(corpusPlan(t, notes), DefaultProvider, time.Hour)
	bySession := map[string][]event.Event{}
	var order []string
	for _, n := range notes {
		ev, ok, err := decodeSessionEvent(n)
		if err != nil || !ok {
			t.Fatalf("decode: ok=%v err=%v", ok, err)
		}
		if _, ok := bySession[ev.TelephonySessionID]; !ok {
			order = append(order, ev.TelephonySessionID)
			bySession[ev.TelephonySessionID] = nil
		}
		bySession[ev.TelephonySessionID] = append(bySession[ev.TelephonySessionID], cs.observe(ev, n, time.Now())...)
	}
	for _, id := range order {
		evs := bySession[id]
		for _, e := range evs {
			t.Log(summary(e))
		}
		checkSession(t, id, sessionNotes(t, notes, id), evs)
	}
}

// checkSession checks the invariants of TestRecordedStreams for one session's events.
func checkSession(t *testing.T, id string, notes []sessionEvent, evs []event.Event) {
	t.Helper()
	count := map[event.Type]int{}
	for _, e := range evs {
		count[e.Type]++
		if err := e.Validate(); err != nil {
			t.Errorf("%s: invalid %s: %v", id, e.Type, err)
		}
	}
	if n := count[event.CallReceived] + count[event.CallPlaced]; n != 1 {
		t.Errorf("%s: %d call_received/call_placed, want 1", id, n)
	}
	if count[event.CallEnded] != 1 {
		t.Errorf("%s: %d call_ended, want 1", id, count[event.CallEnded])
		return
	}
	if count[event.CallAnswered] > 1 {
		t.Errorf("%s: %d call_answered", id, count[event.CallAnswered])
	}
	// The contract orders a call's events by sequence, then occurredAt.
	sorted := slices.Clone(evs)
	slices.SortStableFunc(sorted, contractOrder)
	if first := sorted[0].Type; first != event.CallReceived && first != event.CallPlaced {
		t.Errorf("%s: %s sorts first", id, first)
	}
	if last := sorted[len(sorted)-1]; last.Type != event.CallEnded {
		t.Errorf("%s: %s sorts last, not call_ended", id, last.Type)
	}
	// The answer: the first Answered of a receiving party, when the session showed one.
	var answer time.Time
	receiving := false
	slices.SortFunc(notes, func(a, b sessionEvent) int { return cmp.Compare(a.Sequence, b.Sequence) })
	for _, n := range notes {
		for _, p := range n.Parties {
			if outbound(p) {
				continue
			}
			receiving = true
			if p.Status.Code == statusAnswered && answer.IsZero() {
				answer = n.at
			}
		}
	}
	var answered, ended event.Event
	for _, e := range evs {
		switch e.Type {
		case event.CallAnswered:
			answered = e
		case event.CallEnded:
			ended = e
		}
	}
	switch {
	case receiving && answer.IsZero() && answered.Type != "":
		t.Errorf("%s: call_answered at %s, but no receiving party answered", id, answered.OccurredAt)
	case receiving && !answer.IsZero() && !answered.OccurredAt.Equal(answer):
		t.Errorf("%s: call_answered at %v, want the receiving party's Answered at %s", id, answered.OccurredAt, answer)
	}
	if (answered.Type != "") != (ended.Disposition == event.DispositionAnswered) {
		t.Errorf("%s: call_answered %t but disposition %s", id, answered.Type != "", ended.Disposition)
	}
	if wantMissed := ended.Call.Direction == event.Inbound && answered.Type == ""; wantMissed != (count[event.CallMissed] == 1) {
		t.Errorf("%s: %d call_missed for an inbound=%t call answered=%t", id, count[event.CallMissed],
			ended.Call.Direction == event.Inbound, answered.Type != "")
	}
	if ended.Duration == nil {
		t.Errorf("%s: call_ended without duration", id)
	} else if ended.TalkTime != nil && (*ended.TalkTime < 0 || *ended.TalkTime > *ended.Duration) {
		t.Errorf("%s: talkTime %g outside 0..duration %g", id, *ended.TalkTime, *ended.Duration)
	}
}

// sessionNotes decodes the notifications of session id.
func sessionNotes(t *testing.T, notes []json.RawMessage, id string) []sessionEvent {
	t.Helper()
	var out []sessionEvent
	for _, n := range notes {
		ev, ok, err := decodeSessionEvent(n)
		if err == nil && ok && ev.TelephonySessionID == id {
			out = append(out, ev)
		}
	}
	return out
}

// corpusPlan is the numbering plan of the account the streams were recorded on: its numbers
// are the E.164 numbers the streams give an extensionId (the ends that are the account's own),
// as a clinic lists its own numbers in the configuration.
func corpusPlan(t *testing.T, notes []json.RawMessage) *numbering.Plan {
	t.Helper()
	seen := map[string]bool{}
	var numbers []string
	for _, n := range notes {
		ev, ok, err := decodeSessionEvent(n)
		if err != nil || !ok {
			continue
		}
		for _, p := range ev.Parties {
			for _, e := range []endpoint{p.From, p.To} {
				if e.ExtensionID != "" && strings.HasPrefix(e.PhoneNumber, "+") && !seen[e.PhoneNumber] {
					seen[e.PhoneNumber] = true
					numbers = append(numbers, e.PhoneNumber)
				}
			}
		}
	}
	p, err := numbering.New(numbering.Config{DefaultCountry: "US", Numbers: numbers})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// readStreams reads a file of notifications, one a line, each JSON or a Python literal.
func readStreams(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			conv, err := pyLiteralJSON(string(line))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			line = conv
		}
		out = append(out, append(json.RawMessage(nil), line...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// pyLiteralJSON rewrites a Python literal of dicts, lists, strings, numbers, True, False and
// None (what print() makes of a decoded JSON object) as JSON.
func pyLiteralJSON(s string) (json.RawMessage, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			var str strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
					switch s[j] {
					case 'n':
						str.WriteByte('\n')
					case 't':
						str.WriteByte('\t')
					default:
						str.WriteByte(s[j])
					}
					continue
				}
				str.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, errors.New("unterminated string")
			}
			q, _ := json.Marshal(str.String())
			b.Write(q)
			i = j + 1
		case strings.HasPrefix(s[i:], "True"):
			b.WriteString("true")
			i += 4
		case strings.HasPrefix(s[i:], "False"):
			b.WriteString("false")
			i += 5
		case strings.HasPrefix(s[i:], "None"):
			b.WriteString("null")
			i += 4
		default:
			b.WriteByte(c)
			i++
		}
	}
	out := json.RawMessage(b.String())
	if !json.Valid(out) {
		return nil, fmt.Errorf("line is neither JSON nor a Python literal: %.60s", s)
	}
	return out, nil
}
