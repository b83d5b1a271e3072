package callmodel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/numbering"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/flows")

// flowBase is the time a flow's offsets count from.
var flowBase = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// The test network: the carrier trunk, a proxy in front of the PBX, the PBX, and two phones.
var (
	testTrunk = netip.MustParseAddrPort("203.0.113.5:5060")
	testPBX   = netip.MustParseAddrPort("10.0.0.20:5060")
)

// testConfig is the tracker configuration every flow runs with.
func testConfig(t testing.TB) Config {
	t.Helper()
	plan, err := numbering.New(numbering.Config{
		Numbers:        []string{"+15551230100", "+15551230200"},
		DefaultCountry: "US",
		Locations:      map[string][]string{"+15551230100": {"main"}, "+15551230200": {"branch-east"}},
		DialPrefixes:   []string{"9"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return Config{Plan: plan, PBX: []netip.AddrPort{testPBX}, Trunk: []netip.AddrPort{testTrunk}}
}

func newTestTracker(t testing.TB) *Tracker {
	t.Helper()
	tr, err := NewTracker(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// loadFlow reads a flow file (format in testdata/README.md) into the messages it holds.
func loadFlow(t testing.TB, path string) []Message {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := parseFlow(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return msgs
}

// parseFlow reads the flow format: lines before the first separator are comments; each
// separator line "--- <seconds> <transport> <src> -> <dst>" starts a message whose text follows
// up to the next separator. Lines get CRLF ends; the body is what follows the first blank line,
// and Content-Length is computed (any written in the file is replaced).
func parseFlow(data []byte) ([]Message, error) {
	var msgs []Message
	var cur *Message
	var lines []string
	flush := func() {
		if cur == nil {
			return
		}
		cur.Data = buildSIP(lines)
		msgs = append(msgs, *cur)
		cur, lines = nil, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(line, "--- ") {
			flush()
			f := strings.Fields(line[4:])
			if len(f) != 5 || f[3] != "->" {
				return nil, fmt.Errorf("line %d: want \"--- <seconds> <transport> <src> -> <dst>\"", n)
			}
			secs, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			src, err1 := netip.ParseAddrPort(f[2])
			dst, err2 := netip.ParseAddrPort(f[4])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("line %d: bad address", n)
			}
			cur = &Message{
				Transport: f[1], Src: src, Dst: dst,
				At: flowBase.Add(time.Duration(secs * float64(time.Second))),
			}
			continue
		}
		if cur != nil {
			lines = append(lines, line)
		}
	}
	flush()
	return msgs, sc.Err()
}

func buildSIP(lines []string) []byte {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	head, body := lines, []string(nil)
	for i, l := range lines {
		if l == "" {
			head, body = lines[:i], lines[i+1:]
			break
		}
	}
	var b strings.Builder
	for _, h := range head {
		if strings.HasPrefix(strings.ToLower(h), "content-length:") {
			continue
		}
		b.WriteString(h + "\r\n")
	}
	text := ""
	if len(body) > 0 {
		text = strings.Join(body, "\r\n") + "\r\n"
	}
	b.WriteString("Content-Length: " + strconv.Itoa(len(text)) + "\r\n\r\n" + text)
	return []byte(b.String())
}

// runFlow feeds the messages to tr, each repeat times in a row, then expires far in the future.
func runFlow(tr *Tracker, msgs []Message, repeat int) []event.Event {
	var out []event.Event
	for _, m := range msgs {
		for range repeat {
			out = append(out, tr.Observe(m)...)
		}
	}
	out = append(out, tr.Expire(flowBase.Add(72*time.Hour))...)
	if out == nil {
		out = []event.Event{}
	}
	return out
}

func flowFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "flows", "*.sip"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no flows: %v", err)
	}
	return files
}

func TestGoldenFlows(t *testing.T) {
	for _, path := range flowFiles(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".sip")
		t.Run(name, func(t *testing.T) {
			msgs := loadFlow(t, path)
			tr := newTestTracker(t)
			evs := runFlow(tr, msgs, 1)
			for i := range evs {
				if err := evs[i].Validate(); err != nil {
					t.Errorf("event %d (%s) is invalid: %v", i, evs[i].Type, err)
				}
			}
			got, err := json.MarshalIndent(evs, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := strings.TrimSuffix(path, ".sip") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("events differ from %s (run with -update after checking):\n%s", golden, got)
			}
			if tr.recovered != 0 {
				t.Errorf("Observe panicked %d times", tr.recovered)
			}
			if s := tr.Stats(); s.Calls != 0 {
				t.Errorf("%d calls still held after expiry", s.Calls)
			}
		})
	}
}

// TestFlowsDeterministic feeds every flow through two fresh trackers: the events must be the
// same, ids included.
func TestFlowsDeterministic(t *testing.T) {
	for _, path := range flowFiles(t) {
		msgs := loadFlow(t, path)
		a := runFlow(newTestTracker(t), msgs, 1)
		b := runFlow(newTestTracker(t), msgs, 1)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs differ", path)
		}
	}
}

// TestFlowsTwice feeds every message of every flow twice in a row (a retransmission, or a second
// capture agent): the events must be those of one feeding.
func TestFlowsTwice(t *testing.T) {
	for _, path := range flowFiles(t) {
		msgs := loadFlow(t, path)
		once := runFlow(newTestTracker(t), msgs, 1)
		tr := newTestTracker(t)
		twice := runFlow(tr, msgs, 2)
		if !reflect.DeepEqual(once, twice) {
			t.Errorf("%s: feeding each message twice gives other events", path)
		}
		if tr.Stats().Duplicates == 0 && len(msgs) > 0 && len(once) > 0 {
			t.Errorf("%s: no duplicate counted", path)
		}
	}
}

// TestFlowsParsedMessages feeds the flows as a proxy does, already parsed and without the wire
// text: the events must be the same but for raw, which is rendered from the parsed message.
func TestFlowsParsedMessages(t *testing.T) {
	for _, path := range flowFiles(t) {
		msgs := loadFlow(t, path)
		want := runFlow(newTestTracker(t), msgs, 1)
		parsed := make([]Message, 0, len(msgs))
		for _, m := range msgs {
			p, err := newParser().ParseSIP(m.Data)
			if err != nil {
				continue // the garbage of a flow
			}
			m.SIP, m.Data = p, nil
			parsed = append(parsed, m)
		}
		got := runFlow(newTestTracker(t), parsed, 1)
		if len(got) != len(want) {
			t.Errorf("%s: %d events from parsed messages, want %d", path, len(got), len(want))
			continue
		}
		for i := range got {
			if len(got[i].Raw) == 0 && len(want[i].Raw) != 0 {
				t.Errorf("%s: event %d has no raw", path, i)
			}
			got[i].Raw, want[i].Raw = nil, nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: parsed messages give other events", path)
		}
	}
}

// TestFlowEventsEncodeInOneBuffer: the buffer MarshalJSON sizes for an event is room enough for
// every event the flows make, so that the translator's emitter never grows and copies one.
func TestFlowEventsEncodeInOneBuffer(t *testing.T) {
	for _, path := range flowFiles(t) {
		evs := runFlow(newTestTracker(t), loadFlow(t, path), 1)
		for i, e := range evs {
			if n := testing.AllocsPerRun(3, func() { _, _ = e.MarshalJSON() }); n != 1 {
				t.Errorf("%s: event %d (%s) took %v allocations to encode, want 1", filepath.Base(path), i, e.Type, n)
			}
		}
	}
}

// Every event's raw is in canonical form: encoded trusting it, the event is the bytes AppendJSON
// writes after checking and compacting it.
func TestFlowEventsRawIsCanonical(t *testing.T) {
	for _, path := range flowFiles(t) {
		for _, e := range runFlow(newTestTracker(t), loadFlow(t, path), 1) {
			rawIsCanonical(t, e)
		}
	}
}

func rawIsCanonical(t *testing.T, e event.Event) {
	t.Helper()
	want, err := e.AppendJSON(nil)
	if err != nil {
		t.Fatalf("%s: %v", e.Type, err)
	}
	if got, err := e.AppendJSONTrustingRaw(nil); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: raw is not canonical:\ntrusted %s (%v)\nchecked %s", e.Type, got, err, want)
	}
}
