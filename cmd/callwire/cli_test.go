package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
	"github.com/callwire/callwire/internal/testwait"
)

// binary is the callwire executable built once for these tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "callwire-cli")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "callwire")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build callwire: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cli runs callwire in dir with env added to a clean environment.
type cli struct {
	t   *testing.T
	dir string
	env []string
}

func newCLI(t *testing.T, env ...string) *cli {
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	return &cli{t: t, dir: t.TempDir(), env: append(base, env...)}
}

// run returns stdout, stderr and the exit code.
func (c *cli) run(args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.CommandContext(c.t.Context(), binary, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// ok runs and fails the test unless the command succeeds.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("callwire %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

type keyOut struct {
	ClientID     string     `json:"clientId"`
	ClientSecret string     `json:"clientSecret"`
	SecretLast8  string     `json:"secretLast8"`
	OrgID        *string    `json:"orgId"`
	Scopes       []string   `json:"scopes"`
	ExpiresAt    *time.Time `json:"expiresAt"`
	Status       string     `json:"status"`
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

var uuidLine = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n$`)

// keyLifecycle exercises orgs and keys against whatever store c's environment names.
func keyLifecycle(t *testing.T, c *cli) {
	org := c.ok("orgs", "create", "--name", "Riverside Clinic")
	if !uuidLine.MatchString(org) {
		t.Fatalf("orgs create printed %q, want the id alone", org)
	}
	org = strings.TrimSpace(org)
	o := decode[map[string]any](t, c.ok("orgs", "create", "--name", "Hillside", "--output", "json"))
	if o["id"] == "" || o["name"] != "Hillside" {
		t.Errorf("orgs create json: %v", o)
	}
	if list := c.ok("orgs", "list"); !strings.Contains(list, org) || !strings.Contains(list, "Hillside") {
		t.Errorf("orgs list: %s", list)
	}

	exp := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	k := decode[keyOut](t, c.ok("keys", "create", "--org", org, "--scope", "org.calls.events",
		"--scope", "org.popups.read", "--expires-at", exp.Format(time.RFC3339), "--output", "json"))
	if !strings.HasPrefix(k.ClientID, "cwid_") || !strings.HasPrefix(k.ClientSecret, "cwsk_") || k.OrgID == nil || *k.OrgID != org ||
		len(k.Scopes) != 2 || k.ExpiresAt == nil || !k.ExpiresAt.Equal(exp) {
		t.Errorf("keys create: %+v", k)
	}
	text := c.ok("keys", "create", "--org", org, "--scope", "org.calls.events.call_received")
	if !strings.Contains(text, "Client ID:") || !strings.Contains(text, "Client Secret: cwsk_") {
		t.Errorf("keys create text: %s", text)
	}
	op := decode[keyOut](t, c.ok("keys", "create", "--operator", "--scope", "org.calls.events", "--output", "json"))
	if op.OrgID != nil {
		t.Errorf("operator key has org %v", *op.OrgID)
	}

	keys := decode[[]keyOut](t, c.ok("keys", "list", "--org", org, "--output", "json"))
	if len(keys) != 2 || keys[0].ClientID != k.ClientID || keys[0].ClientSecret != "" || keys[0].SecretLast8 != k.ClientSecret[len(k.ClientSecret)-8:] || keys[0].Status != "active" {
		t.Errorf("keys list: %+v", keys)
	}
	if ops := decode[[]keyOut](t, c.ok("keys", "list", "--operator", "--output", "json")); len(ops) != 1 || ops[0].ClientID != op.ClientID {
		t.Errorf("operator keys: %+v", ops)
	}
	listText := c.ok("keys", "list", "--org", org)
	if strings.Contains(listText, k.ClientSecret) || !strings.Contains(listText, k.ClientSecret[len(k.ClientSecret)-8:]) {
		t.Errorf("keys list text must show only the last eight: %s", listText)
	}

	r := decode[keyOut](t, c.ok("keys", "rotate", k.ClientID, "--output", "json"))
	if r.ClientID != k.ClientID || r.ClientSecret == k.ClientSecret || !strings.HasPrefix(r.ClientSecret, "cwsk_") {
		t.Errorf("rotate: %+v", r)
	}
	c.ok("keys", "revoke", k.ClientID)
	keys = decode[[]keyOut](t, c.ok("keys", "list", "--org", org, "--output", "json"))
	if keys[0].Status != "revoked" {
		t.Errorf("after revoke: %+v", keys[0])
	}
	if _, errOut, code := c.run("keys", "rotate", k.ClientID); code == 0 || !strings.Contains(errOut, "revoked") {
		t.Errorf("rotating a revoked key: %d %s", code, errOut)
	}
}

func TestKeyLifecycleEmbedded(t *testing.T) {
	keyLifecycle(t, newCLI(t))
}

func TestKeyLifecyclePostgres(t *testing.T) {
	c := newCLI(t, "CALLWIRE_DATABASE_URL="+pgtest.URL(t))
	keyLifecycle(t, c)
	if _, err := os.Stat(filepath.Join(c.dir, "data")); err == nil {
		t.Error("with CALLWIRE_DATABASE_URL set, the embedded store must not be created")
	}
}

func TestUsageErrors(t *testing.T) {
	c := newCLI(t)
	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "X"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"orgs", "create"}, "--name"},
		{[]string{"keys", "create", "--org", org}, "--scope"},
		{[]string{"keys", "create", "--org", org, "--scope", "org.everything"}, "org.everything"},
		{[]string{"keys", "create", "--org", org, "--operator", "--scope", "org.calls.events"}, "--operator"},
		{[]string{"keys", "create", "--scope", "org.calls.events"}, "--org"},
		{[]string{"keys", "create", "--org", org, "--scope", "org.calls.events", "--expires-at", "tomorrow"}, "RFC 3339"},
		{[]string{"keys", "create", "--org", org, "--scope", "org.calls.events", "--expires-at", "2001-01-01T00:00:00Z"}, "future"},
		{[]string{"keys", "list"}, "--org"},
		{[]string{"keys", "revoke"}, "argument"},
		{[]string{"orgs", "create", "--name", "X", "--output", "yaml"}, "--output"},
		{[]string{"serve", "--bogus"}, "bogus"},
	} {
		_, errOut, code := c.run(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("callwire %s: exit %d, stderr %q; want exit 2 mentioning %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"keys", "create", "--org", "no-such-org", "--scope", "org.calls.events"}, "no-such-org"},
		{[]string{"keys", "revoke", "cwid_nobody"}, "cwid_nobody"},
		{[]string{"keys", "list", "--org", "no-such-org"}, "no-such-org"},
		{[]string{"--config", "/nonexistent.yaml", "orgs", "list"}, "nonexistent"},
	} {
		_, errOut, code := c.run(tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("callwire %s: exit %d, stderr %q", strings.Join(tc.args, " "), code, errOut)
		}
	}
	if out := c.ok("version"); !strings.HasPrefix(out, "callwire ") {
		t.Errorf("version: %q", out)
	}
}

// TestQuickstart follows the README: serve on the embedded default, create an organization and a
// key, post a call_received, see the answer; then rotation and revocation take effect at once,
// and SIGTERM stops the server cleanly.
func TestQuickstart(t *testing.T) {
	c := newCLI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(binary, "serve", "--listen", addr)
	srv.Dir, srv.Env = c.dir, c.env
	var logs bytes.Buffer
	srv.Stderr = &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill() })
	base := "http://" + addr
	waitUp(t, base+"/healthz")

	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "Riverside Clinic"))
	k := decode[keyOut](t, c.ok("keys", "create", "--org", org, "--scope", "org.calls.events", "--output", "json"))
	body := `{"type":"call_received","providerCallId":"a84b4c76e66710@pbx.riverside.example","occurredAt":"2026-11-20T09:30:00Z",
	  "call":{"direction":"inbound","from":{"number":"+442071234567"},"to":{"kind":"extension","extension":"101"}}}`
	post := func(headers ...string) (int, string) {
		req, _ := http.NewRequest("POST", base+"/api/v1/calls/events", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, b := post("Client-ID", k.ClientID, "Client-Secret", k.ClientSecret); status != 201 || !strings.Contains(b, `"created":true`) {
		t.Fatalf("first post: %d %s", status, b)
	}
	if status, b := post("Authorization", "Bearer "+k.ClientSecret); status != 200 || !strings.Contains(b, `"duplicate":true`) {
		t.Fatalf("retry: %d %s", status, b)
	}
	r := decode[keyOut](t, c.ok("keys", "rotate", k.ClientID, "--output", "json"))
	if status, _ := post("Client-ID", k.ClientID, "Client-Secret", k.ClientSecret); status != 401 {
		t.Errorf("old secret after rotate: %d", status)
	}
	if status, _ := post("Client-ID", k.ClientID, "Client-Secret", r.ClientSecret); status != 200 {
		t.Errorf("new secret after rotate: %d", status)
	}
	c.ok("keys", "revoke", k.ClientID)
	if status, _ := post("Client-ID", k.ClientID, "Client-Secret", r.ClientSecret); status != 401 {
		t.Errorf("after revoke: %d", status)
	}

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve exited with %v\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"trace_id"`) {
		t.Errorf("request logs carry no trace_id:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(c.dir, "data", "callwire.db")); err != nil {
		t.Errorf("embedded store file: %v", err)
	}
}

func waitUp(t *testing.T, url string) {
	t.Helper()
	testwait.Until(t, 20*time.Second, url+" to answer 200", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// TestServeWithRedisDown starts serve with broker.redis.url naming a Redis that is not running:
// it must serve (ready, with the broker degraded) rather than exit, pick Redis up once it runs,
// stop cleanly on SIGTERM, and keep its log structured: the Redis client's own lines included.
func TestServeWithRedisDown(t *testing.T) {
	redisSrv := popuptest.NewRedisServer(t)
	c := newCLI(t, "CALLWIRE_BROKER_REDIS_URL="+redisSrv.URL(), "CALLWIRE_LOG_FORMAT=json")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(binary, "serve", "--listen", addr)
	srv.Dir, srv.Env = c.dir, c.env
	var logs lockedBuffer
	srv.Stderr = &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() { srv.Process.Kill() })
	base := "http://" + addr

	// redisLines counts the lines the Redis client logged (component redis), and returns the
	// lines that are not JSON.
	redisLines := func() (n int, notJSON []string) {
		for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				notJSON = append(notJSON, line)
				continue
			}
			if rec["component"] == "redis" {
				n++
			}
		}
		return n, notJSON
	}

	// readyz polls /readyz until it names the broker as want, or serve exits.
	readyz := func(want string) {
		t.Helper()
		var last string
		if testwait.Poll(30*time.Second, func() bool {
			select {
			case err := <-exited:
				t.Fatalf("serve exited (%v) while waiting for the broker %q; last readyz %s\n%s", err, want, last, logs.String())
			default:
			}
			resp, err := http.Get(base + "/readyz")
			if err != nil {
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
			var body struct {
				Status string            `json:"status"`
				Checks map[string]string `json:"checks"`
			}
			return resp.StatusCode == 200 && json.Unmarshal(b, &body) == nil && body.Status == "ready" && body.Checks["broker"] == want
		}) {
			return
		}
		t.Fatalf("readyz never named the broker %q; last: %s", want, last)
	}
	readyz("degraded")
	// The Redis client logs its failures to dial through the service's logger. A pause of the
	// machine can let the start's ping time out before the client has given up dialling, so
	// wait for its line (the broker keeps trying while Redis is down) before Redis starts.
	if !testwait.Poll(30*time.Second, func() bool { n, _ := redisLines(); return n > 0 }) {
		t.Fatalf("no line of the Redis client (component redis) in the log while Redis was down:\n%s", logs.String())
	}
	redisSrv.Start()
	readyz("ok")

	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve exited with %v\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM\n%s", logs.String())
	}
	n, notJSON := redisLines()
	for _, line := range notJSON {
		t.Errorf("log line is not JSON: %q", line)
	}
	if n == 0 {
		t.Errorf("no line of the Redis client (component redis) in the log:\n%s", logs.String())
	}
}
