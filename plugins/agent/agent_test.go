package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/plugins/agent"
	"github.com/callwire/callwire/sdk"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/outbox"
	"github.com/callwire/callwire/sdk/sdktest"
)

// helperEnv, when set, makes the test binary an agent process: it adds events forever while
// sending them, until it is killed. Its value is "<outbox path> <core URL>".
const helperEnv = "CALLWIRE_AGENT_KILL_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		path, core, _ := strings.Cut(v, " ")
		killHelper(path, core)
		return
	}
	code := m.Run()
	removeTestTranslator()
	os.Exit(code)
}

func killHelper(path, core string) {
	ctx := context.Background()
	ob, err := outbox.Open(ctx, path, outbox.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	cl, err := sdk.New(core, sdktestCredential(), sdk.Options{MaxAttempts: 1})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	a, err := agent.New(agent.Options{Outbox: ob, Client: cl, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	go a.Run(ctx)
	for i := 0; ; i++ {
		v, err := event.Check(ring(i))
		if err == nil {
			err = a.Accept(ctx, "sip", v)
		}
		if err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		fmt.Println("ok", i)
	}
}

// sdktestCredential is the key the fake server accepts.
func sdktestCredential() sdk.Credential {
	return sdk.Credential{ClientID: "cwid_sdktest", Secret: "cwsk_sdktest"}
}

var at = time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)

func ev(call string, t event.Type, seq int64) event.Event {
	e := event.New(t, call, at.Add(time.Duration(seq)*time.Second), event.Call{Direction: event.Inbound, From: event.E164("+442071234567")})
	e.Sequence = seq
	return e
}

// ring returns call i's call_received and (for odd i) a tail event, alternating, so a stream of
// them mixes rings and batches.
func ring(i int) event.Event {
	call := "k" + strconv.Itoa(i/2)
	if i%2 == 0 {
		return ev(call, event.CallReceived, 1)
	}
	return ev(call, event.CallEnded, 2)
}

// front is a reverse proxy in front of the fake server: it records each request's time, body
// and status, can refuse bodies naming a call with 400, can answer slowly, and can be stopped
// and started again at the same address (an outage).
type front struct {
	t      *testing.T
	target *url.URL
	addr   string
	URL    string
	delay  time.Duration

	mu       sync.Mutex
	srv      *http.Server
	reqs     []frontReq
	badCalls map[string]bool
}

type frontReq struct {
	arrived time.Time // when the request arrived
	at      time.Time // when it was answered
	body    []byte
	status  int
}

func newFront(t *testing.T, target string, delay time.Duration) *front {
	u, _ := url.Parse(target)
	f := &front{t: t, target: u, addr: "127.0.0.1:0", delay: delay, badCalls: map[string]bool{}}
	f.start()
	t.Cleanup(f.stop)
	return f
}

func (f *front) start() {
	f.t.Helper()
	var ln net.Listener
	var err error
	// The port of a front that was stopped may take a moment to be free again.
	if !testwait.Poll(time.Second, func() bool { ln, err = net.Listen("tcp", f.addr); return err == nil }) {
		f.t.Fatalf("front: %v", err)
	}
	f.addr = ln.Addr().String()
	f.URL = "http://" + f.addr
	proxy := httputil.NewSingleHostReverseProxy(f.target)
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		time.Sleep(f.delay) // a slow network or core: the delay is what the test asks for
		f.mu.Lock()
		bad := ""
		for c := range f.badCalls {
			if bytes.Contains(body, []byte(`"providerCallId":"`+c+`"`)) {
				bad = c
			}
		}
		n := len(f.reqs) + 1
		f.mu.Unlock()
		if bad != "" {
			rec.Header().Set("X-Trace-ID", "front-"+strconv.Itoa(n))
			rec.Header().Set("Content-Type", "application/json")
			rec.WriteHeader(400)
			json.NewEncoder(rec).Encode(map[string]any{"success": false, "error": "400 Bad Request",
				"message": "providerCallId: " + bad + " is refused"})
		} else {
			proxy.ServeHTTP(rec, r)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, frontReq{arrived: arrived, at: time.Now(), body: body, status: rec.status})
		f.mu.Unlock()
	})}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go srv.Serve(ln)
}

