package sip_test

// Every address form docs/sip-observer.md allows for listen, pbx and trunk, run by a real
// `callwire agent` with the built-in sip translator: each comes up, listens where it was told,
// and is never restarted; and every form it refuses is refused when the agent starts, naming the
// key, with a non-zero exit and no translator ever started.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/cmd/callwire/e2etest"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/translators/sip/internal/siptest"
)

// loggedAgent is a `callwire agent` child whose JSON log lines the test reads as they come.
type loggedAgent struct {
	proc *e2etest.Child

	mu        sync.Mutex
	metrics   string
	listening map[string][]string // translator → the addresses its proxy or tap said it listens on
	started   map[string]int      // translator → launches
	lines     []map[string]any
}

// agentYAML writes dir/agent.yaml for an agent whose core is never reached (no event is
// emitted) and whose translators are translators.
func agentYAML(t *testing.T, dir, translators string) {
	t.Helper()
	e2etest.AgentConfig(t, dir, "http://127.0.0.1:1", "cwid_unused", "cwsk_unused", translators)
}

func startLoggedAgent(t *testing.T, dir string) *loggedAgent {
	t.Helper()
	a := &loggedAgent{listening: map[string][]string{}, started: map[string]int{}}
	log := &e2etest.LogBuffer{OnLine: func(line string) {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.lines = append(a.lines, l)
		name, _ := l["translator"].(string)
		switch l["msg"] {
		case "callwire agent starting":
			a.metrics, _ = l["metrics"].(string)
		case "translator started":
			a.started[name]++
		case "sip proxy listening":
			addr, _ := l["addr"].(string)
			a.listening[name] = append(a.listening[name], addr)
		case "sip tap listening":
			network, _ := l["network"].(string)
			addr, _ := l["addr"].(string)
			a.listening[name] = append(a.listening[name], network+"://"+addr)
		}
	}}
	a.proc = e2etest.StartChild(t, dir, log, nil, callwireBin, "agent", "--config", filepath.Join(dir, "agent.yaml"))
	return a
}

func (a *loggedAgent) listeningOn(name string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(slices.Values(a.listening[name]))
}

