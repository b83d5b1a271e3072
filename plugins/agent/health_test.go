package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/plugins"
	"github.com/callwire/callwire/plugins/agent"
	"github.com/callwire/callwire/sdk/sdktest"
)

// testTranslatorDir holds the test translator once testTranslator built it; TestMain removes it.
var testTranslatorDir string

// testTranslator builds plugins/internal/testtranslator once per test binary and returns its path.
var testTranslator = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "callwire-agent-test")
	if err != nil {
		return "", err
	}
	testTranslatorDir = dir
	bin := filepath.Join(dir, "callwire-translator-test")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/callwire/callwire/plugins/internal/testtranslator").CombinedOutput()
	if err != nil {
		return "", errors.New("build the test translator: " + err.Error() + "\n" + string(out))
	}
	return bin, nil
})

// removeTestTranslator removes what testTranslator built, if it built anything.
func removeTestTranslator() {
	if testTranslatorDir != "" {
		os.RemoveAll(testTranslatorDir)
	}
}

// logLines collects JSON log lines safely across goroutines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// find returns the records with this message whose attributes include every key/value pair of kv.
func (l *logLines) find(msg string, kv ...string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
next:
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) != nil || r["msg"] != msg {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if v, _ := r[kv[i]].(string); v != kv[i+1] {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// healthRig runs a whole agent, with the test translator as its translators, until the test ends.
type healthRig struct {
	logs    *logLines
	metrics string // host:port of /metrics
	done    chan error
	cancel  context.CancelFunc
}

func runAgent(t *testing.T, translators map[string]map[string]any, host func(*plugins.HostOptions)) *healthRig {
	t.Helper()
	bin, err := testTranslator()
	if err != nil {
		t.Fatal(err)
	}
	fake := sdktest.NewServer(t)
	dir := t.TempDir()
	c := agent.Defaults()
	c.Core.URL, c.Core.ClientID, c.Core.Secret = fake.URL, fake.Credential().ClientID, fake.Credential().Secret
	c.Outbox.Path, c.Outbox.DeadLetter = filepath.Join(dir, "outbox.db"), filepath.Join(dir, "dead.jsonl")
	c.Metrics.Listen = "127.0.0.1:0"
	c.Metrics.LogInterval = 20 * time.Millisecond
	for name, cfg := range translators {
		c.Translators = append(c.Translators, agent.Translator{Name: name, Path: bin, Config: cfg})
	}
	r := &healthRig{logs: &logLines{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	ready := make(chan net.Addr, 1)
	go func() {
		r.done <- agent.Run(ctx, c, agent.RunOptions{
			Logger:  slog.New(slog.NewJSONHandler(r.logs, nil)),
			OnReady: func(a net.Addr) { ready <- a },
			Host: func(o *plugins.HostOptions) {
				o.MinBackoff, o.MaxBackoff, o.HealthInterval = 10*time.Millisecond, 40*time.Millisecond, 50*time.Millisecond
				if host != nil {
					host(o)
				}
			},
		})
	}()
	select {
	case a := <-ready:
		r.metrics = a.String()
	case err := <-r.done:
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			t.Error("run did not stop")
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", r.logs.buf.String())
		}
	})
	return r
}

func (r *healthRig) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestTranslatorHealthReachesTheOperator: the health, restarts and last error of each translator
// (real child processes) are in the agent's status log lines and on /metrics, with the time since
// each last handed over an event.
func TestTranslatorHealthReachesTheOperator(t *testing.T) {
	r := runAgent(t, map[string]map[string]any{
		"steady": {"events": 1, "callId": "steady-1"},
		"ill":    {"events": 0, "unhealthy": "manager connection lost: connection refused"},
		"crashy": {"events": 1, "callId": "crashy-1", "crashAfter": 1},
	}, func(o *plugins.HostOptions) { o.ResetAfter = time.Nanosecond }) // crashy never counts as failing fast
	var body string
	testwait.Until(t, 15*time.Second, "the health metrics", func() bool {
		body = r.scrape(t)
		return strings.Contains(body, `callwire_translator_up{translator="steady"} 1`) &&
			strings.Contains(body, `callwire_translator_up{translator="ill"} 0`) &&
			strings.Contains(body, `callwire_translator_restarts_total{translator="steady"} 0`) &&
			!strings.Contains(body, `callwire_translator_restarts_total{translator="crashy"} 0`) &&
			!strings.Contains(body, `callwire_translator_restarts_total{translator="crashy"} 1`)
	})
	for _, want := range []string{
		"# TYPE callwire_translator_up gauge",
		"# TYPE callwire_translator_restarts_total counter",
		"# TYPE callwire_translator_seconds_since_last_event gauge",
		`callwire_translator_seconds_since_last_event{translator="steady"}`,
		`callwire_translator_seconds_since_last_event{translator="ill"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	testwait.Until(t, 10*time.Second, "status lines naming each translator's health", func() bool {
		return len(r.logs.find("agent status", "translator", "steady", "health", "healthy")) > 0 &&
			len(r.logs.find("agent status", "translator", "ill", "health", "unhealthy",
				"health_error", "manager connection lost: connection refused", "level", "WARN")) > 0 &&
			len(r.logs.find("agent status", "translator", "crashy")) > 0
	})
	var crashy map[string]any
	for _, l := range r.logs.find("agent status", "translator", "crashy") {
		if n, _ := l["restarts"].(float64); n >= 1 {
			crashy = l
		}
	}
	if crashy == nil || !strings.Contains(crashy["last_error"].(string), "exited") {
		t.Errorf("no status line gives crashy's restarts and last error: %v", crashy)
	}
	for _, l := range r.logs.find("agent status", "translator", "steady") {
		if _, ok := l["since_last_event"].(string); !ok {
			t.Errorf("status line without since_last_event: %v", l)
		}
	}
}

// TestRunEndsWhenATranslatorKeepsFailing: a translator (a real child process) whose every run
// ends at once makes Run stop every translator and return an error naming it, its restarts and
// its last error, after DefaultGiveUpAfter runs.
func TestRunEndsWhenATranslatorKeepsFailing(t *testing.T) {
	r := runAgent(t, map[string]map[string]any{
		"steady": {"events": 1, "callId": "steady-1"},
		"broken": {"events": 0, "fail": "sip: proxy: listen udp://0.0.0.0:5060: bind: address already in use"},
	}, nil)
	var err error
	select {
	case err = <-r.done:
		r.done <- err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end although a translator keeps failing")
	}
	var fe *plugins.FailingError
	if !errors.As(err, &fe) || fe.Name != "broken" || fe.Failures != agent.DefaultGiveUpAfter || fe.Restarts != agent.DefaultGiveUpAfter-1 {
		t.Fatalf("Run: %v (%+v), want the host's FailingError for broken", err, fe)
	}
	for _, w := range []string{"translator broken keeps failing", "(4 restarts)", "last error: translator returned: sip: proxy: listen udp://0.0.0.0:5060: bind: address already in use"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if len(r.logs.find("callwire agent stopping: a translator keeps failing")) != 1 {
		t.Error("the agent did not log why it stops")
	}
}