// refuse makes the front answer 400 to any body naming call.
func (f *front) refuse(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.badCalls[call] = true
}

func (f *front) stop() {
	f.mu.Lock()
	srv := f.srv
	f.mu.Unlock()
	srv.Close()
}

func (f *front) requests() []frontReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]frontReq(nil), f.reqs...)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(s int) { r.status = s; r.ResponseWriter.WriteHeader(s) }

// rig is an agent over a fresh outbox, running until the test ends.
type rig struct {
	ob   *outbox.Outbox
	a    *agent.Agent
	dead string
	stop func()
}

// newRig starts an agent over the outbox in dir, sending to core with cred; pre are stored
// before it starts.
func newRig(t *testing.T, dir, core string, cred sdk.Credential, workers int, pre ...event.Event) *rig {
	t.Helper()
	cl, err := sdk.New(core, cred, sdk.Options{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return newRigClient(t, dir, cl, workers, pre...)
}

// newRigClient is newRig with the agent sending through cl.
func newRigClient(t *testing.T, dir string, cl *sdk.Client, workers int, pre ...event.Event) *rig {
	t.Helper()
	dead := filepath.Join(dir, "dead.jsonl")
	ob, err := outbox.Open(t.Context(), filepath.Join(dir, "outbox.db"), outbox.Options{DeadLetterPath: dead})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range pre {
		if err := ob.Add(t.Context(), "sip", e); err != nil {
			t.Fatal(err)
		}
	}
	a, err := agent.New(agent.Options{Outbox: ob, Client: cl, Workers: workers, MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	var once sync.Once
	r := &rig{ob: ob, a: a, dead: dead, stop: func() {
		once.Do(func() { cancel(); <-done; ob.Close() })
	}}
	t.Cleanup(r.stop)
	return r
}

func (r *rig) accept(t *testing.T, evs ...event.Event) {
	t.Helper()
	for _, e := range evs {
		v, err := event.Check(e)
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		if err := r.a.Accept(t.Context(), "sip", v); err != nil {
			t.Fatalf("accept: %v", err)
		}
	}
}

func (r *rig) status(t *testing.T) agent.Status {
	t.Helper()
	st, err := r.a.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (r *rig) drained(t *testing.T) func() bool {
	return func() bool { return r.status(t).Queued == 0 }
}

// key names an event for comparisons.
func key(e event.Event) string {
	return e.ProviderCallID + "/" + string(e.Type) + "/" + strconv.FormatInt(e.Sequence, 10)
}

func TestOrderPerCallAndBatching(t *testing.T) {
	fake := sdktest.NewServer(t)
	f := newFront(t, fake.URL, 2*time.Millisecond)
	var added []event.Event
	for i := range 160 {
		call := "c" + strconv.Itoa(i%8)
		seq := int64(i/8 + 1)
		typ := event.CallHold
		if seq == 1 {
			typ = event.CallReceived
		}
		e := ev(call, typ, seq)
		added = append(added, e)
	}
	for i := range 70 {
		added = append(added, ev("tail"+strconv.Itoa(i), event.CallEnded, 3))
	}
	r := newRig(t, t.TempDir(), f.URL, fake.Credential(), 3)
	r.accept(t, added...)
	testwait.Until(t, 10*time.Second, "the outbox to drain", r.drained(t))

	got := fake.Events()
	if len(got) != len(added) {
		t.Fatalf("server has %d events, want %d", len(got), len(added))
	}
	perCall := func(evs []event.Event) map[string][]string {
		m := map[string][]string{}
		for _, e := range evs {
			m[e.ProviderCallID] = append(m[e.ProviderCallID], key(e))
		}
		return m
	}
	want := perCall(added)
	for call, keys := range perCall(got) {
		if strings.Join(keys, " ") != strings.Join(want[call], " ") {
			t.Errorf("call %s arrived as %v, want %v", call, keys, want[call])
		}
	}
	batches := 0
	for _, rq := range f.requests() {
		parsed, isBatch, err := event.ParseBody(rq.body)
		if err != nil {
			t.Fatalf("request body: %v", err)
		}
		if len(parsed) > event.MaxBatch {
			t.Errorf("a request carried %d events", len(parsed))
		}
		if isBatch {
			batches++
		}
		for _, p := range parsed {
			if p.Event.Type == event.CallReceived && len(parsed) != 1 {
				t.Errorf("call_received sent in a batch of %d", len(parsed))
			}
		}
	}
	if batches == 0 {
		t.Error("tail events were never batched")
	}
	// Every stored body went out byte for byte.
	bodies := map[string]bool{}
	for _, b := range fake.Bodies() {
		bodies[string(b)] = true
	}
	for _, e := range added {
		b, _ := json.Marshal(e)
		if !bodies[string(b)] {
			t.Fatalf("the server did not receive the stored bytes of %s", key(e))
		}
	}
	st := r.status(t)
	if s := st.Translators["sip"]; s.Sent != int64(len(added)) || s.Accepted != int64(len(added)) || s.Queued != 0 {
		t.Errorf("status %+v", s)
	}
}

// TestRetryAfterIsHonoured runs in a synctest bubble, the agent's requests answered in process
// by a core that asks the first one to retry after two seconds: the bubble's clock moves only
// when every goroutine waits, so the pause is measured exactly however busy the machine is.
func TestRetryAfterIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core := &pausingCore{retryAfter: "2"}
		cl, err := sdk.New("http://callwire.invalid", sdktestCredential(), sdk.Options{MaxAttempts: 1,
			HTTPClient: &http.Client{Transport: sdktest.InProcess(core)}})
		if err != nil {
			t.Fatal(err)
		}
		r := newRigClient(t, t.TempDir(), cl, 2)
		r.accept(t, ev("a", event.CallReceived, 1), ev("b", event.CallEnded, 1))
		testwait.Until(t, 10*time.Second, "the outbox to drain", r.drained(t))
		// Two workers send a and b at once; either may be the one refused.
		reqs := core.requests()
		refused := slices.IndexFunc(reqs, func(r frontReq) bool { return r.status == 503 })
		if len(reqs) < 3 || refused < 0 {
			t.Fatalf("requests %+v", reqs)
		}
		r503 := reqs[refused]
		// The refused request was sent again no sooner than asked.
		var retry *frontReq
		for i := refused + 1; i < len(reqs); i++ {
			if bytes.Equal(reqs[i].body, r503.body) {
				retry = &reqs[i]
				break
			}
		}
		if retry == nil {
			t.Fatal("the refused request was never sent again")
		}
		if gap := retry.arrived.Sub(r503.at); gap < 2*time.Second {
			t.Fatalf("the refused request came again %v after a 503 with Retry-After: 2", gap)
		}
		// And no other worker started a request in that pause either (one already on its way
		// when the 503 was answered may arrive just after it).
		for _, rq := range reqs {
			if gap := rq.arrived.Sub(r503.at); gap > 100*time.Millisecond && gap < 2*time.Second {
				t.Fatalf("a request came %v after a 503 with Retry-After: 2", gap)
			}
		}
		t.Logf("resent %v after the 503", retry.arrived.Sub(r503.at))
		if s := r.status(t).Translators["sip"]; s.Retried < 1 || s.Sent != 2 {
			t.Errorf("status %+v", s)
		}
	})
}

// pausingCore answers the first request 503 with Retry-After, and every other one with a
// success body, recording each as a front does.
type pausingCore struct {
	retryAfter string

	mu   sync.Mutex
	reqs []frontReq
}

func (c *pausingCore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	status := http.StatusOK
	w.Header().Set("Content-Type", "application/json")
	if len(c.reqs) == 0 {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", c.retryAfter)
		w.WriteHeader(status)
		io.WriteString(w, `{"success":false,"error":"503 Service Unavailable","message":"busy, come back later"}`)
	} else {
		io.WriteString(w, `{"success":true,"calls":[],"events":[]}`)
	}
	c.reqs = append(c.reqs, frontReq{arrived: arrived, at: time.Now(), body: body, status: status})
}

func (c *pausingCore) requests() []frontReq {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]frontReq(nil), c.reqs...)
}

