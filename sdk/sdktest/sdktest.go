// Package sdktest is a fake callwire ingest server for tests: it speaks the events endpoint the
// way the real one does (the same decoder and validation, the same deduplication of retries, 201
// and 200, the failure body, X-Trace-ID), records what it accepts, and can be told to fail. Use it
// to test a translator or anything else that sends events, without a database.
package sdktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk"
	"github.com/callwire/callwire/sdk/event"
)

// credential is the key the fake server accepts; any other is refused with 401.
func credential() sdk.Credential {
	return sdk.Credential{ClientID: "cwid_sdktest", Secret: "cwsk_sdktest"}
}

// Server is a running fake ingest server. It is safe for concurrent use.
type Server struct {
	// URL is the server's base URL, for sdk.New.
	URL string

	srv *httptest.Server

	mu       sync.Mutex
	events   []event.Event
	bodies   [][]byte
	known    map[string]bool // provider, providerCallId, dedupe key
	calls    map[string]bool // provider, providerCallId
	requests int
	failures []failure
}

type failure struct {
	status     int
	retryAfter time.Duration
}

// NewServer starts a fake server, stopped when the test ends.
func NewServer(t testing.TB) *Server {
	s := &Server{known: map[string]bool{}, calls: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// Credential returns the key the server accepts.
func (s *Server) Credential() sdk.Credential { return credential() }

// Client returns an sdk.Client for the server with short backoffs, for tests.
func (s *Server) Client(t testing.TB) *sdk.Client {
	c, err := sdk.New(s.URL, credential(), sdk.Options{MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	return c
}

// FailNext makes the next n requests fail with status (for example 503 or 500); a non-zero
// retryAfter is sent as Retry-After, in whole seconds.
func (s *Server) FailNext(n, status int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.failures = append(s.failures, failure{status: status, retryAfter: retryAfter})
	}
}

// Events returns the events accepted so far, each once, in the order they arrived.
func (s *Server) Events() []event.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event.Event(nil), s.events...)
}

// Bodies returns the JSON of each accepted event exactly as it was sent.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// Requests returns how many requests arrived, failed ones included.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Close stops the server at once: later requests fail to connect.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	trace := "sdktest-" + strconv.Itoa(s.requests)
	var f *failure
	if len(s.failures) > 0 {
		f = &s.failures[0]
		s.failures = s.failures[1:]
	}
	s.mu.Unlock()
	w.Header().Set("X-Trace-ID", trace)
	if r.Method != http.MethodPost || r.URL.Path != sdk.EventsPath {
		answer(w, http.StatusNotFound, "no such endpoint", nil)
		return
	}
	if f != nil {
		if f.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((f.retryAfter+time.Second-1)/time.Second)))
		}
		answer(w, f.status, "failing as told", nil)
		return
	}
	secret := r.Header.Get("Client-Secret")
	if a := r.Header.Get("Authorization"); secret == "" && len(a) > 7 {
		secret = a[7:]
	}
	if secret != credential().Secret {
		answer(w, http.StatusUnauthorized, "invalid credential", nil)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil {
		answer(w, http.StatusBadRequest, "could not read the body", nil)
		return
	}
	if len(body) > 1<<20 {
		answer(w, http.StatusRequestEntityTooLarge, "body is larger than 1048576 bytes", nil)
		return
	}
	parsed, _, err := event.ParseBody(body)
	if err != nil {
		v, _ := event.AsValidationError(err)
		answer(w, http.StatusBadRequest, "the body failed validation: "+err.Error(), v)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	created := false
	type callOut struct {
		ID             string   `json:"id"`
		ProviderCallID string   `json:"providerCallId"`
		Provider       string   `json:"provider"`
		Created        bool     `json:"created"`
		CRMClients     []string `json:"crmClients"`
	}
	type eventOut struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		DedupeKey string `json:"dedupeKey"`
		Duplicate bool   `json:"duplicate"`
	}
	var calls []callOut
	seenCall := map[string]bool{}
	var events []eventOut
	for _, p := range parsed {
		e := p.Event
		ck := e.EffectiveProvider() + "\x00" + e.ProviderCallID
		if !seenCall[ck] {
			seenCall[ck] = true
			c := callOut{ID: ck, ProviderCallID: e.ProviderCallID, Provider: e.EffectiveProvider(), CRMClients: []string{}}
			if !s.calls[ck] {
				c.Created, created = true, true
			}
			calls = append(calls, c)
		}
		ek := ck + "\x00" + e.DedupeKey()
		dup := s.known[ek]
		if !dup {
			s.known[ek] = true
			s.events = append(s.events, e)
			s.bodies = append(s.bodies, append([]byte(nil), p.Body...))
		}
		events = append(events, eventOut{ID: fmt.Sprintf("%x", ek), Type: string(e.Type), DedupeKey: e.DedupeKey(), Duplicate: dup})
	}
	for ck := range seenCall {
		s.calls[ck] = true
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"success": true, "calls": calls, "events": events})
}

func answer(w http.ResponseWriter, status int, msg string, v *event.ValidationError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	out := map[string]any{"success": false, "error": strconv.Itoa(status) + " " + http.StatusText(status), "message": msg}
	if v != nil {
		out["problems"] = v.Problems
	}
	json.NewEncoder(w).Encode(out)
}
