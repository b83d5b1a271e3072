package plugins_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/plugins"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
)

// translatorBin is the test translator (plugins/internal/testtranslator), built by TestMain.
var translatorBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "callwire-plugins-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	translatorBin = filepath.Join(dir, "callwire-translator-test")
	args := []string{"build", "-o", translatorBin}
	if raceEnabled {
		args = append(args, "-race") // shares the build cache with the test binary
		// A race-enabled process sleeps a second before exiting, unless told not to; the
		// translators inherit this environment.
		os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	}
	build := exec.Command("go", append(args, "github.com/callwire/callwire/plugins/internal/testtranslator")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the test translator:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// accepted is one event the recording sink took.
type accepted struct {
	translator string
	event      event.Event
	at         time.Time
}

// recordingSink records what it accepts. When gate is set, each Accept first announces the
// event's sequence on entered and then waits for a token on gate (or its context). refuse, when
// set, may refuse an event.
type recordingSink struct {
	gate    chan struct{}
	entered chan int64
	refuse  func(event.Event) error

	mu     sync.Mutex
	events []accepted
}

func (s *recordingSink) Accept(ctx context.Context, translator string, v event.Valid) error {
	e := *v.Event()
	if s.gate != nil {
		s.entered <- e.Sequence
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.refuse != nil {
		if err := s.refuse(e); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, accepted{translator, e, time.Now()})
	return nil
}

func (s *recordingSink) taken() []accepted {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]accepted(nil), s.events...)
}

func (s *recordingSink) sequences(translator string) []int64 {
	var out []int64
	for _, a := range s.taken() {
		if a.translator == translator {
			out = append(out, a.event.Sequence)
		}
	}
	return out
}

