package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/sdk/translator/translatortest"
)

// fakeEmitter is an in-memory agent: it validates each event the way the agent does and keeps
// it. fail, when set, may refuse an event instead.
type fakeEmitter struct {
	mu     sync.Mutex
	events []event.Event
	fail   func(e event.Event) error
}

func (f *fakeEmitter) Emit(_ context.Context, e event.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail(e); err != nil {
			return err
		}
	}
	if err := e.Validate(); err != nil {
		return err
	}
	f.events = append(f.events, e)
	return nil
}

func (f *fakeEmitter) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ks []string
	for _, e := range f.events {
		ks = append(ks, e.ProviderCallID+"/"+e.DedupeKey())
	}
	return ks
}

// waitFor polls until the emitter holds want events, or fails the test after five seconds (of
// the bubble's clock, in a synctest test).
func (f *fakeEmitter) waitFor(t *testing.T, want int) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ks := f.keys()
		if len(ks) >= want || time.Now().After(deadline) {
			if len(ks) != want {
				t.Fatalf("emitted %d events, want %d: %v", len(ks), want, ks)
			}
			return ks
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run starts the translator on cfg and returns a function that stops it and returns Run's error.
func run(t *testing.T, cfg config, out translator.Emitter) func() error {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- (&csvLog{}).Run(ctx, raw, out) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context ended")
			return nil
		}
	}
}

func appendLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "")); err != nil {
		t.Fatal(err)
	}
}

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want string // the event's canonical JSON must contain this; empty means an error
	}{
		{`2026-11-20T09:30:00Z,c1,call_received,inbound,+442071234567,101,0`, `"type":"call_received","providerCallId":"c1","occurredAt":"2026-11-20T09:30:00Z","call":{"direction":"inbound","from":{"kind":"e164","number":"+442071234567"},"to":{"kind":"extension","extension":"101"}},"provider":"csvlog"`},
		{`2026-11-20T09:30:05Z,c1,call_answered,inbound,+442071234567,101,1,102`, `"answeredBy":"102"`},
		{`2026-11-20T09:31:00Z,c1,call_ended,inbound,anonymous,101,2,answered`, `"disposition":"answered"`},
		{`2026-11-20T09:31:00Z,c1,call_transferred,inbound,,101,3,+442071234500`, `"to":{"kind":"e164","number":"+442071234500"}`},
		{`2026-11-20T09:31:00Z,c1,call_recorded,inbound,,,4,https://rec.example/1.wav`, `"url":"https://rec.example/1.wav"`},
		{`2026-11-20T09:31:00Z,c1,call_transcribed,inbound,,,5,"Hello, world"`, `"text":"Hello, world"`},
		{`2026-11-20T09:30:00.25+01:00,c1,call_missed,outbound,101,+442071234567,6`, `"occurredAt":"2026-11-20T08:30:00.25Z"`},
		{`2026-11-20T09:30:00Z,c1,call_received,inbound,+442071234567,101`, ""},        // too few columns
		{`2026-11-20T09:30:00Z,c1,call_received,inbound,+1,101,0,x,y`, ""},             // too many
		{`yesterday,c1,call_received,inbound,+442071234567,101,0`, ""},                 // time
		{`2026-11-20T09:30:00Z,c1,call_rang,inbound,+442071234567,101,0`, ""},          // type
		{`2026-11-20T09:30:00Z,c1,call_received,sideways,+442071234567,101,0`, ""},     // direction
		{`2026-11-20T09:30:00Z,c1,call_received,inbound,+44x207,101,0`, ""},            // not E.164
		{`2026-11-20T09:30:00Z,c1,call_received,inbound,+442071234567,101,one`, ""},    // sequence
		{`2026-11-20T09:30:00Z,,call_received,inbound,+442071234567,101,0`, ""},        // call id
		{`2026-11-20T09:30:00Z,c1,call_ended,inbound,+442071234567,101,2,hung_up`, ""}, // disposition
		{`2026-11-20T09:30:00Z,c1,call_recorded,inbound,+442071234567,101,2`, ""},      // url required
		{`2026-11-20T09:30:00Z,"c1,call_received,inbound,+442071234567,101,0`, ""},     // quoting
	} {
		e, err := parseLine(tc.line, "csvlog")
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: parsed, want an error", tc.line)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		b, _ := json.Marshal(e)
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("%s:\n got %s\nwant it to contain %s", tc.line, b, tc.want)
		}
	}
}

