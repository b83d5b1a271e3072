// Package e2etest runs real callwire processes for end-to-end tests: a `callwire serve` on the
// embedded store with an organization and a key of its own, and a `callwire agent` delivering to
// it, with whatever translators the test configures. Every process is a child of the test,
// killed when the test ends, with its log shown when the test fails. Production code never
// imports this package.
package e2etest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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
	"github.com/callwire/callwire/internal/testwait"
)

// Build builds the callwire binary into dir and returns its path. Call it once, from TestMain.
func Build(dir string) (string, error) {
	return BuildPackage(dir, "callwire", "github.com/callwire/callwire/cmd/callwire")
}

// BuildPackage builds the main package pkg (an import path, or a directory relative to the
// test's working directory such as ".") into dir as the binary name and returns its path: a
// translator for the agent to run, say. Call it once, from TestMain.
func BuildPackage(dir, name, pkg string) (string, error) {
	bin := filepath.Join(dir, name)
	out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// BuildModule builds the main package at the root of the Go module in moduleDir (a directory
// relative to the test's working directory, such as "../csv-translator") into dir as the binary
// name and returns its path: a translator that is a module of its own, built against its own
// go.mod. Call it once, from TestMain.
func BuildModule(dir, name, moduleDir string) (string, error) {
	bin, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("build %s: %w", moduleDir, err)
	}
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", moduleDir, err, out)
	}
	return bin, nil
}

// LogBuffer collects a child's stderr for the test to read and to show on failure; each
// complete line is also handed to OnLine, when set.
type LogBuffer struct {
	OnLine func(line string)

	mu   sync.Mutex
	all  bytes.Buffer
	part []byte
}

// Write implements io.Writer.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.all.Write(p)
	b.part = append(b.part, p...)
	for {
		i := bytes.IndexByte(b.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		if b.OnLine != nil {
			b.OnLine(string(b.part[:i]))
		}
		b.part = b.part[i+1:]
	}
}

// String returns what was written, its last 20,000 bytes when longer.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.all.String()
	if len(s) > 20000 {
		s = "…" + s[len(s)-20000:]
	}
	return s
}

// Child is a running process of the test's and what it wrote to stderr.
type Child struct {
	Cmd  *exec.Cmd
	Log  *LogBuffer
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // Wait's result, set before done is closed
}

// StartChild starts name with args in dir, with only PATH and HOME (dir) in its environment
// plus env, and kills it when the test ends.
func StartChild(t testing.TB, dir string, log *LogBuffer, env []string, name string, args ...string) *Child {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	c := &Child{Cmd: cmd, Log: log, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		c.Signal(syscall.SIGKILL)
		<-c.done
		if t.Failed() {
			t.Logf("%s %s stderr:\n%s", filepath.Base(name), strings.Join(args, " "), log.String())
		}
	})
	return c
}

// Signal sends s to the process, unless it has exited.
func (c *Child) Signal(s syscall.Signal) {
	select {
	case <-c.done:
	default:
		_ = c.Cmd.Process.Signal(s)
	}
}

// Done is closed once the process has exited and been reaped.
func (c *Child) Done() <-chan struct{} { return c.done }

// Stop sends s and waits up to 20 seconds for the process to exit, returning Wait's result.
func (c *Child) Stop(t testing.TB, s syscall.Signal) error {
	t.Helper()
	c.Signal(s)
	select {
	case <-c.done:
		return c.err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not exit on %v\n%s", c.Cmd.Path, s, c.Log.String())
		return nil
	}
}

// Core is a `callwire serve` on the embedded store in Dir, on a fixed address so that it can be
// stopped and started again, with one organization and a key for it.
type Core struct {
	Bin, Dir, Addr   string
	Org              string
	ClientID, Secret string
	Proc             *Child
	t                testing.TB
}

// StartCore starts `callwire serve` (the binary bin) on the embedded store in a new directory
// and creates an organization and a key with the scope org.calls.events.
func StartCore(t testing.TB, bin string) *Core {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Core{t: t, Bin: bin, Dir: t.TempDir(), Addr: ln.Addr().String()}
	ln.Close()
	c.Start()
	c.Org = strings.TrimSpace(c.CLI("orgs", "create", "--name", "Riverside Clinic"))
	var k struct{ ClientID, ClientSecret string }
	if err := json.Unmarshal([]byte(c.CLI("keys", "create", "--org", c.Org, "--scope", "org.calls.events", "--output", "json")), &k); err != nil {
		t.Fatal(err)
	}
	c.ClientID, c.Secret = k.ClientID, k.ClientSecret
	return c
}

