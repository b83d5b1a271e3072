package main_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/internal/confload"
	"github.com/callwire/callwire/plugins/agent"
)

// lockedBuffer is a bytes.Buffer a child process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runToExit runs callwire with args in c's directory and environment and returns its stderr and
// exit code once it exits. A long-running command (serve, agent) that logs it is up has accepted
// its configuration: the test fails, and the command is stopped.
func (c *cli) runToExit(args ...string) (string, int) {
	c.t.Helper()
	cmd := exec.CommandContext(c.t.Context(), binary, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return stderr.String(), ee.ExitCode()
			} else if err != nil {
				c.t.Fatalf("run %v: %v", args, err)
			}
			return stderr.String(), 0
		case <-tick.C:
			if s := stderr.String(); strings.Contains(s, "callwire listening") || strings.Contains(s, "callwire agent starting") {
				cmd.Process.Kill()
				<-done
				c.t.Fatalf("callwire %s started instead of refusing its configuration:\n%s", strings.Join(args, " "), stderr.String())
			}
		}
	}
}

// TestConfigTyposAreRefused runs the real binary on configuration files with misspelt keys: each
// command exits 1 naming every unknown key and the key meant.
func TestConfigTyposAreRefused(t *testing.T) {
	const agentCore = "core:\n  url: http://127.0.0.1:1\n  client_id: cwid_1\n  secret: cwsk_1\nmetrics:\n  listen: \"\"\n"
	for _, tc := range []struct {
		name  string
		yaml  string
		files map[string]string // written beside the configuration, which runs in that folder
		args  []string
		want  []string
	}{
		{name: "serve", yaml: "databse:\n  url: postgres://callwire@db.internal/callwire\n",
			args: []string{"serve", "--listen", "127.0.0.1:0"}, want: []string{"databse: unknown key; did you mean database?"}},
		{name: "serve, two keys", yaml: "server:\n  listn: 127.0.0.1:0\nlog:\n  levl: debug\n",
			args: []string{"serve", "--listen", "127.0.0.1:0"},
			want: []string{"server.listn: unknown key; did you mean server.listen?", "log.levl: unknown key; did you mean log.level?"}},
		{name: "orgs list", yaml: "database:\n  pth: other.db\n", args: []string{"orgs", "list"},
			want: []string{"database.pth: unknown key; did you mean database.path?"}},
		{name: "agent", yaml: agentCore + "outbox:\n  path: outbox.db\n  dead_letter: dead.jsonl\ntranslators:\n  - name: csv\n    pth: /bin/true\n    config: {pth: free}\n",
			args: []string{"agent"}, want: []string{"translators[0].pth: unknown key; did you mean translators[0].path?"}},
		{name: "agent, built-in translators", yaml: agentCore + "outbox:\n  path: outbox.db\n  dead_letter: dead.jsonl\ntranslators:\n" +
			"  - name: tap\n    builtin: sip\n    config: {mode: hep, pbx: '10.0.0.20', default_country: US, lisen: []}\n" +
			"  - name: other\n    builtin: spi\n" +
			"  - name: pbx\n    builtin: asterisk\n    config: {address: 'pbx.clinic:5038', default_country: GB, secret: x, secret_file: /run/ami}\n",
			args: []string{"agent"}, want: []string{
				"translators[0].config.lisen: unknown key; did you mean listen?",
				`translators[1].builtin: no built-in translator "spi" (built in: asterisk, ringcentral, sip)`,
				"translators[2].config.username: is required",
				"translators[2].config.secret: set only one of secret, secret_file or secret_env",
			}},
		{name: "agent, built-in translators' secrets unreadable", yaml: agentCore + "outbox:\n  path: outbox.db\n  dead_letter: dead.jsonl\ntranslators:\n" +
			"  - name: pbx\n    builtin: asterisk\n    config: {address: 'pbx.clinic:5038', default_country: GB, username: callwire, secret_file: ami-secret}\n" +
			"  - name: cloud\n    builtin: ringcentral\n    config: {client_id: abc, client_secret_file: empty-secret, jwt: eyJ.x.y, default_country: US, cursor_file: rc.cursor}\n" +
			"  - name: tap\n    builtin: sip\n    config: {mode: hep, pbx: '10.0.0.20', default_country: US, hep_password_file: no-such-file}\n",
			files: map[string]string{"empty-secret": "\n"},
			args:  []string{"agent"}, want: []string{
				"translators[0].config.secret_file: open ami-secret: no such file or directory",
				"translators[1].config.client_secret_file: empty-secret is empty",
				"translators[2].config.hep_password_file: open no-such-file: no such file or directory",
			}},
		{name: "agent, two translators on one cursor", yaml: agentCore + "outbox:\n  path: outbox.db\n  dead_letter: dead.jsonl\ntranslators:\n" +
			"  - name: main\n    builtin: ringcentral\n    config: {client_id: abc, client_secret: s, jwt: eyJ.x.y, default_country: US, cursor_file: rc.cursor}\n" +
			"  - name: branch\n    builtin: ringcentral\n    config: {client_id: def, client_secret: s, jwt: eyJ.x.y, default_country: US, cursor_file: ./rc.cursor}\n",
			args: []string{"agent"}, want: []string{
				"translators[1].config.cursor_file: ./rc.cursor is already translators[0].config.cursor_file: each translator needs its own",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			path := filepath.Join(c.dir, "config.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			for name, body := range tc.files {
				if err := os.WriteFile(filepath.Join(c.dir, name), []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			errOut, code := c.runToExit(append([]string{"--config", path}, tc.args...)...)
			if code != 1 {
				t.Errorf("exit %d, want 1:\n%s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if strings.Contains(errOut, "config: {pth") || strings.Contains(errOut, "config.pth") {
				t.Errorf("a translator's own config block was checked:\n%s", errOut)
			}
		})
	}
}

// TestUnknownVariablesAreWarned runs the real binary with misspelt variables: the command still
// runs (or fails for its own reasons), and its log warns of each, naming the variable meant;
// the variables of the other program (the agent's for the core, the core's for the agent) and of
// the tests pass without a word.
func TestUnknownVariablesAreWarned(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		args     []string
		wantCode int
		want     []string
		not      []string
	}{
		{name: "core", env: []string{"CALLWIRE_DATABSE_URL=postgres://nowhere/db", "CALLWIRE_AGENT_CORE_URL=http://x",
			"CALLWIRE_TEST_DATABASE_URL=postgres://x", "CALLWIRE_REQUIRE_SERVICES=1"},
			args: []string{"orgs", "list"}, wantCode: 0,
			want: []string{`"level":"WARN"`, `"variable":"CALLWIRE_DATABSE_URL"`, `"did_you_mean":"CALLWIRE_DATABASE_URL"`},
			not:  []string{"CALLWIRE_AGENT_CORE_URL", "CALLWIRE_TEST_DATABASE_URL", "CALLWIRE_REQUIRE_SERVICES"}},
		{name: "core, with an invalid configuration", env: []string{"CALLWIRE_LOG_LEVL=debug", "CALLWIRE_SERVER_BODY_LIMIT=1"},
			args: []string{"orgs", "list"}, wantCode: 1,
			want: []string{`"variable":"CALLWIRE_LOG_LEVL"`, `"did_you_mean":"CALLWIRE_LOG_LEVEL"`, "server.body_limit: must be at least 4096"}},
		{name: "agent", env: []string{"CALLWIRE_AGENT_CORE_ULR=http://127.0.0.1:1", "CALLWIRE_DATABASE_URL=postgres://x", "CALLWIRE_DATABSE_URL=x"},
			args: []string{"agent"}, wantCode: 1,
			want: []string{`"variable":"CALLWIRE_AGENT_CORE_ULR"`, `"did_you_mean":"CALLWIRE_AGENT_CORE_URL"`, "core.url: is required"},
			not:  []string{"CALLWIRE_DATABASE_URL", "CALLWIRE_DATABSE_URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t, tc.env...)
			errOut, code := c.runToExit(tc.args...)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d:\n%s", code, tc.wantCode, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %s:\n%s", w, errOut)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(errOut, w) {
					t.Errorf("stderr mentions %s:\n%s", w, errOut)
				}
			}
		})
	}
}

// TestEveryCallwireVariableIsKnown reads the module for the CALLWIRE_ variables it reads (in Go,
// a name assigned, as to a constant, or handed to Getenv, LookupEnv or Setenv; in shell, make and
// CI files, a name expanded or exported) and checks that no loader would warn about one: each
// sets a key of the core's or the agent's configuration, or is listed by
// confload.NotConfiguration. A new test switch or tool variable must be added there.
func TestEveryCallwireVariableIsKnown(t *testing.T) {
	if config.AgentEnvPrefix != agent.EnvPrefix {
		t.Errorf("the core leaves %s to the agent, whose prefix is %s", config.AgentEnvPrefix, agent.EnvPrefix)
	}
	known := map[string]bool{}
	for _, v := range append(config.Variables(), agent.Variables()...) {
		known[v] = true
	}
	goName := regexp.MustCompile(`(?:[^=!]=\s*|[Ee]nv\(\s*)"(CALLWIRE_[A-Z0-9_]*[A-Z0-9])"`)
	shName := regexp.MustCompile(`(?:\$\{?|export\s+)(CALLWIRE_[A-Z0-9_]*[A-Z0-9])`)
	found := map[string]string{} // variable → a file naming it
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "data" {
				return filepath.SkipDir
			}
			return nil
		}
		var re *regexp.Regexp
		switch {
		case strings.HasSuffix(path, ".go"):
			re = goName
		case strings.HasSuffix(path, ".sh"), d.Name() == "Makefile", strings.Contains(filepath.ToSlash(path), "/.ci/"),
			strings.HasSuffix(path, ".yml"), strings.HasSuffix(path, ".yaml"):
			re = shName
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 10 {
		t.Fatalf("found only %v: is the module root right?", found)
	}
	names := make([]string, 0, len(found))
	for name := range found {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !known[name] && !confload.NotConfiguration(name) {
			t.Errorf("%s (named in %s) is neither configuration nor in confload.NotConfiguration: the loaders would warn about it", name, found[name])
		}
	}
}
