package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/lookup"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/store"
)

const token = "example-adapter-token-0001"

// startAdapter builds the adapter, runs it as a child process on clients, and returns its base URL.
func startAdapter(t *testing.T, clients string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lookup-adapter")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-clients", clients)
	cmd.Env = append(os.Environ(), "LOOKUP_ADAPTER_TOKEN="+token)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("adapter exited with %v after SIGTERM", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("adapter did not stop on SIGTERM")
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("adapter did not report its address: %v", err)
	}
	_, rest, ok := strings.Cut(line, "listening on ")
	if !ok {
		t.Fatalf("unexpected first line %q", line)
	}
	return strings.Fields(rest)[0]
}

// get asks the adapter the way callwire does.
func get(t *testing.T, base, query, auth string) (int, map[string]json.RawMessage) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"/lookup?"+query, nil)
	req.Header.Set("Accept", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("answer is not a JSON object: %v", err)
	}
	return resp.StatusCode, body
}

func TestAdapterOverHTTP(t *testing.T) {
	base := startAdapter(t, "clients.csv")
	bearer := "Bearer " + token
	for _, tc := range []struct {
		query, auth string
		status      int
		clients     string
	}{
		{"number=%2B442071234567", bearer, 200, `[{"externalId":"p-1001","name":"Ada Lovelace"},{"externalId":"p-1002","name":"Byron Lovelace"}]`},
		{"number=%2B441632960123", bearer, 200, `[{"externalId":"p-2001","name":"Charles Babbage"}]`},
		{"number=%2B15550100", bearer, 200, `[]`},
		{"number=%2B442071234567", "", 401, ""},
		{"number=%2B442071234567", "Bearer wrong", 401, ""},
		{"number=+442071234567", bearer, 400, ""}, // an unencoded + arrives as a space
		{"", bearer, 400, ""},
	} {
		status, body := get(t, base, tc.query, tc.auth)
		if status != tc.status {
			t.Errorf("?%s auth %q: status %d, want %d", tc.query, tc.auth, status, tc.status)
			continue
		}
		if tc.clients != "" && string(body["clients"]) != tc.clients {
			t.Errorf("?%s: clients %s, want %s", tc.query, body["clients"], tc.clients)
		}
	}
}

// staticOrg is an OrgReader with one organization.
type staticOrg store.Lookup

func (s staticOrg) GetOrg(_ context.Context, id string) (store.Org, error) {
	return store.Org{ID: id, Lookup: store.Lookup(s)}, nil
}

// TestAdapterThroughCallwireLookup asks the adapter through callwire's own lookup client, from
// a JSON clients file.
func TestAdapterThroughCallwireLookup(t *testing.T) {
	file := filepath.Join(t.TempDir(), "clients.json")
	if err := os.WriteFile(file, []byte(`[
		{"number": "+33142868200", "externalId": "fr-7", "name": "Émilie du Châtelet"}
	]`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startAdapter(t, file)
	l, err := lookup.New(lookup.Options{Orgs: staticOrg{URL: base + "/lookup", Token: token}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.Lookup(t.Context(), "org-1", "+33142868200")
	if err != nil || len(got) != 1 || got[0] != (popup.Client{ExternalID: "fr-7", Name: "Émilie du Châtelet"}) {
		t.Errorf("Lookup = %+v, %v", got, err)
	}
	if got, err := l.Lookup(t.Context(), "org-1", "+442071234567"); err != nil || len(got) != 0 {
		t.Errorf("unknown number: %+v, %v", got, err)
	}
	bad, err := lookup.New(lookup.Options{Orgs: staticOrg{URL: base + "/lookup", Token: "wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Lookup(t.Context(), "org-1", "+33142868200"); !errors.Is(err, lookup.ErrRefused) {
		t.Errorf("wrong token: %v, want ErrRefused", err)
	}
	var _ ingest.CallerLookup = l
}