type deadLine struct {
	Translator string          `json:"translator"`
	Status     int             `json:"status"`
	Error      string          `json:"error"`
	Message    string          `json:"message"`
	TraceID    string          `json:"traceId"`
	Event      json.RawMessage `json:"event"`
}

func readDead(t *testing.T, path string) []deadLine {
	t.Helper()
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []deadLine
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var d deadLine
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("dead-letter line %q: %v", line, err)
		}
		out = append(out, d)
	}
	return out
}

func TestBadRequestGoesToDeadLetterFile(t *testing.T) {
	fake := sdktest.NewServer(t)
	f := newFront(t, fake.URL, 0)
	f.refuse("bad")
	// One batch of three tail events, the middle one refused: a batch is all or nothing, so the
	// agent sends them one by one and dead-letters only the bad one.
	r := newRig(t, t.TempDir(), f.URL, fake.Credential(), 1,
		ev("good1", event.CallEnded, 2), ev("bad", event.CallEnded, 2), ev("good2", event.CallEnded, 2))
	testwait.Until(t, 10*time.Second, "the outbox to drain", r.drained(t))
	var got []string
	for _, e := range fake.Events() {
		got = append(got, e.ProviderCallID)
	}
	if strings.Join(got, " ") != "good1 good2" {
		t.Fatalf("server has %v", got)
	}
	dead := readDead(t, r.dead)
	if len(dead) != 1 {
		t.Fatalf("dead letters %+v", dead)
	}
	d := dead[0]
	var e event.Event
	json.Unmarshal(d.Event, &e)
	if d.Status != 400 || d.Message != "providerCallId: bad is refused" || !strings.HasPrefix(d.TraceID, "front-") ||
		e.ProviderCallID != "bad" || d.Translator != "sip" || d.Error != "400 Bad Request" {
		t.Fatalf("dead letter %+v", d)
	}
	st := r.status(t)
	if s := st.Translators["sip"]; s.DeadLettered != 1 || s.Sent != 2 || st.DeadLetterTotal != 1 {
		t.Fatalf("status %+v", st)
	}
	if reqs := f.requests(); len(reqs) != 4 {
		t.Errorf("%d requests, want 4 (the batch, then each alone)", len(reqs))
	}

	// The fake server's own 400 too: message and trace id reach the file.
	fake.FailNext(1, 400, 0)
	r.accept(t, ev("x", event.CallEnded, 1))
	testwait.Until(t, 10*time.Second, "the outbox to drain", r.drained(t))
	dead = readDead(t, r.dead)
	if len(dead) != 2 || dead[1].Message != "failing as told" || !strings.HasPrefix(dead[1].TraceID, "sdktest-") {
		t.Fatalf("dead letters %+v", dead)
	}
}

