package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

// backend opens a fresh, migrated store for one test.
type backend struct {
	name string
	db   func(t *testing.T) config.Database
}

func backends() []backend {
	return []backend{
		{"embedded", func(t *testing.T) config.Database {
			d := config.Defaults().Database
			d.Path = filepath.Join(t.TempDir(), "callwire.db")
			return d
		}},
		{"postgres", func(t *testing.T) config.Database {
			d := config.Defaults().Database
			d.URL = pgtest.URL(t)
			return d
		}},
	}
}

// forEachBackend runs fn as a subtest against every store.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

// popupRecorder is a Publisher that keeps what it is given.
type popupRecorder struct {
	mu     sync.Mutex
	popups []popup.Popup
}

func (p *popupRecorder) Publish(_ context.Context, pp popup.Popup) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.popups = append(p.popups, pp)
	return nil
}

func (p *popupRecorder) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.popups)
}

// env is a running server with one organization and one all-events key.
type env struct {
	t        *testing.T
	base     string
	st       store.Store
	org      string
	clientID string
	secret   string
	popups   *popupRecorder
	client   *http.Client
}

type option func(*config.Config, *server.Options)

func start(t *testing.T, db config.Database, opts ...option) *env {
	t.Helper()
	ctx := t.Context()
	cfg := config.Defaults()
	cfg.Database = db
	st, err := server.OpenStore(ctx, db)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	rec := &popupRecorder{}
	so := server.Options{Store: st, Logger: slog.New(slog.DiscardHandler), Publisher: rec}
	for _, o := range opts {
		o(&cfg, &so)
	}
	srv, err := server.New(context.WithoutCancel(ctx), cfg, so)
	if err != nil {
		t.Fatal(err)
	}
	base, client := serveOn(t, srv)
	e := &env{t: t, base: base, st: st, popups: rec, client: client}
	e.org = e.newOrg("Riverside Clinic")
	e.clientID, e.secret = e.newKey(e.org, nil, auth.ScopeCallsEvents)
	return e
}

// serveOn serves srv on a loopback port until the test ends, and returns its base URL and a
// client for it. At the end the client's idle connections are closed before the server shuts
// down: a connection the client dialled but never used (it loses the race to another, freed one
// when many requests start at once) counts as idle to the server only after five seconds.
// Shutdown is bounded by the production default.
func serveOn(t *testing.T, srv *server.Server) (string, *http.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		client.CloseIdleConnections()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), config.Defaults().Server.ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return "http://" + ln.Addr().String(), client
}

func (e *env) newOrg(name string) string {
	e.t.Helper()
	id := "org-" + strings.ReplaceAll(strings.ToLower(name), " ", "-") + "-" + time.Now().Format("150405.000000000")
	if err := e.st.CreateOrg(e.t.Context(), store.Org{ID: id, Name: name, CreatedAt: time.Now().UTC()}); err != nil {
		e.t.Fatalf("create org: %v", err)
	}
	return id
}

func (e *env) newKey(org string, expires *time.Time, scopes ...string) (clientID, secret string) {
	e.t.Helper()
	c := auth.NewCredential()
	k := store.Key{ClientID: c.ClientID, OrgID: org, Scopes: scopes, SecretHash: c.SecretHash,
		SecretLast8: c.SecretLast8, CreatedAt: time.Now().UTC(), ExpiresAt: expires}
	if err := e.st.CreateKey(e.t.Context(), k); err != nil {
		e.t.Fatalf("create key: %v", err)
	}
	return c.ClientID, c.Secret
}

// reply is a decoded response.
type reply struct {
	status int
	header http.Header
	raw    []byte
	body   struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
		Message string `json:"message"`
		Calls   []struct {
			ID             string         `json:"id"`
			ProviderCallID string         `json:"providerCallId"`
			Provider       string         `json:"provider"`
			Created        bool           `json:"created"`
			CRMClients     []popup.Client `json:"crmClients"`
		} `json:"calls"`
		Events []struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			DedupeKey string `json:"dedupeKey"`
			Duplicate bool   `json:"duplicate"`
		} `json:"events"`
		Fields []struct {
			Field   string `json:"field"`
			Problem string `json:"problem"`
		} `json:"problems"`
		Scopes []string `json:"missingScopes"`
	}
}

// do sends a request; headers alternate name, value.
func (e *env) do(method, path, body string, headers ...string) reply {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.base+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var r reply
	r.status, r.header = resp.StatusCode, resp.Header
	r.raw, _ = io.ReadAll(resp.Body)
	if len(r.raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(r.raw, &r.body); err != nil {
			e.t.Fatalf("response is not JSON: %v: %s", err, r.raw)
		}
	}
	if r.header.Get("X-Trace-ID") == "" {
		e.t.Errorf("%s %s answered %d without X-Trace-ID", method, path, r.status)
	}
	if r.status >= 400 {
		if r.body.Success || r.body.Error == "" || r.body.Message == "" {
			e.t.Errorf("failure body not {success:false, error, message}: %s", r.raw)
		}
		if bytes.Contains(r.raw, []byte("goroutine ")) || bytes.Contains(r.raw, []byte(".go:")) {
			e.t.Errorf("stack trace in response: %s", r.raw)
		}
	}
	return r
}

// post sends body to the events endpoint with the env's key.
func (e *env) post(body string) reply {
	e.t.Helper()
	return e.do("POST", "/api/v1/calls/events", body, "Content-Type", "application/json",
		"Client-ID", e.clientID, "Client-Secret", e.secret)
}

func (e *env) postAs(clientID, secret, body string) reply {
	e.t.Helper()
	return e.do("POST", "/api/v1/calls/events", body, "Content-Type", "application/json",
		"Client-ID", clientID, "Client-Secret", secret)
}

// call returns the stored call and its events, or fails the test.
func (e *env) call(org, provider, providerCallID string) (store.Call, []store.Event) {
	e.t.Helper()
	c, evs, err := e.st.GetCall(e.t.Context(), org, provider, providerCallID)
	if err != nil {
		e.t.Fatalf("get call %s/%s: %v", provider, providerCallID, err)
	}
	return c, evs
}

// absent fails the test if the call is on file.
func (e *env) absent(org, provider, providerCallID string) {
	e.t.Helper()
	if _, _, err := e.st.GetCall(e.t.Context(), org, provider, providerCallID); err == nil {
		e.t.Errorf("call %s/%s was stored; want nothing stored", provider, providerCallID)
	}
}

// newSecretFor rotates the key and returns its new secret.
func newSecretFor(t *testing.T, e *env, clientID string) string {
	t.Helper()
	s := auth.NewSecret()
	if err := e.st.RotateKey(t.Context(), clientID, auth.HashSecret(s), auth.SecretLast8(s), time.Now().UTC()); err != nil {
		t.Fatalf("rotate: %v", err)
	}
	return s
}

// rawHeadersOnly writes a request's head on a fresh connection, sends no body, and returns the
// response's status, header and body.
func (e *env) rawHeadersOnly(head string) (int, http.Header, string) {
	e.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}