// URL is the server's base URL.
func (c *Core) URL() string { return "http://" + c.Addr }

// Start starts the server (again) and waits until /healthz answers.
func (c *Core) Start() {
	c.t.Helper()
	c.Proc = StartChild(c.t, c.Dir, &LogBuffer{}, nil, c.Bin, "serve", "--listen", c.Addr)
	testwait.Until(c.t, 20*time.Second, "callwire serve to answer /healthz", func() bool {
		resp, err := http.Get(c.URL() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// Stop ends the server with SIGTERM, as an operator would, and checks it stopped cleanly.
func (c *Core) Stop() {
	c.t.Helper()
	if err := c.Proc.Stop(c.t, syscall.SIGTERM); err != nil {
		c.t.Errorf("callwire serve exited with %v", err)
	}
}

// CLI runs `callwire args...` against the server's directory and returns its stdout.
func (c *Core) CLI(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(c.Bin, args...)
	cmd.Dir = c.Dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.Dir}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("callwire %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return string(out)
}

// OpenStore opens the server's store from the test, beside the running server.
func (c *Core) OpenStore() store.Store {
	c.t.Helper()
	db := config.Defaults().Database
	db.Path, db.AutoMigrate = filepath.Join(c.Dir, "data", "callwire.db"), false
	st, err := server.OpenStore(c.t.Context(), db)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { st.Close() })
	return st
}

// Agent is a running `callwire agent` and what its log said.
type Agent struct {
	Dir  string
	Proc *Child

	mu          sync.Mutex
	metricsAddr string
	pids        []int // the translator processes it started, in order
}

// AgentConfig writes dir/agent.yaml for an agent delivering to the core at coreURL with the key
// clientID and secret, with a short delivery backoff, its outbox in dir, metrics on a free port,
// and translators (YAML list items, each starting "  - name: ...") as its translators. It returns
// the file's path.
func AgentConfig(t testing.TB, dir, coreURL, clientID, secret, translators string) string {
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
%s`, coreURL, clientID, dir, translators)
	if err := os.WriteFile(filepath.Join(dir, "agent-secret"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartAgent runs `callwire agent --config <dir>/agent.yaml` (see AgentConfig) and waits until
// its metrics listen and its first translator has started.
func StartAgent(t testing.TB, bin, dir string) *Agent {
	t.Helper()
	a := &Agent{Dir: dir}
	log := &LogBuffer{OnLine: func(line string) {
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
	a.Proc = StartChild(t, dir, log, nil, bin, "agent", "--config", filepath.Join(dir, "agent.yaml"))
	testwait.Until(t, 20*time.Second, "the agent and its translator to start", func() bool { return len(a.TranslatorPIDs()) > 0 })
	return a
}

// TranslatorPIDs returns the process ids of the translators the agent started, in order.
func (a *Agent) TranslatorPIDs() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.pids)
}

// Metric returns the sum of the agent's samples of the metric called name (0 when it has none).
func (a *Agent) Metric(t testing.TB, name string) float64 {
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

// NoProcess fails the test unless, within 10 seconds, no process runs whose command line starts
// with prefix (the arguments separated by NUL, as /proc shows them).
func NoProcess(t testing.TB, prefix string) {
	t.Helper()
	testwait.Until(t, 10*time.Second, "no process "+strings.ReplaceAll(prefix, "\x00", " ")+" to remain", func() bool {
		entries, err := os.ReadDir("/proc")
		if err != nil {
			return true // not Linux: nothing to look at
		}
		for _, e := range entries {
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.HasPrefix(cmdline, []byte(prefix)) {
				return false
			}
		}
		return true
	})
}

// Main is the body of a TestMain whose tests need the callwire binary: it builds it into a
// temporary directory, sets *bin to its path, runs the tests, removes the directory and returns
// the exit code: func TestMain(m *testing.M) { os.Exit(e2etest.Main(m, &callwireBin)) }.
// A failed build is printed to stderr and returns 1.
func Main(m *testing.M, bin *string) int {
	dir, err := os.MkdirTemp("", "callwire-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