// TestTail follows a log being written: the header, blank and malformed lines are skipped, a
// partial last line waits for its end, and a second run resumes after the last line taken.
// It runs in a synctest bubble, as TestEmitFailures does: the translator's polling and the
// test's waiting follow the bubble's clock, so a busy machine cannot make either late.
func TestTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := config{Path: filepath.Join(dir, "calls.csv"), State: filepath.Join(dir, "calls.state"), Provider: "csvlog", Poll: "10ms"}
		out := &fakeEmitter{}
		stop := run(t, cfg, out) // before the log exists
		appendLines(t, cfg.Path,
			"time,call_id,type,direction,from,to,sequence,detail\n",
			"2026-11-20T09:30:00Z,c1,call_received,inbound,+442071234567,101,0\n",
			"\n",
			"garbage,,\n",
			"2026-11-20T09:30:05Z,c1,call_answered,inbound,+442071234567,101,1,101\r\n",
			"2026-11-20T09:31:00Z,c1,call_ended,inbound,+442071234567,101,2,") // no end of line yet
		out.waitFor(t, 2)
		appendLines(t, cfg.Path, "answered\n")
		if got := out.waitFor(t, 3); strings.Join(got, " ") != "c1/call_received:0 c1/call_answered:1 c1/call_ended:2" {
			t.Errorf("emitted %v", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
		fi, _ := os.Stat(cfg.Path)
		if got := readOffset(cfg.State); got != fi.Size() {
			t.Errorf("state %d, want the log's size %d", got, fi.Size())
		}

		again := &fakeEmitter{}
		stop = run(t, cfg, again)
		appendLines(t, cfg.Path, "2026-11-20T09:40:00Z,c2,call_missed,inbound,anonymous,101,0\n")
		if got := again.waitFor(t, 1); got[0] != "c2/call_missed:0" {
			t.Errorf("after a restart: %v", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestEmitFailures: an event refused because the outbox is full is offered again; one refused as
// invalid is skipped; when the agent goes away Run ends, and the next run starts at the line that
// was not taken.
func TestEmitFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := config{Path: filepath.Join(dir, "calls.csv"), Poll: "10ms", Provider: "csvlog"}
		var lines []string
		for i := range 6 {
			lines = append(lines, "2026-11-20T09:30:00Z,c1,call_hold,inbound,,101,"+strconv.Itoa(i)+"\n")
		}
		appendLines(t, cfg.Path, lines...)

		full := 2
		out := &fakeEmitter{fail: func(e event.Event) error {
			switch {
			case e.Sequence == 1 && full > 0:
				full--
				return &translator.RefusedError{Reason: "outbox is full"}
			case e.Sequence == 2:
				return &event.ValidationError{Problems: []event.Problem{{Field: "call", Message: "stricter agent"}}}
			case e.Sequence == 4:
				return errors.New("emit: no answer from the agent: connection reset")
			}
			return nil
		}}
		raw, _ := json.Marshal(cfg)
		err := (&csvLog{}).Run(t.Context(), raw, out)
		if err == nil || !strings.Contains(err.Error(), "connection reset") {
			t.Fatalf("Run = %v, want the emit error", err)
		}
		if got := strings.Join(out.keys(), " "); got != "c1/call_hold:0 c1/call_hold:1 c1/call_hold:3" || full != 0 {
			t.Errorf("emitted %s (full refusals left %d)", got, full)
		}

		again := &fakeEmitter{}
		stop := run(t, cfg, again)
		if got := strings.Join(again.waitFor(t, 2), " "); got != "c1/call_hold:4 c1/call_hold:5" {
			t.Errorf("after the restart: %s", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestBadConfig(t *testing.T) {
	for _, raw := range []string{`{}`, `{"path":"x","poll":"soon"}`, `{"path":"x","poll":"-1s"}`, `[]`} {
		if err := (&csvLog{}).Run(t.Context(), json.RawMessage(raw), &fakeEmitter{}); err == nil {
			t.Errorf("config %s: Run succeeded", raw)
		}
	}
}

func TestHealth(t *testing.T) {
	tr := &csvLog{}
	if err := tr.Health(t.Context()); err != nil {
		t.Errorf("before Run: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "calls.csv")
	tr.path.Store(&missing)
	if err := tr.Health(t.Context()); err == nil || !strings.Contains(err.Error(), "call log") {
		t.Errorf("missing log: %v", err)
	}
}

// FuzzParseLine: no line, however malformed, crashes the translator, and every event it accepts
// is valid.
func FuzzParseLine(f *testing.F) {
	f.Add(`2026-11-20T09:30:00Z,c1,call_received,inbound,+442071234567,101,0`)
	f.Add(`2026-11-20T09:31:00Z,c1,call_transcribed,inbound,,,5,"Hello, world"`)
	f.Add(`"`)
	f.Fuzz(func(t *testing.T, line string) {
		e, err := parseLine(line, "csvlog")
		if err == nil {
			if verr := e.Validate(); verr != nil {
				t.Errorf("accepted an invalid event: %v", verr)
			}
		}
	})
}

// TestContract runs the translator through the contract check every translator should pass,
// with its first event refused as a full outbox would.
func TestContract(t *testing.T) {
	dir := t.TempDir()
	cfg := config{Path: filepath.Join(dir, "calls.csv"), State: filepath.Join(dir, "calls.state"), Poll: "10ms"}
	appendLines(t, cfg.Path,
		"time,call_id,type,direction,from,to,sequence,detail\n",
		"2026-11-20T09:30:00Z,c1,call_received,inbound,+442071234567,101,0\n",
		"2026-11-20T09:30:05Z,c1,call_answered,inbound,+442071234567,101,1,101\n",
		"2026-11-20T09:31:00Z,c1,call_ended,inbound,+442071234567,101,2,answered\n")
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	events := translatortest.Check(t, &csvLog{}, translatortest.Options{Config: raw, Want: 3, RefuseFirst: true})
	if len(events) != 3 || events[0].Type != event.CallReceived || events[2].Type != event.CallEnded {
		t.Errorf("events %+v", events)
	}
}
