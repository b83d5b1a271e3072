package outbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/outbox"
)

// crashEnv names the outbox file a helper process adds to until it is killed.
const crashEnv = "CALLWIRE_OUTBOX_CRASH_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnv); path != "" {
		crashHelper(path)
		return
	}
	os.Exit(m.Run())
}

// crashHelper adds events to the outbox at path forever, printing "ok N" once the Add of event
// N returned. It never closes the outbox: it is killed.
func crashHelper(path string) {
	ctx := context.Background()
	ob, err := outbox.Open(ctx, path, outbox.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	for i := 0; ; i++ {
		if err := ob.Add(ctx, "crash", ev(fmt.Sprintf("c%d", i), event.CallEnded, 1)); err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		fmt.Println("ok", i)
	}
}

var at = time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)

func ev(call string, t event.Type, seq int64) event.Event {
	e := event.New(t, call, at.Add(time.Duration(seq)*time.Second), event.Call{Direction: event.Inbound, From: event.E164("+442071234567")})
	e.Sequence = seq
	return e
}

func open(t *testing.T, path string, o outbox.Options) *outbox.Outbox {
	t.Helper()
	ob, err := outbox.Open(t.Context(), path, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { ob.Close() })
	return ob
}

func add(t *testing.T, ob *outbox.Outbox, src string, evs ...event.Event) {
	t.Helper()
	for _, e := range evs {
		if err := ob.Add(t.Context(), src, e); err != nil {
			t.Fatalf("add %s %s: %v", e.ProviderCallID, e.Type, err)
		}
	}
}

// names describes items as "call/type" for comparisons.
func names(items []outbox.Item) string {
	var s []string
	for _, it := range items {
		_, call, _ := strings.Cut(it.CallKey, "\x00")
		s = append(s, call+"/"+strings.TrimPrefix(string(it.Type), "call_"))
	}
	return strings.Join(s, " ")
}

func TestReopenAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	ob := open(t, path, outbox.Options{})
	add(t, ob, "sip", ev("a", event.CallAnswered, 2), ev("a", event.CallEnded, 3), ev("b", event.CallEnded, 1))
	want, err := ob.Peek(t.Context(), 50)
	if err != nil || len(want) != 3 {
		t.Fatalf("peek: %v %d", err, len(want))
	}
	if _, err := ob.Next(t.Context(), 50); err != nil {
		t.Fatal(err)
	}
	if err := ob.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ob.Add(t.Context(), "sip", ev("c", event.CallEnded, 1)); !errors.Is(err, outbox.ErrClosed) {
		t.Fatalf("add after close: %v", err)
	}
	ob = open(t, path, outbox.Options{})
	got, err := ob.Next(t.Context(), 50)
	if err != nil {
		t.Fatal(err)
	}
	if names(got) != names(want) {
		t.Fatalf("after reopen %q, want %q (in-flight events come back)", names(got), names(want))
	}
	for i := range got {
		if string(got[i].Body) != string(want[i].Body) || got[i].Source != "sip" || got[i].ID != want[i].ID {
			t.Errorf("item %d changed across reopen", i)
		}
	}
	st, err := ob.Stats(t.Context())
	if err != nil || st.Queued != 3 || st.Sources["sip"].Queued != 3 || st.InFlight != 3 {
		t.Fatalf("stats %+v %v", st, err)
	}
}

func TestStoresCanonicalJSON(t *testing.T) {
	ob := open(t, filepath.Join(t.TempDir(), "o.db"), outbox.Options{})
	e := ev("a", event.CallEnded, 1)
	e.Raw = json.RawMessage(`{"sip":"BYE sip:x SIP/2.0"}`)
	add(t, ob, "sip", e)
	items, _ := ob.Peek(t.Context(), 1)
	want, _ := json.Marshal(e)
	if string(items[0].Body) != string(want) {
		t.Fatalf("stored %s, want %s", items[0].Body, want)
	}
	if err := ob.Add(t.Context(), "sip", event.Event{Type: "call_nothing"}); err == nil {
		t.Fatal("an invalid event was stored")
	} else if _, ok := event.AsValidationError(err); !ok {
		t.Fatalf("invalid event: %v, want a validation error", err)
	}
	big := ev("b", event.CallEnded, 1)
	big.Raw = json.RawMessage(`{"x":"` + strings.Repeat("a", outbox.MaxEventBytes) + `"}`)
	if err := ob.Add(t.Context(), "sip", big); !errors.Is(err, outbox.ErrTooLarge) {
		t.Fatalf("big event: %v", err)
	}
}