func TestUnauthorizedKeepsEvents(t *testing.T) {
	fake := sdktest.NewServer(t)
	dir := t.TempDir()
	r := newRig(t, dir, fake.URL, sdk.Credential{ClientID: "cwid_sdktest", Secret: "wrong"}, 2)
	r.accept(t, ev("a", event.CallReceived, 1), ev("a", event.CallEnded, 2))
	testwait.Until(t, 10*time.Second, "a few refused attempts", func() bool {
		return r.status(t).Translators["sip"].Retried >= 6
	})
	st := r.status(t)
	if st.Queued != 2 || st.DeadLetterTotal != 0 || st.Translators["sip"].Sent != 0 || len(fake.Events()) != 0 {
		t.Fatalf("after 401s: %+v", st)
	}
	if _, err := os.Stat(r.dead); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a 401 wrote a dead letter")
	}
	r.stop()
	// The credential is fixed: a new agent on the same outbox delivers everything.
	r2 := newRig(t, dir, fake.URL, fake.Credential(), 2)
	testwait.Until(t, 10*time.Second, "the outbox to drain", r2.drained(t))
	if n := len(fake.Events()); n != 2 {
		t.Fatalf("server has %d events", n)
	}
}

func TestOutageThenDrain(t *testing.T) {
	fake := sdktest.NewServer(t)
	f := newFront(t, fake.URL, 0)
	f.stop() // the core is down: connections are refused
	r := newRig(t, t.TempDir(), f.URL, fake.Credential(), 2)
	var added []event.Event
	for i := range 60 {
		added = append(added, ev("o"+strconv.Itoa(i%5), event.CallHold, int64(i/5+1)))
	}
	r.accept(t, added...)
	testwait.Until(t, 10*time.Second, "attempts during the outage", func() bool {
		return r.status(t).Translators["sip"].Retried >= 100
	})
	// Many 503s from a core that answers but is overloaded, then it comes back at the same address.
	fake.FailNext(5, 503, 0)
	f.start()
	testwait.Until(t, 10*time.Second, "the outbox to drain", r.drained(t))
	got := fake.Events()
	if len(got) != len(added) {
		t.Fatalf("server has %d events, want %d", len(got), len(added))
	}
	last := map[string]int64{}
	for _, e := range got {
		if e.Sequence <= last[e.ProviderCallID] {
			t.Fatalf("call %s: sequence %d after %d", e.ProviderCallID, e.Sequence, last[e.ProviderCallID])
		}
		last[e.ProviderCallID] = e.Sequence
	}
}

