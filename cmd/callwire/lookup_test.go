package main_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

type orgOut struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Lookup *struct {
		URL     string `json:"url"`
		Token   string `json:"token"`
		Timeout string `json:"timeout"`
	} `json:"lookup"`
}

const token = "clinic-secret-token-0123456789-WXYZ"

// orgLookup exercises orgs update against whatever store c's environment names.
func orgLookup(t *testing.T, c *cli) {
	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "Riverside Clinic"))
	if o := decode[[]orgOut](t, c.ok("orgs", "list", "-o", "json")); len(o) != 1 || o[0].Lookup != nil {
		t.Fatalf("new organization: %+v, want no lookup", o)
	}

	out := c.ok("orgs", "update", org, "--lookup-url", "https://crm.riverside.example/lookup?clinic=7",
		"--lookup-token", token, "--lookup-timeout", "450ms", "--output", "json")
	o := decode[orgOut](t, out)
	if o.ID != org || o.Name != "Riverside Clinic" || o.Lookup == nil ||
		o.Lookup.URL != "https://crm.riverside.example/lookup?clinic=7" || o.Lookup.Token != "…WXYZ" || o.Lookup.Timeout != "450ms" {
		t.Errorf("orgs update json: %s", out)
	}
	text := c.ok("orgs", "update", org, "--lookup-url", "https://crm.riverside.example/lookup", "--lookup-token", token)
	if !strings.Contains(text, "https://crm.riverside.example/lookup") || !strings.Contains(text, "…WXYZ") || !strings.Contains(text, "server default") {
		t.Errorf("orgs update text: %s", text)
	}
	list := c.ok("orgs", "list", "-o", "json")
	listText := c.ok("orgs", "list")
	for _, s := range []string{out, text, list, listText} {
		if strings.Contains(s, token) || strings.Contains(s, token[:12]) {
			t.Errorf("the token is printed: %s", s)
		}
	}
	if l := decode[[]orgOut](t, list); l[0].Lookup == nil || l[0].Lookup.Token != "…WXYZ" || l[0].Lookup.Timeout != "" {
		t.Errorf("orgs list json: %s", list)
	}
	if !strings.Contains(listText, "LOOKUP") || !strings.Contains(listText, "yes") {
		t.Errorf("orgs list text: %s", listText)
	}

	// Each update replaces the whole setting; a short token is not shown at all.
	o = decode[orgOut](t, c.ok("orgs", "update", org, "--lookup-url", "http://10.0.0.5:8081/", "--lookup-token", "short", "-o", "json"))
	if o.Lookup == nil || o.Lookup.Token != "…" || o.Lookup.Timeout != "" {
		t.Errorf("short token: %+v", o.Lookup)
	}
	o = decode[orgOut](t, c.ok("orgs", "update", org, "--lookup-url", "http://10.0.0.5:8081/", "-o", "json"))
	if o.Lookup == nil || o.Lookup.Token != "" {
		t.Errorf("url only: %+v", o.Lookup)
	}

	if text := c.ok("orgs", "update", org, "--lookup-url", ""); !strings.Contains(text, "removed") {
		t.Errorf("removal: %s", text)
	}
	if l := decode[[]orgOut](t, c.ok("orgs", "list", "-o", "json")); l[0].Lookup != nil {
		t.Errorf("after removal: %+v", l[0].Lookup)
	}
	if listText := c.ok("orgs", "list"); !strings.Contains(listText, "no") {
		t.Errorf("orgs list after removal: %s", listText)
	}

	if _, errOut, code := c.run("orgs", "update", "no-such-org", "--lookup-url", "https://crm.example/"); code != 1 || !strings.Contains(errOut, "no-such-org") {
		t.Errorf("unknown organization: exit %d, %s", code, errOut)
	}
}

func TestOrgLookupEmbedded(t *testing.T) {
	orgLookup(t, newCLI(t))
}

