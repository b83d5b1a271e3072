package csvtranslatore2e_test

// End-to-end tests of the example translator (examples/csv-translator) with real processes: a real `callwire serve` on the
// embedded store, a real `callwire agent` that runs the example as its child, and the faults an
// agent meets in a clinic: a translator killed, the network cut, the core down, the agent killed
// with events queued, and a core asking for a pause with Retry-After.

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/cmd/callwire/e2etest"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/testwait"
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
	if callwireBin, err = e2etest.Build(dir); err == nil {
		translatorBin, err = e2etest.BuildModule(dir, "callwire-translator-csv", "../csv-translator")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// writeAgentConfig writes agent.yaml in dir for a core at coreURL, with the example as its one
// translator, and returns its path. The outbox, the CSV log and the translator's state all live
// in dir.
func writeAgentConfig(t *testing.T, dir, coreURL, clientID, secret string) string {
	t.Helper()
	return e2etest.AgentConfig(t, dir, coreURL, clientID, secret, fmt.Sprintf(`  - name: csv
    path: %[2]s
    config:
      path: %[1]s/calls.csv
      state: %[1]s/calls.state
      poll: 20ms
`, dir, translatorBin))
}

// startAgent runs `callwire agent --config <dir>/agent.yaml` and waits until its metrics listen
// and its translator has started. Once the test ends and the agent has been killed, no
// translator process may outlive it.
func startAgent(t *testing.T, dir string) *e2etest.Agent {
	t.Helper()
	t.Cleanup(func() { noOrphans(t) }) // runs after StartChild's cleanup has killed the agent
	return e2etest.StartAgent(t, callwireBin, dir)
}

// noOrphans fails the test if a translator process outlives its agent.
func noOrphans(t *testing.T) {
	t.Helper()
	e2etest.NoProcess(t, translatorBin+"\x00")
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
			time.Sleep(interval) // the pace at which the PBX writes its log: the test's load
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
func exactlyOnce(t *testing.T, c *e2etest.Core, a *e2etest.Agent, l *callLog) {
	t.Helper()
	st := c.OpenStore()
	testwait.Until(t, 30*time.Second, fmt.Sprintf("all %d calls to land at the core", len(l.calls)), func() bool {
		return landed(t, st, c.Org, l.calls) == len(l.calls)
	})
	for _, id := range l.calls {
		call, evs, err := st.GetCall(t.Context(), c.Org, provider, id)
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
	testwait.Until(t, 10*time.Second, "the outbox to be empty", func() bool {
		return a.Metric(t, "callwire_agent_outbox_events") == 0
	})
}

// TestAgentRunsTheExample: the agent launches the example as its child process, and every line
// of the call log, those written before it started and those appended while it runs, lands at a
// real core once. SIGTERM stops the agent cleanly, translator included.
func TestAgentRunsTheExample(t *testing.T) {
	c := e2etest.StartCore(t, callwireBin)
	dir := t.TempDir()
	l := newCallLog(t, dir)
	l.add(20)
	writeAgentConfig(t, dir, c.URL(), c.ClientID, c.Secret)
	a := startAgent(t, dir)
	l.feed(10, 10*time.Millisecond)()
	exactlyOnce(t, c, a, l)
	if a.Metric(t, "callwire_agent_events_sent_total") < float64(len(l.calls)*len(wantKeys())) {
		t.Errorf("sent_total %v, want at least %d", a.Metric(t, "callwire_agent_events_sent_total"), len(l.calls)*len(wantKeys()))
	}
	if err := a.Proc.Stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("callwire agent exited with %v", err)
	}
	noOrphans(t)
}

// TestTranslatorKilled: the translator is killed with SIGKILL while lines are appended; the host
// starts it again, it resumes from its state file, and every line is on file exactly once.
func TestTranslatorKilled(t *testing.T) {
	c := e2etest.StartCore(t, callwireBin)
	dir := t.TempDir()
	l := newCallLog(t, dir)
	writeAgentConfig(t, dir, c.URL(), c.ClientID, c.Secret)
	a := startAgent(t, dir)
	first := a.TranslatorPIDs()[0]
	wait := l.feed(60, 15*time.Millisecond)
	testwait.Until(t, 10*time.Second, "the agent to take some events", func() bool {
		return a.Metric(t, "callwire_agent_events_accepted_total") >= 20
	})
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the translator: %v", err)
	}
	testwait.Until(t, 15*time.Second, "the host to start the translator again", func() bool {
		pids := a.TranslatorPIDs()
		return len(pids) >= 2 && pids[len(pids)-1] != first
	})
	wait()
	exactlyOnce(t, c, a, l)
	// The restarted translator resumed from its state file: at most the one line whose Emit had
	// not answered when it died was emitted twice.
	total := len(l.calls) * len(wantKeys())
	if got := a.Metric(t, "callwire_agent_events_accepted_total"); got < float64(total) || got > float64(total+1) {
		t.Errorf("the agent took %v events for %d lines, want %d or one more", got, total, total)
	}
}

// TestNetworkCut: the connection between agent and core is cut while lines flow and stays down
// for five seconds; the agent queues, and once the network is back everything lands exactly once.
func TestNetworkCut(t *testing.T) {
	c := e2etest.StartCore(t, callwireBin)
	p := sdktest.NewProxy(t, c.Addr)
	dir := t.TempDir()
	l := newCallLog(t, dir)
	writeAgentConfig(t, dir, "http://"+p.Addr(), c.ClientID, c.Secret)
	a := startAgent(t, dir)
	wait := l.feed(80, 50*time.Millisecond)
	testwait.Until(t, 10*time.Second, "the core to acknowledge some events", func() bool {
		return a.Metric(t, "callwire_agent_events_sent_total") >= 12
	})
	p.Cut()
	down := time.Now()
	testwait.Until(t, 5*time.Second, "events to queue in the outbox while the network is down", func() bool {
		return a.Metric(t, "callwire_agent_events_queued") > 0
	})
	// The outage lasts five seconds, while the call log keeps growing.
	time.Sleep(time.Until(down.Add(5 * time.Second)))
	queued := a.Metric(t, "callwire_agent_events_queued")
	p.Restore()
	wait()
	exactlyOnce(t, c, a, l)
	t.Logf("%v events were queued at the end of the outage", queued)
}

// TestCoreDownAgentKilled: the core is stopped while lines flow and stays down; the agent queues
// every line in its outbox and is then killed with SIGKILL. The core starts again, so does the
// agent on the same outbox: the outbox drains and nothing is lost.
func TestCoreDownAgentKilled(t *testing.T) {
	c := e2etest.StartCore(t, callwireBin)
	dir := t.TempDir()
	l := newCallLog(t, dir)
	writeAgentConfig(t, dir, c.URL(), c.ClientID, c.Secret)
	a := startAgent(t, dir)
	wait := l.feed(40, 20*time.Millisecond)
	testwait.Until(t, 10*time.Second, "the core to acknowledge some events", func() bool {
		return a.Metric(t, "callwire_agent_events_sent_total") >= 12
	})
	c.Stop()
	wait()
	total := float64(len(l.calls) * len(wantKeys()))
	testwait.Until(t, 10*time.Second, "the agent to take every line while the core is down", func() bool {
		return a.Metric(t, "callwire_agent_events_accepted_total") >= total
	})
	var queued float64
	testwait.Until(t, 5*time.Second, "the outbox to hold the events the core could not take", func() bool {
		queued = a.Metric(t, "callwire_agent_events_queued")
		return queued > 0
	})
	a.Proc.Signal(syscall.SIGKILL)
	<-a.Proc.Done()
	noOrphans(t)

	c.Start()
	a = startAgent(t, dir)
	exactlyOnce(t, c, a, l)
	if got := a.Metric(t, "callwire_agent_events_accepted_total"); got > 1 {
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
	testwait.Until(t, 10*time.Second, "the first request", func() bool { return len(snapshot()) > 0 })
	l.add(5) // work for every worker while the agent waits
	testwait.Until(t, 15*time.Second, "every event to reach the fake core", func() bool {
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