// TestAddValidStoresTheBytesAsGiven: an event validated on its way in (event.ParseOne) is stored
// as its bytes, not decoded or encoded again; the zero Valid is refused.
func TestAddValidStoresTheBytesAsGiven(t *testing.T) {
	ob := open(t, filepath.Join(t.TempDir(), "o.db"), outbox.Options{})
	canonical, _ := json.Marshal(ev("a", event.CallEnded, 1))
	given := []byte(strings.ReplaceAll(string(canonical), ",", ", "))
	v, err := event.ParseOne(given)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.AddValid(t.Context(), "sip", v); err != nil {
		t.Fatal(err)
	}
	items, _ := ob.Peek(t.Context(), 1)
	if len(items) != 1 || string(items[0].Body) != string(given) || items[0].CallKey != outbox.CallKey(v.Event()) {
		t.Fatalf("stored %+v, want the bytes given, %s", items, given)
	}
	if err := ob.AddValid(t.Context(), "sip", event.Valid{}); err == nil {
		t.Fatal("the zero Valid was stored")
	}
}

func TestOrdering(t *testing.T) {
	ctx := t.Context()
	ob := open(t, filepath.Join(t.TempDir(), "o.db"), outbox.Options{})
	add(t, ob, "sip",
		ev("a", event.CallAnswered, 2), // a's ring was sent long ago
		ev("a", event.CallEnded, 3),
		ev("b", event.CallReceived, 1),
		ev("b", event.CallAnswered, 2),
		ev("c", event.CallEnded, 5),
		ev("d", event.CallAnswered, 2),
		ev("d", event.CallReceived, 1), // out of order: must wait for d/answered
		ev("d", event.CallEnded, 3),
	)
	// The ring heading its call jumps ahead of other calls' tails.
	step := func(max int, want string) []outbox.Item {
		t.Helper()
		items, err := ob.Next(ctx, max)
		if err != nil {
			t.Fatal(err)
		}
		if names(items) != want {
			t.Fatalf("next(%d) = %q, want %q", max, names(items), want)
		}
		return items
	}
	ring := step(50, "b/received")
	// b is in flight: its answered waits. d's tail stops at its ring.
	tail := step(50, "a/answered a/ended c/ended d/answered")
	step(50, "")
	if err := ob.Ack(ctx, outbox.IDs(tail)); err != nil {
		t.Fatal(err)
	}
	dRing := step(50, "d/received")
	step(50, "")
	ob.Release(outbox.IDs(ring)) // b's ring failed: it goes again, first.
	step(50, "b/received")
	if err := ob.Ack(ctx, []int64{ring[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := ob.Ack(ctx, outbox.IDs(dRing)); err != nil {
		t.Fatal(err)
	}
	step(1, "b/answered")
	step(50, "d/ended")
	st, _ := ob.Stats(ctx)
	if st.Queued != 2 || st.InFlight != 2 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := ob.Next(ctx, 51); err == nil {
		t.Fatal("next(51) allowed")
	}
}

func TestBatchesAtMost50(t *testing.T) {
	ob := open(t, filepath.Join(t.TempDir(), "o.db"), outbox.Options{})
	for i := range 120 {
		add(t, ob, "sip", ev("c"+strconv.Itoa(i), event.CallEnded, 1))
	}
	var sizes []int
	for {
		items, err := ob.Next(t.Context(), 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 0 {
			break
		}
		sizes = append(sizes, len(items))
		parsed, isBatch, err := event.ParseBody(outbox.Body(items))
		if err != nil || isBatch != (len(items) > 1) || len(parsed) != len(items) {
			t.Fatalf("body of %d: batch %v, %d parsed, %v", len(items), isBatch, len(parsed), err)
		}
		for i := range parsed {
			if string(parsed[i].Body) != string(items[i].Body) {
				t.Fatalf("the body does not carry the stored bytes exactly")
			}
		}
	}
	if fmt.Sprint(sizes) != "[50 50 20]" {
		t.Fatalf("batches %v", sizes)
	}
}

func TestFullRefusesNewEventsKeepsStored(t *testing.T) {
	ctx := t.Context()
	ob := open(t, filepath.Join(t.TempDir(), "o.db"), outbox.Options{MaxEvents: 3})
	add(t, ob, "sip", ev("a", event.CallReceived, 1), ev("a", event.CallAnswered, 2), ev("a", event.CallEnded, 3))
	err := ob.Add(ctx, "sip", ev("b", event.CallReceived, 1))
	if !errors.Is(err, outbox.ErrFull) {
		t.Fatalf("fourth add: %v, want ErrFull", err)
	}
	st, _ := ob.Stats(ctx)
	if st.Queued != 3 {
		t.Fatalf("queued %d: a stored event was dropped", st.Queued)
	}
	items, _ := ob.Next(ctx, 50)
	if err := ob.Ack(ctx, outbox.IDs(items)); err != nil {
		t.Fatal(err)
	}
	add(t, ob, "sip", ev("b", event.CallReceived, 1))

	one, _ := json.Marshal(ev("x", event.CallEnded, 1))
	ob2 := open(t, filepath.Join(t.TempDir(), "o.db"), outbox.Options{MaxBytes: int64(2*len(one) + 1)})
	add(t, ob2, "sip", ev("x", event.CallEnded, 1), ev("y", event.CallEnded, 1))
	if err := ob2.Add(ctx, "sip", ev("z", event.CallEnded, 1)); !errors.Is(err, outbox.ErrFull) {
		t.Fatalf("over max bytes: %v", err)
	}
}

func TestDeadLetter(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead.jsonl")
	ob := open(t, filepath.Join(dir, "o.db"), outbox.Options{DeadLetterPath: dead})
	add(t, ob, "pbx", ev("a", event.CallEnded, 1), ev("b", event.CallEnded, 1))
	items, _ := ob.Next(ctx, 50)
	r := outbox.Reason{Status: 400, Code: "400 Bad Request", Message: "events[0].call.from: bad number", TraceID: "trace-1"}
	if err := ob.DeadLetter(ctx, []int64{items[0].ID}, r); err != nil {
		t.Fatal(err)
	}
	ob.Release([]int64{items[1].ID})
	raw, err := os.ReadFile(dead)
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Translator string          `json:"translator"`
		Status     int             `json:"status"`
		Error      string          `json:"error"`
		Message    string          `json:"message"`
		TraceID    string          `json:"traceId"`
		Event      json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(raw, &line); err != nil {
		t.Fatalf("dead-letter line %s: %v", raw, err)
	}
	if line.Translator != "pbx" || line.Status != 400 || line.Message != r.Message || line.TraceID != "trace-1" ||
		string(line.Event) != string(items[0].Body) || strings.Count(string(raw), "\n") != 1 {
		t.Fatalf("dead-letter line %s", raw)
	}
	st, _ := ob.Stats(ctx)
	if st.Queued != 1 || st.DeadLettered != 1 || st.Sources["pbx"].DeadLettered != 1 || st.InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
	ds, err := ob.DeadLetters(ctx, 0, 10)
	if err != nil || len(ds) != 1 || ds[0].Reason != r || string(ds[0].Body) != string(items[0].Body) {
		t.Fatalf("dead letters %+v %v", ds, err)
	}
	next, _ := ob.Next(ctx, 50)
	if names(next) != "b/ended" {
		t.Fatalf("after dead letter: %q", names(next))
	}
}

// TestCrashKeepsEveryAcknowledgedAdd kills -9 a process in the middle of adding events and checks
// that every Add that had returned survived, each once.
func TestCrashKeepsEveryAcknowledgedAdd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || f[0] != "ok" {
			cmd.Process.Kill()
			t.Fatalf("helper: %s", sc.Text())
		}
		acked, _ = strconv.Atoi(f[1])
		if acked >= 150 {
			break
		}
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no chance to close anything
		t.Fatal(err)
	}
	cmd.Wait()
	if acked < 150 {
		t.Fatalf("helper acknowledged only %d adds", acked+1)
	}
	ob := open(t, path, outbox.Options{})
	seen := map[string]int{}
	for {
		items, err := ob.Next(t.Context(), 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 0 {
			break
		}
		for _, it := range items {
			_, call, _ := strings.Cut(it.CallKey, "\x00")
			seen[call]++
			if _, _, err := event.ParseBody(it.Body); err != nil {
				t.Fatalf("stored body of %s is damaged: %v", call, err)
			}
		}
		if err := ob.Ack(t.Context(), outbox.IDs(items)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i <= acked; i++ {
		if seen["c"+strconv.Itoa(i)] != 1 {
			t.Fatalf("acknowledged add c%d found %d times after kill -9", i, seen["c"+strconv.Itoa(i)])
		}
	}
	t.Logf("%d adds acknowledged before kill -9, %d events found after", acked+1, len(seen))
}

// TestOneProcessPerOutbox: a second Open of the same outbox fails with ErrInUse until the first
// is closed.
func TestOneProcessPerOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	first := open(t, path, outbox.Options{})
	if _, err := outbox.Open(t.Context(), path, outbox.Options{}); !errors.Is(err, outbox.ErrInUse) {
		t.Fatalf("second open: %v, want ErrInUse", err)
	}
	first.Close()
	open(t, path, outbox.Options{})
}

// TestDeadLetterFileStartsANewLine: a record never continues a line a cut-short write left.
func TestDeadLetterFileStartsANewLine(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead.jsonl")
	if err := os.WriteFile(dead, []byte(`{"partial":`), 0o600); err != nil {
		t.Fatal(err)
	}
	ob := open(t, filepath.Join(dir, "outbox.db"), outbox.Options{DeadLetterPath: dead})
	add(t, ob, "sip", ev("a", event.CallEnded, 1))
	items, err := ob.Next(t.Context(), 10)
	if err != nil || len(items) != 1 {
		t.Fatalf("next: %v %d", err, len(items))
	}
	if err := ob.DeadLetter(t.Context(), []int64{items[0].ID}, outbox.Reason{Status: 400, Message: "no"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dead)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != `{"partial":` || !json.Valid([]byte(lines[1])) {
		t.Fatalf("dead-letter file:\n%s", b)
	}
}