// logBuffer collects the host's JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns every log record so far, decoded.
func (b *logBuffer) records() []map[string]any {
	b.mu.Lock()
	data := append([]byte(nil), b.buf.Bytes()...)
	b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// find returns the records with message msg whose attributes include every pair in attrs
// (compared as text).
func (b *logBuffer) find(msg string, attrs ...any) []map[string]any {
	var out []map[string]any
next:
	for _, r := range b.records() {
		if r["msg"] != msg {
			continue
		}
		for i := 0; i+1 < len(attrs); i += 2 {
			if fmt.Sprint(r[attrs[i].(string)]) != fmt.Sprint(attrs[i+1]) {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// harness runs a Host in the background.
type harness struct {
	host   *plugins.Host
	sink   *recordingSink
	logs   *logBuffer
	cancel context.CancelFunc
	done   chan error
}

// fast are options that keep the tests quick.
func fast(opts plugins.HostOptions) plugins.HostOptions {
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 50 * time.Millisecond
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 200 * time.Millisecond
	}
	if opts.StopGrace == 0 {
		opts.StopGrace = 2 * time.Second
	}
	if opts.HealthInterval == 0 {
		opts.HealthInterval = 100 * time.Millisecond
	}
	return opts
}

// spec is a spec for the test translator with the given configuration.
func spec(name string, config string) plugins.TranslatorSpec {
	return plugins.TranslatorSpec{Name: name, Command: []string{translatorBin}, Config: json.RawMessage(config)}
}

func start(t *testing.T, sink *recordingSink, opts plugins.HostOptions) *harness {
	t.Helper()
	logs := &logBuffer{}
	opts = fast(opts)
	opts.Sink = sink
	opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := plugins.NewHost(opts)
	if err != nil {
		t.Fatalf("NewHost: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	hs := &harness{host: h, sink: sink, logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { hs.done <- h.Run(ctx) }()
	t.Cleanup(func() {
		hs.stop(t)
		if t.Failed() || os.Getenv("DUMPLOG") != "" {
			t.Logf("host log:\n%s", logs)
		}
	})
	return hs
}

// stop cancels the host, waits for Run to return, and checks that every translator process that
// ever ran is gone.
func (hs *harness) stop(t *testing.T) {
	t.Helper()
	hs.cancel()
	select {
	case err := <-hs.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		hs.done <- err // later calls return at once
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	for _, r := range hs.logs.find("run started") {
		pid := int(r["pid"].(float64))
		if alive(pid) {
			t.Errorf("translator process %d is still alive after Run returned", pid)
		}
	}
}

// alive reports whether a process with this pid exists (signal 0 reaches it).
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}

func TestEventsArriveInOrder(t *testing.T) {
	sink := &recordingSink{}
	hs := start(t, sink, plugins.HostOptions{Translators: []plugins.TranslatorSpec{
		spec("alpha", `{"events": 25, "callId": "alpha-1"}`),
		spec("beta", `{"events": 10, "callId": "beta-1"}`),
	}})
	testwait.Until(t, 10*time.Second, "35 events", func() bool { return len(sink.taken()) == 35 })
	for name, n := range map[string]int{"alpha": 25, "beta": 10} {
		got := sink.sequences(name)
		if len(got) != n {
			t.Fatalf("%s: %d events, want %d", name, len(got), n)
		}
		for i, seq := range got {
			if seq != int64(i+1) {
				t.Fatalf("%s: events out of order: %v", name, got)
			}
		}
	}
	for _, a := range sink.taken() {
		if want := a.translator + "-1"; a.event.ProviderCallID != want || a.event.Type != event.CallReceived {
			t.Errorf("event from %s: %+v", a.translator, a.event)
		}
	}
	st := hs.host.Status()
	if len(st) != 2 || st[0].Name != "alpha" || st[1].Name != "beta" {
		t.Fatalf("Status: %+v", st)
	}
	for _, s := range st {
		if !s.Running || s.PID == 0 || s.Restarts != 0 || s.LastError != "" {
			t.Errorf("status of %s: %+v", s.Name, s)
		}
	}
}

func TestEmitReturnsOnlyAfterAccept(t *testing.T) {
	sink := &recordingSink{gate: make(chan struct{}), entered: make(chan int64)}
	hs := start(t, sink, plugins.HostOptions{Translators: []plugins.TranslatorSpec{
		spec("gated", `{"events": 2, "callId": "gated-1"}`),
	}})
	for seq := int64(1); seq <= 2; seq++ {
		select {
		case got := <-sink.entered:
			if got != seq {
				t.Fatalf("sink entered with sequence %d, want %d", got, seq)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("sink never saw event %d", seq)
		}
		// The sink holds the event: the translator must still be inside Emit. Nothing signals
		// that Emit will not return, so the check gives it a while of real time to.
		time.Sleep(300 * time.Millisecond)
		if n := len(hs.logs.find("emitted", "translator", "gated", "seq", seq)); n != 0 {
			t.Fatalf("Emit of event %d returned while the sink still held it", seq)
		}
		select {
		case got := <-sink.entered:
			t.Fatalf("the translator emitted event %d before event %d was taken", got, seq)
		default:
		}
		sink.gate <- struct{}{}
		testwait.Until(t, 5*time.Second, fmt.Sprintf("Emit of event %d to return", seq), func() bool {
			return len(hs.logs.find("emitted", "translator", "gated", "seq", seq)) == 1
		})
	}
}

func TestSinkErrorReachesEmit(t *testing.T) {
	sink := &recordingSink{refuse: func(e event.Event) error {
		if e.Sequence == 2 {
			return errors.New("outbox full: 1000 events waiting")
		}
		return nil
	}}
	hs := start(t, sink, plugins.HostOptions{Translators: []plugins.TranslatorSpec{
		spec("pbx", `{"events": 3, "callId": "pbx-1"}`),
	}})
	testwait.Until(t, 10*time.Second, "the refusal to reach the translator", func() bool {
		return len(hs.logs.find("emit failed", "translator", "pbx", "seq", 2)) == 1
	})
	r := hs.logs.find("emit failed", "translator", "pbx", "seq", 2)[0]
	if !strings.Contains(fmt.Sprint(r["error"]), "outbox full: 1000 events waiting") || r["refused"] != true {
		t.Errorf("the translator's Emit error does not carry the sink's: %v", r)
	}
	if r["level"] != "WARN" {
		t.Errorf("forwarded warning logged at %v", r["level"])
	}
	testwait.Until(t, 5*time.Second, "events 1 and 3", func() bool { return len(sink.taken()) == 2 })
	if got := sink.sequences("pbx"); fmt.Sprint(got) != "[1 3]" {
		t.Errorf("sink took %v, want [1 3]", got)
	}
}

func TestInvalidEventIsRefusedWithProblems(t *testing.T) {
	sink := &recordingSink{}
	hs := start(t, sink, plugins.HostOptions{Translators: []plugins.TranslatorSpec{
		spec("sloppy", `{"events": 3, "callId": "sloppy-1", "invalid": [2]}`),
	}})
	testwait.Until(t, 10*time.Second, "the refusal to reach the translator", func() bool {
		return len(hs.logs.find("emit refused as invalid", "translator", "sloppy", "seq", 2)) == 1
	})
	r := hs.logs.find("emit refused as invalid", "translator", "sloppy", "seq", 2)[0]
	if r["field"] != "call.direction" || !strings.Contains(fmt.Sprint(r["problem"]), "inbound") {
		t.Errorf("the translator did not get the problem: %v", r)
	}
	testwait.Until(t, 5*time.Second, "events 1 and 3", func() bool { return len(sink.taken()) == 2 })
	if got := sink.sequences("sloppy"); fmt.Sprint(got) != "[1 3]" {
		t.Errorf("sink took %v, want [1 3]: an invalid event must never reach it", got)
	}
	if len(hs.logs.find("translator emitted an invalid event; refused", "translator", "sloppy")) != 1 {
		t.Error("the host did not log the invalid event")
	}
}

func TestLogsAreForwardedAndStdoutIsNot(t *testing.T) {
	// Nothing a translator does may reach the agent's own stdout.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = saved }()

	sink := &recordingSink{}
	hs := start(t, sink, plugins.HostOptions{Translators: []plugins.TranslatorSpec{
		spec("chatty", `{"events": 1, "callId": "chatty-1", "logs": ["hello from the translator"], "stdout": "this is not for stdout"}`),
	}})
	testwait.Until(t, 10*time.Second, "the translator's log line", func() bool {
		return len(hs.logs.find("hello from the translator", "translator", "chatty", "level", "INFO")) == 1
	})
	testwait.Until(t, 10*time.Second, "the stdout warning", func() bool {
		return len(hs.logs.find("translator wrote to stdout, which is reserved for the protocol; use log/slog",
			"translator", "chatty", "line", "this is not for stdout", "level", "WARN")) == 1
	})
	if rec := hs.logs.find("hello from the translator")[0]; rec["pid"] == nil {
		t.Errorf("the line lost its attributes: %v", rec)
	}
	hs.stop(t)

	os.Stdout = saved
	w.Close()
	out, _ := io.ReadAll(r)
	if len(out) != 0 {
		t.Errorf("the agent's stdout got %q", out)
	}
}

func TestHealthIsPolled(t *testing.T) {
	sink := &recordingSink{}
	hs := start(t, sink, plugins.HostOptions{Translators: []plugins.TranslatorSpec{
		spec("ill", `{"callId": "ill-1", "unhealthy": "no packets from the PBX for 5m"}`),
		spec("well", `{"callId": "well-1"}`),
	}})
	// The first check may come before Run has read the configuration that makes "ill" ill.
	testwait.Until(t, 10*time.Second, "both health checks", func() bool {
		st := hs.host.Status()
		return st[0].HealthError != "" && !st[1].HealthChecked.IsZero()
	})
	st := hs.host.Status()
	if st[0].Healthy || st[0].HealthError != "no packets from the PBX for 5m" {
		t.Errorf("ill: %+v", st[0])
	}
	if !st[1].Healthy || st[1].HealthError != "" {
		t.Errorf("well: %+v", st[1])
	}
	testwait.Until(t, 5*time.Second, "the unhealthy warning", func() bool {
		return len(hs.logs.find("translator is unhealthy", "translator", "ill", "reason", "no packets from the PBX for 5m")) == 1
	})
	// Polling goes on, but a translator that stays unhealthy is reported once.
	first := st[0].HealthChecked
	testwait.Until(t, 5*time.Second, "a later health check", func() bool { return hs.host.Status()[0].HealthChecked.After(first) })
	if n := len(hs.logs.find("translator is unhealthy")); n != 1 {
		t.Errorf("unhealthy reported %d times", n)
	}
}

// TestHostReadsHealthSoonAfterLaunch: with a health interval far longer than the test, a healthy and
// an unhealthy translator each read as they are soon after their launch. The first check may come
// before Run has read the configuration that makes "ill" ill; the checks that follow it early in
// the run find it so.
func TestHostReadsHealthSoonAfterLaunch(t *testing.T) {
	sink := &recordingSink{}
	hs := start(t, sink, plugins.HostOptions{HealthInterval: time.Hour, Translators: []plugins.TranslatorSpec{
		spec("ill", `{"callId": "ill-1", "unhealthy": "no packets from the PBX for 5m"}`),
		spec("well", `{"callId": "well-1"}`),
	}})
	testwait.Until(t, 10*time.Second, "ill unhealthy and well healthy", func() bool {
		st := hs.host.Status()
		return st[0].Running && st[0].HealthError == "no packets from the PBX for 5m" && !st[0].Healthy &&
			st[1].Running && st[1].Healthy && !st[1].HealthChecked.IsZero()
	})
	testwait.Until(t, 5*time.Second, "the unhealthy warning", func() bool {
		return len(hs.logs.find("translator is unhealthy", "translator", "ill", "reason", "no packets from the PBX for 5m")) == 1
	})
}

// TestHostSeesATranslatorConnect: a translator that answers unhealthy while it connects to its
// phone system (here: until its event is taken) reads healthy soon after it has, without waiting
// for the health interval.
func TestHostSeesATranslatorConnect(t *testing.T) {
	sink := &recordingSink{gate: make(chan struct{}), entered: make(chan int64, 1)}
	hs := start(t, sink, plugins.HostOptions{HealthInterval: time.Hour, Translators: []plugins.TranslatorSpec{
		spec("pbx", `{"events": 1, "callId": "pbx-1", "connecting": "not logged in to the PBX yet"}`),
	}})
	select {
	case <-sink.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the translator emitted nothing")
	}
	testwait.Until(t, 10*time.Second, "the translator read as connecting", func() bool {
		st := hs.host.Status()[0]
		return st.Running && !st.Healthy && st.HealthError == "not logged in to the PBX yet"
	})
	close(sink.gate)
	testwait.Until(t, 10*time.Second, "the translator read as healthy", func() bool {
		st := hs.host.Status()[0]
		return st.Running && st.Healthy && st.HealthError == ""
	})
	testwait.Until(t, 5*time.Second, "the recovery logged", func() bool {
		return len(hs.logs.find("translator is healthy again", "translator", "pbx")) == 1
	})
	if st := hs.host.Status()[0]; st.Restarts != 0 || st.LastError != "" {
		t.Errorf("the translator was restarted: %+v", st)
	}
}

// TestHostReportsStartingUntilTheFirstAnswer: while the first health check of a run has not answered,
// the translator runs and is neither healthy nor unhealthy.
func TestHostReportsStartingUntilTheFirstAnswer(t *testing.T) {
	sink := &recordingSink{}
	hs := start(t, sink, plugins.HostOptions{HealthTimeout: time.Hour, Translators: []plugins.TranslatorSpec{
		{Name: "mute", Command: []string{translatorBin, "-hang-health"}, Config: json.RawMessage(`{"callId": "mute-1"}`)},
	}})
	testwait.Until(t, 10*time.Second, "the run to start", func() bool {
		return len(hs.logs.find("run started", "translator", "mute")) == 1
	})
	st := hs.host.Status()[0]
	if !st.Running || st.Healthy || st.HealthError != "" || !st.HealthChecked.IsZero() {
		t.Errorf("status while the first check waits: %+v", st)
	}
}

func TestCrashedTranslatorIsRestartedWithBackoff(t *testing.T) {
	sink := &recordingSink{}
	min, max := 100*time.Millisecond, 400*time.Millisecond
	hs := start(t, sink, plugins.HostOptions{
		MinBackoff: min, MaxBackoff: max,
		Translators: []plugins.TranslatorSpec{spec("crashy", `{"events": 2, "callId": "crashy-1", "crashAfter": 1}`)},
	})
	// Each run has its first event taken, then exits with status 3.
	testwait.Until(t, 15*time.Second, "five runs", func() bool { return len(sink.taken()) >= 5 })
	runs := sink.taken()[:5]
	want := []time.Duration{min, 2 * min, max, max}
	for i, w := range want {
		// A timer never fires early, so this holds however busy the machine is. How long after
		// the backoff a run really started is load, not the host: the waits the host chose are
		// checked in the log below.
		if gap := runs[i+1].at.Sub(runs[i].at); gap < w {
			t.Errorf("run %d started %s after run %d, before the backoff of %s", i+2, gap, i+1, w)
		}
	}
	ends := hs.logs.find("translator ended; restarting it", "translator", "crashy")
	if len(ends) < len(want) {
		t.Fatalf("%d restarts logged after five runs", len(ends))
	}
	for i, w := range want {
		if got := time.Duration(ends[i]["restart_in"].(float64)); got != w {
			t.Errorf("restart %d waited %s, want %s", i+1, got, w)
		}
	}
	st := hs.host.Status()[0]
	if st.Restarts < 4 {
		t.Errorf("Restarts = %d, want at least 4", st.Restarts)
	}
	if !strings.Contains(st.LastError, "exited") {
		t.Errorf("LastError = %q", st.LastError)
	}
	testwait.Until(t, 5*time.Second, "five crashes logged", func() bool {
		return len(hs.logs.find("crashing on purpose", "translator", "crashy", "level", "WARN")) >= 5
	})
	if len(hs.logs.find("translator ended; restarting it", "translator", "crashy", "restart_in", float64(max.Nanoseconds()))) == 0 {
		t.Error("backoff never reached its maximum")
	}
}

func TestTranslatorThatReturnsIsRestarted(t *testing.T) {
	sink := &recordingSink{}
	hs := start(t, sink, plugins.HostOptions{Translators: []plugins.TranslatorSpec{
		spec("failing", `{"events": 1, "callId": "failing-1", "fail": "lost the PBX"}`),
		spec("quitter", `{"events": 1, "callId": "quitter-1", "exit": true}`),
	}})
	testwait.Until(t, 10*time.Second, "restarts", func() bool {
		st := hs.host.Status()
		return st[0].Restarts >= 2 && st[1].Restarts >= 2
	})
	st := hs.host.Status()
	if !strings.Contains(st[0].LastError, "lost the PBX") {
		t.Errorf("failing: LastError = %q", st[0].LastError)
	}
	if !strings.Contains(st[1].LastError, "without being asked") {
		t.Errorf("quitter: LastError = %q", st[1].LastError)
	}
}

func TestShutdownStopsEveryProcess(t *testing.T) {
	sink := &recordingSink{}
	grace := time.Second
	hs := start(t, sink, plugins.HostOptions{
		StopGrace: grace,
		Translators: []plugins.TranslatorSpec{
			spec("polite", `{"events": 1, "callId": "polite-1", "farewell": true}`),
			spec("stubborn", `{"events": 1, "callId": "stubborn-1", "ignoreStop": true}`),
		},
	})
	testwait.Until(t, 10*time.Second, "both running", func() bool {
		st := hs.host.Status()
		return st[0].Running && st[1].Running && len(sink.taken()) == 2
	})
	var pids []int
	for _, s := range hs.host.Status() {
		pids = append(pids, s.PID)
		if !alive(s.PID) {
			t.Fatalf("%s: pid %d is not alive while running", s.Name, s.PID)
		}
	}
	began := time.Now()
	hs.stop(t)
	took := time.Since(began)
	if took < grace {
		t.Errorf("stopped in %s: the stubborn translator was not given its grace of %s", took, grace)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d is still alive", pid)
		}
	}
	if len(hs.logs.find("asked to stop", "translator", "polite", "reason", "context canceled")) != 1 {
		t.Error("the polite translator's Run was not cancelled")
	}
	// An event emitted while stopping is still taken.
	if got := sink.sequences("polite"); fmt.Sprint(got) != "[1 2]" {
		t.Errorf("polite: sink took %v, want [1 2]", got)
	}
	if len(hs.logs.find("translator did not stop within its grace period; killing it", "translator", "stubborn")) != 1 {
		t.Error("the stubborn translator was not reported as killed")
	}
	for _, s := range hs.host.Status() {
		if s.Running || s.PID != 0 {
			t.Errorf("after Run: %+v", s)
		}
	}
	if err := hs.host.Run(t.Context()); err == nil {
		t.Error("a second Run succeeded")
	}
}

func TestProtocolVersionMismatch(t *testing.T) {
	hs := start(t, &recordingSink{}, plugins.HostOptions{Translators: []plugins.TranslatorSpec{
		{Name: "future", Command: []string{translatorBin, "-protocol", "2"}},
	}})
	testwait.Until(t, 10*time.Second, "the handshake to fail", func() bool { return hs.host.Status()[0].LastError != "" })
	msg := hs.host.Status()[0].LastError
	for _, want := range []string{"protocol version", "agent's 1", "Plugin version: 2"} {
		if !strings.Contains(msg, want) {
			t.Errorf("LastError %q does not say %q", msg, want)
		}
	}
}

// TestMissingExecutableBacksOff checks that a translator that cannot be launched is retried with
// backoff, never in a tight loop. Nothing is ever launched (the executable is not found before
// any process starts), so the host runs in a synctest bubble: its timers run on the bubble's
// clock, and the restarts in a window can be counted exactly however busy the machine is.
func TestMissingExecutableBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := start(t, &recordingSink{}, plugins.HostOptions{
			MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			Translators: []plugins.TranslatorSpec{
				{Name: "gone", Command: []string{"/nonexistent/callwire-translator-gone"}},
				{Name: "uninstalled", Command: plugins.ExternalCommand("surely-not-installed")},
			},
		})
		time.Sleep(700 * time.Millisecond)
		synctest.Wait()
		st := hs.host.Status()
		// Launches at 0, 50, 150, 350 and 550ms (waits of 50, 100, 200, 200ms), the next at 750ms.
		for _, s := range st {
			if s.Restarts != 4 {
				t.Errorf("%s: %d restarts in 700ms with backoff 50ms..200ms, want 4", s.Name, s.Restarts)
			}
			if s.Running {
				t.Errorf("%s: running", s.Name)
			}
		}
		if !strings.Contains(st[0].LastError, "/nonexistent/callwire-translator-gone") || !strings.Contains(st[0].LastError, "no such file") {
			t.Errorf("gone: LastError = %q", st[0].LastError)
		}
		if !strings.Contains(st[1].LastError, "callwire-translator-surely-not-installed") || !strings.Contains(st[1].LastError, "not found") {
			t.Errorf("uninstalled: LastError = %q", st[1].LastError)
		}
	})
}

// TestImpostorBacksOff checks that an executable that is not a translator (it exits without the
// handshake) is reported on one line and restarted with the same backoff. It is a real process,
// so the backoff is read from the restart_in of each restart in the log, not timed; that the host
// waits restart_in is TestMissingExecutableBacksOff's to check.
func TestImpostorBacksOff(t *testing.T) {
	min, max := 50*time.Millisecond, 200*time.Millisecond
	hs := start(t, &recordingSink{}, plugins.HostOptions{
		MinBackoff: min, MaxBackoff: max,
		Translators: []plugins.TranslatorSpec{{Name: "impostor", Command: []string{"/bin/true"}}},
	})
	testwait.Until(t, 15*time.Second, "four restarts", func() bool { return hs.host.Status()[0].Restarts >= 4 })
	st := hs.host.Status()[0]
	if st.Running {
		t.Errorf("impostor: running")
	}
	if !strings.Contains(st.LastError, "/bin/true did not answer the translator handshake") || strings.Contains(st.LastError, "\n") {
		t.Errorf("impostor: LastError = %q", st.LastError)
	}
	var waits []string
	for _, r := range hs.logs.find("translator ended; restarting it", "translator", "impostor")[:4] {
		waits = append(waits, time.Duration(r["restart_in"].(float64)).String())
	}
	if got, want := strings.Join(waits, " "), fmt.Sprint(min, " ", 2*min, " ", max, " ", max); got != want {
		t.Errorf("restarts waited %s, want %s", got, want)
	}
}

func TestBackoffResetsAfterAHealthyRun(t *testing.T) {
	min := 50 * time.Millisecond
	hs := start(t, &recordingSink{}, plugins.HostOptions{
		MinBackoff: min, MaxBackoff: time.Second, ResetAfter: time.Nanosecond, // every run counts as long
		Translators: []plugins.TranslatorSpec{spec("brief", `{"events": 1, "callId": "brief-1", "exit": true}`)},
	})
	testwait.Until(t, 10*time.Second, "restarts", func() bool { return hs.host.Status()[0].Restarts >= 3 })
	ends := hs.logs.find("translator ended; restarting it", "translator", "brief")
	if len(ends) < 3 {
		t.Fatalf("%d restarts logged", len(ends))
	}
	for _, r := range ends {
		if r["restart_in"] != float64(min.Nanoseconds()) {
			t.Errorf("restart_in = %v after a run longer than ResetAfter; want %s", r["restart_in"], min)
		}
	}
}

// TestTranslatorThatKeepsFailingEndsRun: with GiveUpAfter, a translator whose runs keep ending
// soon after their launch ends Host.Run with a *FailingError naming it, its restarts and its last
// error, and every other translator is stopped with it.
func TestTranslatorThatKeepsFailingEndsRun(t *testing.T) {
	sink := &recordingSink{}
	hs := start(t, sink, plugins.HostOptions{
		GiveUpAfter: 3,
		Translators: []plugins.TranslatorSpec{
			spec("steady", `{"events": 1, "callId": "steady-1"}`),
			spec("failing", `{"events": 1, "callId": "failing-1", "fail": "listen udp://0.0.0.0:5060: address already in use"}`),
		},
	})
	var err error
	select {
	case err = <-hs.done:
		hs.done <- nil // stop's own check
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not end although a translator keeps failing")
	}
	var fe *plugins.FailingError
	if !errors.As(err, &fe) {
		t.Fatalf("Run: %v, want a *plugins.FailingError", err)
	}
	if fe.Name != "failing" || fe.Failures != 3 || fe.Restarts != 2 || !strings.Contains(fe.LastError, "address already in use") {
		t.Errorf("FailingError %+v", fe)
	}
	for _, w := range []string{"translator failing keeps failing", "last 3 runs", "(2 restarts)", "last error: translator returned: listen udp://0.0.0.0:5060: address already in use"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	for _, s := range hs.host.Status() {
		if s.Running {
			t.Errorf("%s still runs after Run returned", s.Name)
		}
	}
	if n := len(hs.logs.find("translator keeps failing; giving up", "translator", "failing")); n != 1 {
		t.Errorf("giving up logged %d times", n)
	}
}

// TestLongRunsNeverGiveUp: runs that each last ResetAfter do not count toward GiveUpAfter.
func TestLongRunsNeverGiveUp(t *testing.T) {
	hs := start(t, &recordingSink{}, plugins.HostOptions{
		GiveUpAfter: 2, ResetAfter: time.Nanosecond, // every run counts as long
		Translators: []plugins.TranslatorSpec{spec("brief", `{"events": 1, "callId": "brief-1", "exit": true}`)},
	})
	testwait.Until(t, 10*time.Second, "restarts", func() bool { return hs.host.Status()[0].Restarts >= 4 })
	select {
	case err := <-hs.done:
		t.Fatalf("Run ended: %v", err)
	default:
	}
}

func TestNewHostReportsEveryProblem(t *testing.T) {
	_, err := plugins.NewHost(plugins.HostOptions{
		Translators: []plugins.TranslatorSpec{
			{Name: "", Command: []string{"x"}},
			{Name: "a", Command: []string{"x"}, Config: json.RawMessage(`{"broken"`)},
			{Name: "a"},
		},
		MinBackoff: time.Minute, MaxBackoff: time.Second,
		StopGrace: -1, GiveUpAfter: -1,
	})
	if err == nil {
		t.Fatal("NewHost accepted bad options")
	}
	for _, want := range []string{"no sink", "translator 0 has no name", `"a": config is not valid JSON`,
		`"a" is listed twice`, `"a" has no command`, "MaxBackoff 1s is less than MinBackoff 1m0s", "StopGrace is negative", "GiveUpAfter is negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if _, err := plugins.NewHost(plugins.HostOptions{Sink: &recordingSink{}}); err != nil {
		t.Errorf("NewHost with a sink and nothing else: %v", err)
	}
}

func TestBuiltins(t *testing.T) {
	cmd, err := plugins.BuiltinCommand("sip")
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if len(cmd) != 3 || cmd[0] != exe || cmd[1] != plugins.BuiltinSubcommand || cmd[2] != "sip" {
		t.Errorf("BuiltinCommand = %q", cmd)
	}
	if got := plugins.ExternalCommand("acme"); len(got) != 1 || got[0] != "callwire-translator-acme" {
		t.Errorf("ExternalCommand = %q", got)
	}
	err = plugins.ServeBuiltin("pbx", map[string]translator.Translator{"sip": nil, "acme": nil})
	if err == nil || !strings.Contains(err.Error(), `no built-in translator "pbx" (built in: acme, sip)`) {
		t.Errorf("ServeBuiltin of an unknown name: %v", err)
	}
}

// TestInvalidUTF8CrossesTheProtocol sends a text that is not UTF-8 through each string field of
// the protocol a real translator process can fill, in both directions. proto3 strings must be
// UTF-8, so each arrives with every invalid run of bytes replaced by U+FFFD, and the run it
// crossed in goes on: later events still arrive. The event JSON crosses as bytes and is not
// repaired: an event that is not UTF-8 is refused as invalid, as the core's ingest refuses it.
func TestInvalidUTF8CrossesTheProtocol(t *testing.T) {
	for _, tc := range []struct {
		field  string // the protocol field the text crosses in
		config string // the test translator's; "\\xff\\xfe" there is the two bytes 0xff 0xfe
		refuse func(event.Event) error
		check  func(t *testing.T, hs *harness)
	}{
		{
			field:  "Done.error, translator to host",
			config: `{"events": 1, "callId": "done-1", "fail": "\\xff\\xfe lost the PBX"}`,
			check: func(t *testing.T, hs *harness) {
				testwait.Until(t, 10*time.Second, "the event of a restarted run", func() bool { return len(hs.sink.taken()) >= 2 })
				if got, want := hs.host.Status()[0].LastError, "translator returned: \uFFFD lost the PBX"; got != want {
					t.Errorf("LastError = %q, want %q", got, want)
				}
			},
		},
		{
			field:  "HealthResponse.error, translator to host",
			config: `{"events": 1, "callId": "ill-1", "unhealthy": "\\xff\\xfe no packets", "afterIll": 2}`,
			check: func(t *testing.T, hs *harness) {
				testwait.Until(t, 10*time.Second, "the events emitted after the health check", func() bool {
					return len(hs.sink.taken()) == 3 && hs.host.Status()[0].HealthError != ""
				})
				st := hs.host.Status()[0]
				if want := "\uFFFD no packets"; st.HealthError != want || st.Healthy {
					t.Errorf("Healthy = %v, HealthError = %q; want false, %q", st.Healthy, st.HealthError, want)
				}
				if st.Restarts != 0 {
					t.Errorf("Restarts = %d: the run did not survive the health check", st.Restarts)
				}
			},
		},
		{
			field:  "Ack.error, host to translator",
			config: `{"events": 3, "callId": "ack-1"}`,
			refuse: func(e event.Event) error {
				if e.Sequence == 2 {
					return errors.New("\xff\xfe outbox full")
				}
				return nil
			},
			check: func(t *testing.T, hs *harness) {
				testwait.Until(t, 10*time.Second, "the refusal to reach the translator", func() bool {
					return len(hs.logs.find("emit failed", "seq", 2)) > 0
				})
				r := hs.logs.find("emit failed", "seq", 2)[0]
				if want := "agent refused the event: \uFFFD outbox full"; r["error"] != want || r["refused"] != true {
					t.Errorf("the translator's Emit got %q (refused: %v), want %q (refused: true)", r["error"], r["refused"], want)
				}
				testwait.Until(t, 10*time.Second, "event 3", func() bool { return len(hs.sink.taken()) >= 2 })
				if got := hs.sink.sequences("t"); fmt.Sprint(got) != "[1 3]" {
					t.Errorf("sink took %v, want [1 3]", got)
				}
				if st := hs.host.Status()[0]; st.Restarts != 0 {
					t.Errorf("Restarts = %d (%s): the run did not survive the refusal", st.Restarts, st.LastError)
				}
			},
		},
		{
			field:  "Event.json (bytes), translator to host",
			config: `{"events": 3, "callId": "raw-1", "rawBad": [2]}`,
			check: func(t *testing.T, hs *harness) {
				testwait.Until(t, 10*time.Second, "the refusal to reach the translator", func() bool {
					return len(hs.logs.find("emit refused as invalid", "seq", 2)) > 0
				})
				r := hs.logs.find("emit refused as invalid", "seq", 2)[0]
				if r["field"] != "body" || r["problem"] != "is not valid UTF-8" {
					t.Errorf("the translator got %v: %v, want body: is not valid UTF-8", r["field"], r["problem"])
				}
				testwait.Until(t, 10*time.Second, "event 3", func() bool { return len(hs.sink.taken()) >= 2 })
				if got := hs.sink.sequences("t"); fmt.Sprint(got) != "[1 3]" {
					t.Errorf("sink took %v, want [1 3]", got)
				}
				if st := hs.host.Status()[0]; st.Restarts != 0 {
					t.Errorf("Restarts = %d (%s): the run did not survive the refusal", st.Restarts, st.LastError)
				}
			},
		},
	} {
		t.Run(tc.field, func(t *testing.T) {
			sink := &recordingSink{refuse: tc.refuse}
			hs := start(t, sink, plugins.HostOptions{Translators: []plugins.TranslatorSpec{spec("t", tc.config)}})
			tc.check(t, hs)
		})
	}
}