// scrape returns the agent's /metrics page, or "" when it does not answer.
func (a *loggedAgent) scrape() string {
	a.mu.Lock()
	addr := a.metrics
	a.mu.Unlock()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// canListen reports whether this machine lets the test listen on addr over UDP and TCP now.
func canListen(addr string) bool {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	defer pc.Close()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// TestEveryAddressFormRuns: each form of listen, pbx and trunk that docs/sip-observer.md allows
// starts a translator that listens where the form says and is never restarted.
func TestEveryAddressFormRuns(t *testing.T) {
	ports, err := siptest.NewPorts(27000, 27499)
	if err != nil {
		t.Fatal(err)
	}
	type form struct {
		name, mode         string
		listen, pbx, trunk string // YAML values; listen "" leaves the key out
		want               []string
	}
	var forms []form
	add := func(mode, listen, pbx, trunk string, want ...string) {
		forms = append(forms, form{fmt.Sprintf("f%d", len(forms)), mode, listen, pbx, trunk, want})
	}
	p := func() int { return ports.Take(t) }
	n := p()
	add("proxy", fmt.Sprintf(`["udp://127.0.0.1:%d", "tcp://127.0.0.1:%[1]d"]`, n), `"127.0.0.1"`, fmt.Sprintf(`"127.0.0.1:%d"`, p()),
		fmt.Sprintf("tcp://127.0.0.1:%d", n), fmt.Sprintf("udp://127.0.0.1:%d", n))
	n = p()
	add("proxy", fmt.Sprintf(`["127.0.0.1:%d"]`, n), fmt.Sprintf(`"localhost:%d"`, p()), `"localhost"`,
		fmt.Sprintf("tcp://127.0.0.1:%d", n), fmt.Sprintf("udp://127.0.0.1:%d", n))
	n = p()
	add("proxy", fmt.Sprintf(`["UDP://127.0.0.1:%d"]`, n), `"::1"`, fmt.Sprintf(`"[::1]:%d"`, p()), fmt.Sprintf("udp://127.0.0.1:%d", n))
	n = p()
	add("hep", fmt.Sprintf(`["tcp://127.0.0.1:%d"]`, n), `"[::1]"`, "", fmt.Sprintf("tcp://127.0.0.1:%d", n))
	n = p()
	add("hep", fmt.Sprintf(`["127.0.0.1:%d"]`, n), fmt.Sprintf(`"127.0.0.1:%d"`, p()), `"localhost"`,
		fmt.Sprintf("tcp://127.0.0.1:%d", n), fmt.Sprintf("udp://127.0.0.1:%d", n))
	if n = p(); canListen(fmt.Sprintf("[::1]:%d", n)) {
		add("proxy", fmt.Sprintf(`["udp://[::1]:%d", "tcp://[::1]:%[1]d"]`, n), `"[::1]:5062"`, `"127.0.0.1:5064"`,
			fmt.Sprintf("tcp://[::1]:%d", n), fmt.Sprintf("udp://[::1]:%d", n))
	} else {
		t.Log("no IPv6 loopback here: the [::1] listen form is not run")
	}
	// The default ports, only when nothing else holds them now.
	if canListen("127.0.0.1:5060") {
		add("proxy", `["udp://127.0.0.1", "tcp://127.0.0.1"]`, `"127.0.0.1:5080"`, `"127.0.0.1:5090"`, "tcp://127.0.0.1:5060", "udp://127.0.0.1:5060")
	} else {
		t.Log("127.0.0.1:5060 is taken on this machine: the listen form without a port (proxy) is not run")
	}
	if canListen("0.0.0.0:9060") {
		// A socket on 0.0.0.0 serves IPv6 too, and says it is on [::].
		add("hep", "", `"127.0.0.1"`, "", "tcp://[::]:9060", "udp://[::]:9060")
	} else {
		t.Log("port 9060 is taken on this machine: the default listen (hep) is not run")
	}

	var yaml strings.Builder
	for _, f := range forms {
		fmt.Fprintf(&yaml, "  - name: %s\n    builtin: sip\n    config:\n      mode: %s\n", f.name, f.mode)
		if f.listen != "" {
			fmt.Fprintf(&yaml, "      listen: %s\n", f.listen)
		}
		fmt.Fprintf(&yaml, "      pbx: %s\n", f.pbx)
		if f.trunk != "" {
			fmt.Fprintf(&yaml, "      trunk: %s\n", f.trunk)
		}
		yaml.WriteString("      numbers: [\"+15551230100\"]\n      default_country: US\n")
	}
	dir := t.TempDir()
	agentYAML(t, dir, yaml.String())
	a := startLoggedAgent(t, dir)
	for _, f := range forms {
		testwait.Until(t, 30*time.Second, f.name+" ("+f.listen+", pbx "+f.pbx+", trunk "+f.trunk+") to listen", func() bool {
			return slices.Equal(a.listeningOn(f.name), f.want)
		})
		for _, addr := range f.want {
			if hp, ok := strings.CutPrefix(addr, "tcp://"); ok {
				c, err := net.DialTimeout("tcp", strings.Replace(hp, "[::]", "127.0.0.1", 1), 5*time.Second)
				if err != nil {
					t.Errorf("%s: %s does not answer: %v", f.name, addr, err)
					continue
				}
				c.Close()
			}
		}
	}
	// Each listens: its Run has passed every step that can fail. The operator sees each up, and
	// none was ever launched twice.
	testwait.Until(t, 10*time.Second, "every translator up at /metrics", func() bool {
		body := a.scrape()
		for _, f := range forms {
			if !strings.Contains(body, fmt.Sprintf("callwire_translator_up{translator=%q} 1\n", f.name)) ||
				!strings.Contains(body, fmt.Sprintf("callwire_translator_restarts_total{translator=%q} 0\n", f.name)) {
				return false
			}
		}
		return true
	})
	a.mu.Lock()
	for _, f := range forms {
		if a.started[f.name] != 1 {
			t.Errorf("%s was launched %d times", f.name, a.started[f.name])
		}
	}
	a.mu.Unlock()
	if err := a.proc.Stop(t, syscall.SIGTERM); err != nil {
		t.Errorf("the agent exited with %v on SIGTERM", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, l := range a.lines {
		if l["msg"] == "translator ended; restarting it" {
			t.Errorf("a translator was restarted: %v", l)
		}
	}
}

// runAgentOnce runs `callwire agent` with dir/agent.yaml to its end, failing the test when it
// runs longer than limit (a restart loop), and returns its exit code and stderr.
func runAgentOnce(t *testing.T, dir string, limit time.Duration) (int, string) {
	t.Helper()
	log := &e2etest.LogBuffer{}
	c := e2etest.StartChild(t, dir, log, nil, callwireBin, "agent", "--config", filepath.Join(dir, "agent.yaml"))
	select {
	case <-c.Done():
	case <-time.After(limit):
		t.Fatalf("the agent still runs after %s:\n%s", limit, log.String())
	}
	code := 0
	var ee *exec.ExitError
	if err := c.Cmd.Wait(); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if c.Cmd.ProcessState != nil {
		code = c.Cmd.ProcessState.ExitCode()
	}
	return code, log.String()
}

// TestInvalidAddressFormsAreRefusedAtStart: every address the proxy or the tap could not use is
// refused before anything starts, naming the key, and the agent exits non-zero.
func TestInvalidAddressFormsAreRefusedAtStart(t *testing.T) {
	cases := []struct {
		name, config, want string
	}{
		{"listen host name", `mode: proxy, listen: ["udp://localhost:5060"], pbx: "127.0.0.1", trunk: "127.0.0.1:5070"`,
			`translators[0].config.listen[0]: "udp://localhost:5060": "localhost" is a host name`},
		{"listen transport", `mode: hep, listen: ["sctp://127.0.0.1:9060"], pbx: "127.0.0.1"`,
			`translators[0].config.listen[0]: "sctp://127.0.0.1:9060": transport "sctp" is not udp or tcp`},
		{"listen IPv6 without brackets", `mode: hep, listen: ["udp://::1:9060"], pbx: "127.0.0.1"`,
			`translators[0].config.listen[0]: "udp://::1:9060": write an IPv6 address in brackets`},
		{"listen twice", `mode: hep, listen: ["0.0.0.0:9060", "udp://127.0.0.1:9060"], pbx: "127.0.0.1"`,
			`translators[0].config.listen[1]: udp://127.0.0.1:9060 cannot listen beside udp://0.0.0.0:9060 of listen[0]`},
		{"listen not this machine's", `mode: proxy, listen: ["udp://192.0.2.1:5060"], pbx: "127.0.0.1", trunk: "127.0.0.1:5070"`,
			`translators[0].config.listen[0]: 192.0.2.1 is not an address of this machine`},
		{"pbx SIP URI", `mode: proxy, pbx: "sip:127.0.0.1:5060", trunk: "127.0.0.1:5070"`,
			`translators[0].config.pbx: "sip:127.0.0.1:5060" is a SIP URI`},
		{"trunk port", `mode: proxy, pbx: "127.0.0.1", trunk: "127.0.0.1:70000"`,
			`translators[0].config.trunk: "127.0.0.1:70000": port "70000" is not a number from 1 to 65535`},
		{"trunk bad IP", `mode: proxy, pbx: "127.0.0.1", trunk: "10.0.0.300"`,
			`translators[0].config.trunk: "10.0.0.300": "10.0.0.300" is not a valid IP address`},
		{"pbx with transport", `mode: hep, pbx: "udp://127.0.0.1:5060"`,
			`translators[0].config.pbx: "udp://127.0.0.1:5060" is a URL`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			agentYAML(t, dir, fmt.Sprintf("  - name: bad\n    builtin: sip\n    config: {%s, numbers: [\"+15551230100\"], default_country: US}\n", tc.config))
			code, stderr := runAgentOnce(t, dir, 20*time.Second)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant a non-zero exit and %q", code, stderr, tc.want)
			}
			if strings.Contains(stderr, "translator started") {
				t.Errorf("a translator was started:\n%s", stderr)
			}
		})
	}
}

// TestTranslatorThatKeepsFailingStopsTheAgent: a proxy whose port another program holds fails at
// every launch; the agent gives up after five quick failures and exits non-zero, naming the
// translator, its restarts and its last error.
func TestTranslatorThatKeepsFailingStopsTheAgent(t *testing.T) {
	ports, err := siptest.NewPorts(27500, 27599)
	if err != nil {
		t.Fatal(err)
	}
	n := ports.Take(t)
	held, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", n))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	agentYAML(t, dir, fmt.Sprintf(`  - name: edge
    builtin: sip
    config: {mode: proxy, listen: ["tcp://127.0.0.1:%d"], pbx: "127.0.0.1", trunk: "127.0.0.1:5070", numbers: ["+15551230100"], default_country: US}
`, n))
	// Five runs with waits of 1, 2, 4 and 8 seconds between them.
	code, stderr := runAgentOnce(t, dir, 60*time.Second)
	want := fmt.Sprintf("callwire: agent: translator edge keeps failing: its last 5 runs each ended within 1m0s of starting (4 restarts); last error: translator returned: sip: proxy: sip proxy: listen tcp://127.0.0.1:%d:", n)
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "address already in use") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, stderr, want)
	}
	if !strings.Contains(stderr, `docs/agent.md, "When a translator keeps failing"`) {
		t.Errorf("the exit message does not say where to read on:\n%s", stderr)
	}
}