func TestOrgLookupPostgres(t *testing.T) {
	orgLookup(t, newCLI(t, "CALLWIRE_DATABASE_URL="+pgtest.URL(t)))
}

func TestOrgUpdateUsageErrors(t *testing.T) {
	c := newCLI(t)
	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "X"))
	u := "https://crm.example/lookup"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"orgs", "update", org}, "--lookup-url"},
		{[]string{"orgs", "update", "--lookup-url", u}, "argument"},
		{[]string{"orgs", "update", org, "--lookup-url", "/lookup"}, "absolute"},
		{[]string{"orgs", "update", org, "--lookup-url", "crm.example/lookup"}, "absolute"},
		{[]string{"orgs", "update", org, "--lookup-url", "ftp://crm.example/lookup"}, "http"},
		{[]string{"orgs", "update", org, "--lookup-url", "https://user:pw@crm.example/"}, "credentials"},
		{[]string{"orgs", "update", org, "--lookup-url", u, "--lookup-timeout", "0s"}, "positive"},
		{[]string{"orgs", "update", org, "--lookup-url", u, "--lookup-timeout", "-1s"}, "positive"},
		{[]string{"orgs", "update", org, "--lookup-url", u, "--lookup-timeout", "11s"}, "10s"},
		{[]string{"orgs", "update", org, "--lookup-url", u, "--lookup-timeout", "soon"}, "duration"},
		{[]string{"orgs", "update", org, "--lookup-url", u, "--lookup-token", "has space"}, "--lookup-token"},
		{[]string{"orgs", "update", org, "--lookup-url", u, "--lookup-token", ""}, "--lookup-token"},
		{[]string{"orgs", "update", org, "--lookup-url", "", "--lookup-token", "abc"}, "--lookup-url"},
		{[]string{"orgs", "update", org, "--lookup-url", u, "--output", "yaml"}, "--output"},
		{[]string{"orgs", "update", org, "--lookup-urll", u}, "lookup-urll"},
	} {
		_, errOut, code := c.run(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("callwire %s: exit %d, stderr %q; want exit 2 mentioning %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
	if l := decode[[]orgOut](t, c.ok("orgs", "list", "-o", "json")); l[0].Lookup != nil {
		t.Errorf("a refused update changed the organization: %+v", l[0].Lookup)
	}
}

// TestServeAsksTheLookup runs callwire serve, points an organization at an adapter with orgs
// update, and sees the adapter's clients in the answer to a call_received.
func TestServeAsksTheLookup(t *testing.T) {
	var (
		mu           sync.Mutex
		auth, number string
	)
	adapter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth, number = r.Header.Get("Authorization"), r.URL.Query().Get("number")
		mu.Unlock()
		fmt.Fprint(w, `{"clients":[{"externalId":"p-1","name":"Ada Lovelace"}]}`)
	}))
	defer adapter.Close()

	c := newCLI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(binary, "serve", "--listen", addr)
	srv.Dir, srv.Env = c.dir, c.env
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	base := "http://" + addr
	waitUp(t, base+"/healthz")

	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "Riverside Clinic"))
	c.ok("orgs", "update", org, "--lookup-url", adapter.URL+"/lookup", "--lookup-token", token)
	k := decode[keyOut](t, c.ok("keys", "create", "--org", org, "--scope", "org.calls.events", "--output", "json"))
	body := `{"type":"call_received","providerCallId":"lookup-1","occurredAt":"2026-11-20T09:30:00Z",
	  "call":{"direction":"inbound","from":{"number":"+442071234567"}}}`
	req, _ := http.NewRequest("POST", base+"/api/v1/calls/events", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+k.ClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 || !strings.Contains(string(b), `"crmClients":[{"externalId":"p-1","name":"Ada Lovelace"}]`) {
		t.Errorf("post: %d %s", resp.StatusCode, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if auth != "Bearer "+token || number != "+442071234567" {
		t.Errorf("adapter saw Authorization %q, number %q", auth, number)
	}
}