func TestKill9ThenRestartDeliversEverythingOnce(t *testing.T) {
	fake := sdktest.NewServer(t)
	f := newFront(t, fake.URL, 5*time.Millisecond)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+filepath.Join(dir, "outbox.db")+" "+f.URL)
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
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || fields[0] != "ok" {
			cmd.Process.Kill()
			t.Fatalf("helper: %s", sc.Text())
		}
		acked, _ = strconv.Atoi(fields[1])
		if acked >= 400 && len(f.requests()) >= 5 {
			break
		}
	}
	cmd.Process.Kill() // kill -9 while adding and sending
	cmd.Wait()
	before := len(fake.Events())
	r := newRig(t, dir, f.URL, fake.Credential(), 2)
	testwait.Until(t, 20*time.Second, "the outbox to drain", r.drained(t))
	seen := map[string]int{}
	for _, e := range fake.Events() {
		seen[key(e)]++
	}
	for i := 0; i <= acked; i++ {
		if k := key(ring(i)); seen[k] != 1 {
			t.Fatalf("event %s accepted before kill -9 is at the server %d times", k, seen[k])
		}
	}
	t.Logf("%d events accepted before kill -9, %d at the server then, %d after the restart drained (%d requests)",
		acked+1, before, len(fake.Events()), fake.Requests())
}

// TestRefusalNotFromTheCoreKeepsEvents: a 400 that is not callwire's failure body (a proxy in
// front of the core, a wrong core.url) says nothing about the events: they are kept and retried,
// never dead-lettered.
func TestRefusalNotFromTheCoreKeepsEvents(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "<html><body>400 The plain HTTP request was sent to HTTPS port</body></html>")
	}))
	t.Cleanup(proxy.Close)
	r := newRig(t, t.TempDir(), proxy.URL, sdk.Credential{ClientID: "cwid_sdktest", Secret: "cwsk_sdktest"}, 2)
	r.accept(t, ev("a", event.CallReceived, 1), ev("a", event.CallEnded, 2))
	testwait.Until(t, 10*time.Second, "a few refused attempts", func() bool {
		return r.status(t).Translators["sip"].Retried >= 4
	})
	if st := r.status(t); st.Queued != 2 || st.DeadLetterTotal != 0 {
		t.Fatalf("after a proxy's 400s: %+v", st)
	}
	if _, err := os.Stat(r.dead); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a proxy's 400 wrote a dead letter")
	}
}
