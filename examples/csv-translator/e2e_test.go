package main_test

// End-to-end tests of the example translator with real processes: a real `callwire serve` on the
// embedded store, a real `callwire agent` that runs the example as its child, and the faults an
// agent meets in a clinic: a translator killed, the network cut, the core down, the agent killed
// with events queued, and a core asking for a pause with Retry-After.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/sdktest"
)

// The binaries built once by TestMain: callwire, and the example as callwire-translator-csv.
var callwireBin, translatorBin string

// provider is what the example files its calls under by default.
const provider = "csvlog"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "callwire-csv-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	callwireBin = filepath.Join(dir, "callwire")
	translatorBin = filepath.Join(dir, "callwire-translator-csv")
	for _, b := range [][]string{{callwireBin, "github.com/callwire/callwire/cmd/callwire"}, {translatorBin, "."}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b[1], err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logBuffer collects a child's stderr for the test to read and to show on failure; each complete
// line is also handed to onLine.
type logBuffer struct {
	mu     sync.Mutex
	all    bytes.Buffer
	part   []byte
	onLine func(line string)
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.all.Write(p)
	b.part = append(b.part, p...)
	for {
		i := bytes.IndexByte(b.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		if b.onLine != nil {
			b.onLine(string(b.part[:i]))
		}
		b.part = b.part[i+1:]
	}
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.all.String()
	if len(s) > 20000 {
		s = "…" + s[len(s)-20000:]
	}
	return s
}

// child is a running process of the test's and what it wrote to stderr.
type child struct {
	cmd  *exec.Cmd
	log  *logBuffer
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // Wait's result, set before done is closed
}

func startChild(t *testing.T, dir string, log *logBuffer, name string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	c := &child{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.signal(syscall.SIGKILL)
		<-c.done
		if t.Failed() {
			t.Logf("%s %s stderr:\n%s", filepath.Base(name), strings.Join(args, " "), log.String())
		}
	})
	return c
}

func (c *child) signal(s syscall.Signal) {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(s)
	}
}

// stop sends s and waits for the process to exit.
func (c *child) stop(t *testing.T, s syscall.Signal) error {
	t.Helper()
	c.signal(s)
	select {
	case <-c.done:
		return c.err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not exit on %v\n%s", c.cmd.Path, s, c.log.String())
		return nil
	}
}

// eventually polls cond every 20ms until it holds, failing the test after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// core is a `callwire serve` on the embedded store in dir, on a fixed address so that it can be
// stopped and started again.
type core struct {
	t    *testing.T
	dir  string
	addr string
	proc *child
	org  string
	id   string
	key  string
}

func newCore(t *testing.T) *core {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &core{t: t, dir: t.TempDir(), addr: ln.Addr().String()}
	ln.Close()
	c.start()
	c.org = strings.TrimSpace(c.cli("orgs", "create", "--name", "Riverside Clinic"))
	var k struct{ ClientID, ClientSecret string }
	if err := json.Unmarshal([]byte(c.cli("keys", "create", "--org", c.org, "--scope", "org.calls.events", "--output", "json")), &k); err != nil {
		t.Fatal(err)
	}
	c.id, c.key = k.ClientID, k.ClientSecret
	return c
}

func (c *core) url() string { return "http://" + c.addr }

func (c *core) start() {
	c.t.Helper()
	c.proc = startChild(c.t, c.dir, &logBuffer{}, callwireBin, "serve", "--listen", c.addr)
	eventually(c.t, 20*time.Second, "callwire serve to answer /healthz", func() bool {
		resp, err := http.Get(c.url() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// stop ends the server with SIGTERM, as an operator would, and checks it stopped cleanly.
func (c *core) stop() {
	c.t.Helper()
	if err := c.proc.stop(c.t, syscall.SIGTERM); err != nil {
		c.t.Errorf("callwire serve exited with %v", err)
	}
}

func (c *core) cli(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(callwireBin, args...)
	cmd.Dir = c.dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.dir}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("callwire %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return string(out)
}

// openStore opens the server's store from the test, beside the running server.
func (c *core) openStore() store.Store {
	c.t.Helper()
	db := config.Defaults().Database
	db.Path, db.AutoMigrate = filepath.Join(c.dir, "data", "callwire.db"), false
	st, err := server.OpenStore(c.t.Context(), db)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { st.Close() })
	return st
}

// agent is a running `callwire agent` and what its log said.
type agent struct {
	proc *child

	mu          sync.Mutex
	metricsAddr string
	pids        []int // the translator processes it started, in order
}

// writeAgentConfig writes agent.yaml in dir for a core at coreURL and returns its path. The
// outbox, the CSV log and the translator's state all live in dir.
func writeAgentConfig(t *testing.T, dir, coreURL, clientID, secret string) string {
	t.Helper()
	yaml := fmt.Sprintf(`core:
  url: %s
  client_id: %s
  secret_file: %[3]s/agent-secret
outbox:
  path: %[3]s/outbox.db
  dead_letter: %[3]s/dead-letter.jsonl
delivery:
  min_backoff: 100ms
  max_backoff: 500ms
  request_timeout: 5s
  shutdown_timeout: 2s
metrics:
  listen: 127.0.0.1:0
log:
  format: json
translators:
  - name: csv
    path: %[4]s
    config:
      path: %[3]s/calls.csv
      state: %[3]s/calls.state
      poll: 20ms
`, coreURL, clientID, dir, translatorBin)
	if err := os.WriteFile(filepath.Join(dir, "agent-secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startAgent runs `callwire agent --config <dir>/agent.yaml` and waits until its metrics listen
// and its translator has started.
func startAgent(t *testing.T, dir string) *agent {
	t.Helper()
	a := &agent{}
	log := &logBuffer{onLine: func(line string) {
		var l struct {
			Msg     string `json:"msg"`
			Metrics string `json:"metrics"`
			PID     int    `json:"pid"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		switch l.Msg {
		case "callwire agent starting":
			a.metricsAddr = l.Metrics
		case "translator started":
			a.pids = append(a.pids, l.PID)
		}
	}}
	t.Cleanup(func() { noOrphans(t) }) // runs after startChild's cleanup has killed the agent
	a.proc = startChild(t, dir, log, callwireBin, "agent", "--config", filepath.Join(dir, "agent.yaml"))
	eventually(t, 20*time.Second, "the agent and its translator to start", func() bool { return len(a.translatorPIDs()) > 0 })
	return a
}

func (a *agent) translatorPIDs() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.pids)
}

// metric returns the sum of the agent's samples of the metric called name (0 when it has none).
func (a *agent) metric(t *testing.T, name string) float64 {
	t.Helper()
	a.mu.Lock()
	addr := a.metricsAddr
	a.mu.Unlock()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("agent metrics: %v", err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == name || !strings.HasPrefix(line, name) || (line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// noOrphans fails the test if a translator process outlives its agent.
func noOrphans(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, "no csv translator process to remain", func() bool {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return true // not Linux: nothing to look at
		}
		for _, e := range entries {
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.HasPrefix(cmdline, []byte(translatorBin+"\x00")) {
				return false
			}
		}
		return true
	})
}

// callLog writes the CSV call log: four moments per call.
type callLog struct {
	t     *testing.T
	path  string
	calls []string // the call ids written so far
}

func newCallLog(t *testing.T, dir string) *callLog {
	l := &callLog{t: t, path: filepath.Join(dir, "calls.csv")}
	l.write("time,call_id,type,direction,from,to,sequence,detail\n")
	return l
}

// wantKeys returns the dedupe keys each call's events are filed under, in order.
func wantKeys() []string {
	return []string{"call_received:0", "call_answered:1", "call_hold:2", "call_ended:3"}
}

func (l *callLog) write(s string) error {
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Close())
}

// addCall appends the four lines of one more call; the call's id is returned.
func (l *callLog) addCall() (string, error) {
	n := len(l.calls)
	id := fmt.Sprintf("%s-%03d", strings.ReplaceAll(l.t.Name(), "/", "-"), n)
	at := time.Now().UTC().Truncate(time.Millisecond)
	from := fmt.Sprintf("+4420712%05d", n)
	var b strings.Builder
	fmt.Fprintf(&b, "%s,%s,call_received,inbound,%s,101,0\n", at.Format(time.RFC3339Nano), id, from)
	fmt.Fprintf(&b, "%s,%s,call_answered,inbound,%s,101,1,102\n", at.Add(3*time.Second).Format(time.RFC3339Nano), id, from)
	fmt.Fprintf(&b, "%s,%s,call_hold,inbound,%s,101,2\n", at.Add(9*time.Second).Format(time.RFC3339Nano), id, from)
	fmt.Fprintf(&b, "%s,%s,call_ended,inbound,%s,101,3,answered\n", at.Add(40*time.Second).Format(time.RFC3339Nano), id, from)
	if err := l.write(b.String()); err != nil {
		return "", err
	}
	l.calls = append(l.calls, id)
	return id, nil
}

func (l *callLog) add(n int) {
	l.t.Helper()
	for range n {
		if _, err := l.addCall(); err != nil {
			l.t.Fatal(err)
		}
	}
}

// feed appends n calls, one every interval, in the background, and returns a function that
// waits for it to finish. The test must not touch l until then.
func (l *callLog) feed(n int, interval time.Duration) (wait func()) {
	done := make(chan error, 1)
	go func() {
		for range n {
			if _, err := l.addCall(); err != nil {
				done <- err
				return
			}
			time.Sleep(interval)
		}
		done <- nil
	}()
	return func() {
		l.t.Helper()
		if err := <-done; err != nil {
			l.t.Fatalf("writing the call log: %v", err)
		}
	}
}

// landed reports how many of the calls have all four events on file.
func landed(t *testing.T, st store.Store, org string, calls []string) int {
	t.Helper()
	n := 0
	for _, id := range calls {
		_, evs, err := st.GetCall(t.Context(), org, provider, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get call %s: %v", id, err)
		}
		if len(evs) >= len(wantKeys()) {
			n++
		}
	}
	return n
}

// exactlyOnce waits until every call of the log is on file, then checks that each has exactly
// its four events, each once, and that the outbox is empty.
func exactlyOnce(t *testing.T, c *core, a *agent, l *callLog) {
	t.Helper()
	st := c.openStore()
	eventually(t, 30*time.Second, fmt.Sprintf("all %d calls to land at the core", len(l.calls)), func() bool {
		return landed(t, st, c.org, l.calls) == len(l.calls)
	})
	for _, id := range l.calls {
		call, evs, err := st.GetCall(t.Context(), c.org, provider, id)
		if err != nil {
			t.Fatalf("get call %s: %v", id, err)
		}
		var keys []string
		for _, e := range evs {
			keys = append(keys, e.DedupeKey)
		}
		if !slices.Equal(keys, wantKeys()) {
			t.Errorf("call %s (%s) has events %v, want each of %v once", id, call.ID, keys, wantKeys())
		}
	}
	eventually(t, 10*time.Second, "the outbox to be empty", func() bool {
		return a.metric(t, "callwire_agent_outbox_events") == 0
	})
}

// TestAgentRunsTheExample: the agent launches the example as its child process, and every line
// of the call log, those written before it started and those appended while it runs, lands at a
// real core once. SIGTERM stops the agent cleanly, translator included.
func TestAgentRunsTheExample(t *testing.T) {
	c := newCore(t)
	dir := t.TempDir()
	l := newCallLog(t, dir)
	l.add(20)
	writeAgentConfig(t, dir, c.url(), c.id, c.key)
	a := startAgent(t, dir)
	l.feed(10, 10*time.Millisecond)()
	exactlyOnce(t, c, a, l)
	if a.metric(t, "callwire_agent_events_sent_total") < float64(len(l.calls)*len(wantKeys())) {
		t.Errorf("sent_total %v, want at least %d", a.metric(t, "callwire_agent_events_sent_total"), len(l.calls)*len(wantKeys()))
	}
	if err := a.proc.stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("callwire agent exited with %v", err)
	}
	noOrphans(t)
}

// TestTranslatorKilled: the translator is killed with SIGKILL while lines are appended; the host
// starts it again, it resumes from its state file, and every line is on file exactly once.
func TestTranslatorKilled(t *testing.T) {
	c := newCore(t)
	dir := t.TempDir()
	l := newCallLog(t, dir)
	writeAgentConfig(t, dir, c.url(), c.id, c.key)
	a := startAgent(t, dir)
	first := a.translatorPIDs()[0]
	wait := l.feed(60, 15*time.Millisecond)
	eventually(t, 10*time.Second, "the agent to take some events", func() bool {
		return a.metric(t, "callwire_agent_events_accepted_total") >= 20
	})
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the translator: %v", err)
	}
	eventually(t, 15*time.Second, "the host to start the translator again", func() bool {
		pids := a.translatorPIDs()
		return len(pids) >= 2 && pids[len(pids)-1] != first
	})
	wait()
	exactlyOnce(t, c, a, l)
	// The restarted translator resumed from its state file: at most the one line whose Emit had
	// not answered when it died was emitted twice.
	total := len(l.calls) * len(wantKeys())
	if got := a.metric(t, "callwire_agent_events_accepted_total"); got < float64(total) || got > float64(total+1) {
		t.Errorf("the agent took %v events for %d lines, want %d or one more", got, total, total)
	}
}

// TestNetworkCut: the connection between agent and core is cut while lines flow and stays down
// for five seconds; the agent queues, and once the network is back everything lands exactly once.
func TestNetworkCut(t *testing.T) {
	c := newCore(t)
	p := sdktest.NewProxy(t, c.addr)
	dir := t.TempDir()
	l := newCallLog(t, dir)
	writeAgentConfig(t, dir, "http://"+p.Addr(), c.id, c.key)
	a := startAgent(t, dir)
	wait := l.feed(80, 50*time.Millisecond)
	eventually(t, 10*time.Second, "the core to acknowledge some events", func() bool {
		return a.metric(t, "callwire_agent_events_sent_total") >= 12
	})
	p.Cut()
	down := time.Now()
	eventually(t, 5*time.Second, "events to queue in the outbox while the network is down", func() bool {
		return a.metric(t, "callwire_agent_events_queued") > 0
	})
	// The outage lasts five seconds, while the call log keeps growing.
	time.Sleep(time.Until(down.Add(5 * time.Second)))
	queued := a.metric(t, "callwire_agent_events_queued")
	p.Restore()
	wait()
	exactlyOnce(t, c, a, l)
	t.Logf("%v events were queued at the end of the outage", queued)
}

// TestCoreDownAgentKilled: the core is stopped while lines flow and stays down; the agent queues
// every line in its outbox and is then killed with SIGKILL. The core starts again, so does the
// agent on the same outbox: the outbox drains and nothing is lost.
func TestCoreDownAgentKilled(t *testing.T) {
	c := newCore(t)
	dir := t.TempDir()
	l := newCallLog(t, dir)
	writeAgentConfig(t, dir, c.url(), c.id, c.key)
	a := startAgent(t, dir)
	wait := l.feed(40, 20*time.Millisecond)
	eventually(t, 10*time.Second, "the core to acknowledge some events", func() bool {
		return a.metric(t, "callwire_agent_events_sent_total") >= 12
	})
	c.stop()
	wait()
	total := float64(len(l.calls) * len(wantKeys()))
	eventually(t, 10*time.Second, "the agent to take every line while the core is down", func() bool {
		return a.metric(t, "callwire_agent_events_accepted_total") >= total
	})
	var queued float64
	eventually(t, 5*time.Second, "the outbox to hold the events the core could not take", func() bool {
		queued = a.metric(t, "callwire_agent_events_queued")
		return queued > 0
	})
	a.proc.signal(syscall.SIGKILL)
	<-a.proc.done
	noOrphans(t)

	c.start()
	a = startAgent(t, dir)
	exactlyOnce(t, c, a, l)
	if got := a.metric(t, "callwire_agent_events_accepted_total"); got > 1 {
		t.Errorf("the restarted translator emitted %v events again; its state file says every line was taken", got)
	}
	t.Logf("%v events were queued when the agent was killed", queued)
}

// TestRetryAfter: a core answering 503 with Retry-After: 2 hears nothing more from the agent for
// two seconds, from any of its workers.
func TestRetryAfter(t *testing.T) {
	fake := sdktest.NewServer(t)
	fake.FailNext(1, http.StatusServiceUnavailable, 2*time.Second)
	target, err := url.Parse(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	type request struct {
		arrived, answered time.Time
		status            int
	}
	var mu sync.Mutex
	var requests []request
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rp.ServeHTTP(sw, r)
		mu.Lock()
		requests = append(requests, request{arrived, time.Now(), sw.status})
		mu.Unlock()
	}))
	t.Cleanup(front.Close)
	snapshot := func() []request {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(requests)
	}

	dir := t.TempDir()
	l := newCallLog(t, dir)
	l.add(1)
	cred := fake.Credential()
	writeAgentConfig(t, dir, front.URL, cred.ClientID, cred.Secret)
	startAgent(t, dir)
	eventually(t, 10*time.Second, "the first request", func() bool { return len(snapshot()) > 0 })
	l.add(5) // work for every worker while the agent waits
	eventually(t, 15*time.Second, "every event to reach the fake core", func() bool {
		return len(fake.Events()) == len(l.calls)*len(wantKeys())
	})
	reqs := snapshot()
	if reqs[0].status != http.StatusServiceUnavailable {
		t.Fatalf("first request answered %d, want the 503", reqs[0].status)
	}
	for _, r := range reqs[1:] {
		if gap := r.arrived.Sub(reqs[0].answered); gap < 2*time.Second {
			t.Errorf("a request came %s after the 503 with Retry-After: 2", gap.Round(time.Millisecond))
		}
	}
	t.Logf("next request %s after the 503", reqs[1].arrived.Sub(reqs[0].answered).Round(time.Millisecond))
}

// statusWriter records the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}
