package lookup_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/lookup"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/metrictest"
	"github.com/callwire/callwire/internal/testclock"
	"github.com/callwire/callwire/sdk/sdktest"
)

const number = "+442071234567"

// orgs is an OrgReader whose settings a test can change; it counts reads.
type orgs struct {
	mu    sync.Mutex
	m     map[string]store.Lookup
	err   error
	reads atomic.Int64
}

func newOrgs() *orgs { return &orgs{m: map[string]store.Lookup{}} }

func (o *orgs) set(id string, l store.Lookup) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[id] = l
}

func (o *orgs) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.err = err
}

func (o *orgs) GetOrg(_ context.Context, id string) (store.Org, error) {
	o.reads.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return store.Org{}, o.err
	}
	l, ok := o.m[id]
	if !ok {
		return store.Org{}, fmt.Errorf("no org %q: %w", id, store.ErrNotFound)
	}
	return store.Org{ID: id, Name: id, Lookup: l}, nil
}

// adapter is a client system's endpoint whose answer a test can change; it counts and keeps
// requests. newAdapter serves it on a real socket; inProcess answers without one.
type adapter struct {
	URL      string
	mu       sync.Mutex
	handler  http.HandlerFunc
	requests []*http.Request
	hits     atomic.Int64
}

func newAdapter(t *testing.T, h http.HandlerFunc) *adapter {
	a := &adapter{handler: h}
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	a.URL = srv.URL
	t.Cleanup(srv.Close)
	return a
}

func (a *adapter) serve(w http.ResponseWriter, r *http.Request) {
	a.hits.Add(1)
	a.mu.Lock()
	a.requests = append(a.requests, r.Clone(context.WithoutCancel(r.Context())))
	h := a.handler
	a.mu.Unlock()
	h(w, r)
}

// inProcess returns an adapter at url and the transport that reaches it: each request is
// answered in the calling goroutine, with no socket, so a test can run inside a synctest bubble
// (whose clock stands still while any of its goroutines waits on the network).
func inProcess(url string, h http.HandlerFunc) (*adapter, http.RoundTripper) {
	a := &adapter{URL: url, handler: h}
	return a, sdktest.InProcess(http.HandlerFunc(a.serve))
}

func (a *adapter) setHandler(h http.HandlerFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.handler = h
}

func (a *adapter) last() *http.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests[len(a.requests)-1]
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

// byNumber answers from a directory of numbers.
func byNumber(dir map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		clients, ok := dir[r.URL.Query().Get("number")]
		if !ok {
			clients = ""
		}
		fmt.Fprintf(w, `{"clients":[%s]}`, clients)
	}
}

// slow answers only after d, or when the request is abandoned.
func slow(d time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(d):
			fmt.Fprint(w, `{"clients":[]}`)
		case <-r.Context().Done():
		}
	}
}

type fixture struct {
	l    *lookup.Lookup
	orgs *orgs
	clk  *testclock.Clock
	reg  *prometheus.Registry
}

func newLookup(t *testing.T, o lookup.Options) fixture {
	t.Helper()
	f := fixture{orgs: newOrgs(), clk: testclock.New(time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)), reg: prometheus.NewRegistry()}
	if o.Orgs == nil {
		o.Orgs = f.orgs
	}
	if o.Now == nil {
		o.Now = f.clk.Now
	}
	o.Registerer = f.reg
	l, err := lookup.New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.l = l
	return f
}

func TestAnswers(t *testing.T) {
	a := newAdapter(t, byNumber(map[string]string{
		"+442071234567": `{"externalId":"p-1","name":"Ada Lovelace"}`,
		"+441234567890": `{"externalId":"p-2","name":"Charles Babbage"},{"externalId":"p-3","name":"Mary Babbage","extra":true}`,
	}))
	f := newLookup(t, lookup.Options{})
	f.orgs.set("org-1", store.Lookup{URL: a.URL + "/lookup?clinic=7", Token: "s3cret-token"})
	for _, tc := range []struct {
		number string
		want   []popup.Client
	}{
		{"+442071234567", []popup.Client{{ExternalID: "p-1", Name: "Ada Lovelace"}}},
		{"+441234567890", []popup.Client{{ExternalID: "p-2", Name: "Charles Babbage"}, {ExternalID: "p-3", Name: "Mary Babbage"}}},
		{"+15550100", []popup.Client{}},
	} {
		got, err := f.l.Lookup(t.Context(), "org-1", tc.number)
		if err != nil {
			t.Fatalf("Lookup(%s): %v", tc.number, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || got == nil {
			t.Errorf("Lookup(%s) = %#v, want %#v", tc.number, got, tc.want)
		}
		r := a.last()
		if r.Method != http.MethodGet || r.URL.Path != "/lookup" {
			t.Errorf("request %s %s, want GET /lookup", r.Method, r.URL.Path)
		}
		if n := r.URL.Query().Get("number"); n != tc.number {
			t.Errorf("adapter saw number %q, want %q (a + must arrive as +)", n, tc.number)
		}
		if strings.Contains(r.URL.RawQuery, "+") {
			t.Errorf("raw query %q: the + must be percent-encoded", r.URL.RawQuery)
		}
		if r.URL.Query().Get("clinic") != "7" {
			t.Errorf("the URL's own query was lost: %q", r.URL.RawQuery)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer s3cret-token" {
			t.Errorf("Authorization = %q", got)
		}
		if got := r.Header.Get("Accept"); got != "application/json" {
			t.Errorf("Accept = %q", got)
		}
	}
	if got := metrictest.Sum(t, f.reg, "callwire_lookup_results_total", "result", "matched"); got != 2 {
		t.Errorf("matched = %v, want 2", got)
	}
	if got := metrictest.Sum(t, f.reg, "callwire_lookup_request_seconds"); got != 3 {
		t.Errorf("request latency samples = %v, want 3", got)
	}

	// Without a token, no Authorization header.
	f.orgs.set("org-2", store.Lookup{URL: a.URL})
	if _, err := f.l.Lookup(t.Context(), "org-2", number); err != nil {
		t.Fatal(err)
	}
	if h, ok := a.last().Header["Authorization"]; ok {
		t.Errorf("Authorization sent without a token: %q", h)
	}
}

func TestNotConfigured(t *testing.T) {
	f := newLookup(t, lookup.Options{})
	f.orgs.set("org-none", store.Lookup{})
	for _, org := range []string{"org-none", "org-missing"} {
		if _, err := f.l.Lookup(t.Context(), org, number); !errors.Is(err, lookup.ErrNotConfigured) {
			t.Errorf("Lookup(%s) error = %v, want lookup.ErrNotConfigured", org, err)
		}
	}
}

// TestMayWait: a lookup may wait exactly when it would ask a client system, or cannot tell
// because the organization's settings are unreadable; the answer follows the settings as Lookup
// does, and is read within the same settings TTL.
func TestMayWait(t *testing.T) {
	f := newLookup(t, lookup.Options{SettingsTTL: 5 * time.Second})
	f.orgs.set("org-none", store.Lookup{})
	f.orgs.set("org-set", store.Lookup{URL: "https://crm.example/lookup"})
	for org, want := range map[string]bool{"org-none": false, "org-missing": false, "org-set": true} {
		if got := f.l.MayWait(t.Context(), org); got != want {
			t.Errorf("MayWait(%s) = %t, want %t", org, got, want)
		}
	}
	if r := f.orgs.reads.Load(); r != 3 {
		t.Errorf("settings read %d times, want once per organization", r)
	}
	f.orgs.set("org-none", store.Lookup{URL: "https://crm.example/lookup"})
	f.clk.Advance(6 * time.Second)
	if !f.l.MayWait(t.Context(), "org-none") {
		t.Error("MayWait after the organization set an endpoint = false, want true")
	}
	f.orgs.fail(fmt.Errorf("db down: %w", store.ErrUnavailable))
	if !f.l.MayWait(t.Context(), "org-unread") {
		t.Error("MayWait with the settings unreadable = false, want true")
	}
}

func TestFailures(t *testing.T) {
	big := `{"clients":[` + strings.Repeat(`{"externalId":"x","name":"y"},`, 2000) + `{"externalId":"x","name":"y"}]}`
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want error
	}{
		{"400", answer(400, `{"error":"bad number"}`), lookup.ErrRefused},
		{"401", answer(401, ``), lookup.ErrRefused},
		{"404", answer(404, `{"clients":[]}`), lookup.ErrRefused},
		{"429", answer(429, ``), lookup.ErrRefused},
		{"500", answer(500, `oops`), lookup.ErrAdapter},
		{"503", answer(503, ``), lookup.ErrAdapter},
		{"204", answer(204, ``), lookup.ErrAdapter},
		{"redirect not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, lookup.ErrAdapter},
		{"invalid JSON", answer(200, `{"clients":[{"externalId":"p-1","name":"Ada"`), lookup.ErrBadAnswer},
		{"empty body", answer(200, ``), lookup.ErrBadAnswer},
		{"HTML", answer(200, `<html>login</html>`), lookup.ErrBadAnswer},
		{"trailing garbage", answer(200, `{"clients":[]} {}`), lookup.ErrBadAnswer},
		{"top-level array", answer(200, `[{"externalId":"p-1","name":"Ada"}]`), lookup.ErrBadAnswer},
		{"null", answer(200, `null`), lookup.ErrBadAnswer},
		{"no clients", answer(200, `{"matches":[]}`), lookup.ErrBadAnswer},
		{"clients null", answer(200, `{"clients":null}`), lookup.ErrBadAnswer},
		{"clients object", answer(200, `{"clients":{"externalId":"p-1","name":"Ada"}}`), lookup.ErrBadAnswer},
		{"client not object", answer(200, `{"clients":["p-1"]}`), lookup.ErrBadAnswer},
		{"client null", answer(200, `{"clients":[null]}`), lookup.ErrBadAnswer},
		{"externalId number", answer(200, `{"clients":[{"externalId":17,"name":"Ada"}]}`), lookup.ErrBadAnswer},
		{"externalId missing", answer(200, `{"clients":[{"name":"Ada"}]}`), lookup.ErrBadAnswer},
		{"name empty", answer(200, `{"clients":[{"externalId":"p-1","name":""}]}`), lookup.ErrBadAnswer},
		{"name blank", answer(200, `{"clients":[{"externalId":"p-1","name":"  "}]}`), lookup.ErrBadAnswer},
		{"name null", answer(200, `{"clients":[{"externalId":"p-1","name":null}]}`), lookup.ErrBadAnswer},
		{"name in other case", answer(200, `{"clients":[{"externalId":"p-1","Name":"Ada"}]}`), lookup.ErrBadAnswer},
		{"oversized", answer(200, big), lookup.ErrBadAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdapter(t, tc.h)
			f := newLookup(t, lookup.Options{MaxBody: 32 << 10, BreakerFailures: 100})
			f.orgs.set("org-1", store.Lookup{URL: a.URL, Token: "tok-abcdef"})
			for i := range 2 {
				got, err := f.l.Lookup(t.Context(), "org-1", number)
				if !errors.Is(err, tc.want) || got != nil {
					t.Fatalf("Lookup = %v, %v; want nil, %v", got, err, tc.want)
				}
				if strings.Contains(err.Error(), "tok-abcdef") || strings.Contains(err.Error(), "2071234567") {
					t.Errorf("error leaks the token or the number: %v", err)
				}
				if n := a.hits.Load(); n != int64(i+1) {
					t.Errorf("adapter asked %d times after %d lookups: failures must not be cached", n, i+1)
				}
			}
		})
	}
}

// TestSlowAdapterBoundedByTimeout runs in a synctest bubble, so that the time a lookup takes is
// exactly the time it waited, whatever else the machine is doing.
func TestSlowAdapterBoundedByTimeout(t *testing.T) { synctest.Test(t, testSlowAdapterBoundedByTimeout) }

func testSlowAdapterBoundedByTimeout(t *testing.T) {
	a, transport := inProcess("http://crm.riverside.example/lookup", slow(5*time.Second))
	f := newLookup(t, lookup.Options{Timeout: 150 * time.Millisecond, Transport: transport})
	f.orgs.set("own", store.Lookup{URL: a.URL, Timeout: 100 * time.Millisecond})
	f.orgs.set("default", store.Lookup{URL: a.URL})
	for _, tc := range []struct {
		org     string
		timeout time.Duration
	}{{"own", 100 * time.Millisecond}, {"default", 150 * time.Millisecond}} {
		start := time.Now()
		_, err := f.l.Lookup(t.Context(), tc.org, number)
		took := time.Since(start)
		if !errors.Is(err, lookup.ErrTimeout) {
			t.Errorf("%s: error %v, want ErrTimeout", tc.org, err)
		}
		if took != tc.timeout {
			t.Errorf("%s: Lookup took %v, want %v", tc.org, took, tc.timeout)
		}
	}
	if got := metrictest.Sum(t, f.reg, "callwire_lookup_results_total", "result", "timeout"); got != 2 {
		t.Errorf("timeout results = %v, want 2", got)
	}
}

func TestSlowBodyBoundedByTimeout(t *testing.T) {
	a := newAdapter(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		fmt.Fprint(w, `{"clients":[`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	f := newLookup(t, lookup.Options{})
	f.orgs.set("org-1", store.Lookup{URL: a.URL, Timeout: 100 * time.Millisecond})
	// The body never ends, so returning at all is the timeout's doing; the bound on the wait
	// only has to tell it from the test's own deadline, with room for a machine that pauses.
	start := time.Now()
	_, err := f.l.Lookup(t.Context(), "org-1", number)
	if !errors.Is(err, lookup.ErrTimeout) || time.Since(start) > 5*time.Second {
		t.Errorf("Lookup = %v after %v; want ErrTimeout after about 100ms", err, time.Since(start))
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	f := newLookup(t, lookup.Options{})
	f.orgs.set("org-1", store.Lookup{URL: "http://" + addr + "/lookup"})
	start := time.Now()
	_, err = f.l.Lookup(t.Context(), "org-1", number)
	if !errors.Is(err, lookup.ErrAdapter) || time.Since(start) > 500*time.Millisecond {
		t.Errorf("Lookup = %v after %v; want ErrAdapter at once", err, time.Since(start))
	}
}

// TestBreaker runs in a synctest bubble: the breaker's open period passes on the bubble's
// clock, not the machine's, and an open breaker must answer without any time passing at all.
func TestBreaker(t *testing.T) { synctest.Test(t, testBreaker) }

func testBreaker(t *testing.T) {
	const failures, open = 3, 30 * time.Second
	a, transport := inProcess("http://crm.riverside.example/lookup", answer(500, ``))
	f := newLookup(t, lookup.Options{BreakerFailures: failures, BreakerOpen: open, Transport: transport})
	f.orgs.set("down", store.Lookup{URL: a.URL})
	f.orgs.set("other", store.Lookup{URL: a.URL + "/other"})

	for i := range failures {
		if _, err := f.l.Lookup(t.Context(), "down", number); !errors.Is(err, lookup.ErrAdapter) {
			t.Fatalf("lookup %d: %v, want ErrAdapter", i, err)
		}
	}
	for range 20 {
		start := time.Now()
		if _, err := f.l.Lookup(t.Context(), "down", number); !errors.Is(err, lookup.ErrBreakerOpen) {
			t.Fatalf("with the breaker open: %v, want ErrBreakerOpen", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("an open breaker took %v to answer; it must not wait", d)
		}
	}
	if n := a.hits.Load(); n != failures {
		t.Errorf("adapter asked %d times, want %d: an open breaker does not ask", n, failures)
	}
	if got := metrictest.Sum(t, f.reg, "callwire_lookup_breaker_transitions_total", "to", "open"); got != 1 {
		t.Errorf("transitions to open = %v, want 1", got)
	}
	if got := metrictest.Sum(t, f.reg, "callwire_lookup_results_total", "result", "breaker_open"); got != 20 {
		t.Errorf("breaker_open results = %v, want 20", got)
	}

	// Breakers are per organization: another one is still asked. (Its failures count for it.)
	if _, err := f.l.Lookup(t.Context(), "other", number); !errors.Is(err, lookup.ErrAdapter) {
		t.Errorf("another organization: %v, want ErrAdapter (asked)", err)
	}

	// Half-open after BreakerOpen: one request goes through; a failure opens the breaker again.
	time.Sleep(open + time.Millisecond) // past the open period, on the bubble's clock
	hits := a.hits.Load()
	if _, err := f.l.Lookup(t.Context(), "down", number); !errors.Is(err, lookup.ErrAdapter) {
		t.Fatalf("half-open probe: %v, want ErrAdapter", err)
	}
	if _, err := f.l.Lookup(t.Context(), "down", number); !errors.Is(err, lookup.ErrBreakerOpen) {
		t.Fatalf("after a failed probe: %v, want ErrBreakerOpen", err)
	}
	if n := a.hits.Load() - hits; n != 1 {
		t.Errorf("half-open breaker let %d requests through, want 1", n)
	}

	// The adapter recovers: the next probe succeeds and closes the breaker.
	a.setHandler(answer(200, `{"clients":[{"externalId":"p-1","name":"Ada"}]}`))
	time.Sleep(open + time.Millisecond) // past the open period, on the bubble's clock
	if got, err := f.l.Lookup(t.Context(), "down", number); err != nil || len(got) != 1 {
		t.Fatalf("probe after recovery: %v, %v", got, err)
	}
	if _, err := f.l.Lookup(t.Context(), "down", "+15550100"); err != nil {
		t.Fatalf("closed breaker: %v", err)
	}
	if got := metrictest.Sum(t, f.reg, "callwire_lookup_breaker_transitions_total", "to", "closed"); got != 1 {
		t.Errorf("transitions to closed = %v, want 1", got)
	}
	if got := metrictest.Sum(t, f.reg, "callwire_lookup_breaker_transitions_total", "to", "half_open"); got != 2 {
		t.Errorf("transitions to half_open = %v, want 2", got)
	}
}

func TestBreakerCountsTimeoutsNotCallerCancellation(t *testing.T) {
	synctest.Test(t, testBreakerCountsTimeoutsNotCallerCancellation)
}

func testBreakerCountsTimeoutsNotCallerCancellation(t *testing.T) {
	a, transport := inProcess("http://crm.riverside.example/lookup", slow(5*time.Second))
	f := newLookup(t, lookup.Options{BreakerFailures: 2, BreakerOpen: time.Minute, Transport: transport})
	f.orgs.set("org-1", store.Lookup{URL: a.URL, Timeout: 2 * time.Second})
	// The caller gives up before the organization's timeout: that says nothing of the adapter.
	for range 5 {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		_, err := f.l.Lookup(ctx, "org-1", number)
		cancel()
		if err == nil || errors.Is(err, lookup.ErrBreakerOpen) {
			t.Fatalf("caller gone: %v", err)
		}
	}
	// Timeouts do count.
	f.orgs.set("org-2", store.Lookup{URL: a.URL, Timeout: 30 * time.Millisecond})
	for range 2 {
		if _, err := f.l.Lookup(t.Context(), "org-2", number); !errors.Is(err, lookup.ErrTimeout) {
			t.Fatalf("want ErrTimeout, got %v", err)
		}
	}
	if _, err := f.l.Lookup(t.Context(), "org-2", number); !errors.Is(err, lookup.ErrBreakerOpen) {
		t.Errorf("after 2 timeouts: %v, want ErrBreakerOpen", err)
	}
	if got := metrictest.Sum(t, f.reg, "callwire_lookup_breaker_transitions_total", "to", "open"); got != 1 {
		t.Errorf("transitions to open = %v, want 1 (org-2 only)", got)
	}
}

func TestAnswerCache(t *testing.T) {
	a := newAdapter(t, byNumber(map[string]string{number: `{"externalId":"p-1","name":"Ada"}`}))
	f := newLookup(t, lookup.Options{CacheTTL: time.Minute, MissTTL: 15 * time.Second, SettingsTTL: time.Hour})
	f.orgs.set("org-1", store.Lookup{URL: a.URL})
	f.orgs.set("org-2", store.Lookup{URL: a.URL})
	const unknown = "+15550100"
	ask := func(org, n string, wantHits int64, wantClients int) {
		t.Helper()
		got, err := f.l.Lookup(t.Context(), org, n)
		if err != nil || len(got) != wantClients {
			t.Fatalf("Lookup(%s, %s) = %v, %v; want %d clients", org, n, got, err, wantClients)
		}
		if h := a.hits.Load(); h != wantHits {
			t.Fatalf("Lookup(%s, %s): adapter asked %d times in all, want %d", org, n, h, wantHits)
		}
	}
	ask("org-1", number, 1, 1)
	ask("org-1", unknown, 2, 0)
	ask("org-1", number, 2, 1)  // match cached
	ask("org-1", unknown, 2, 0) // miss cached
	ask("org-2", number, 3, 1)  // per organization

	f.clk.Advance(16 * time.Second) // past MissTTL, within CacheTTL
	ask("org-1", number, 3, 1)
	ask("org-1", unknown, 4, 0)

	f.clk.Advance(45 * time.Second) // past CacheTTL of the first match
	ask("org-1", number, 5, 1)

	if got := metrictest.Sum(t, f.reg, "callwire_lookup_results_total", "result", "cached_match"); got != 2 {
		t.Errorf("cached_match = %v, want 2", got)
	}
	if got := metrictest.Sum(t, f.reg, "callwire_lookup_results_total", "result", "cached_no_match"); got != 1 {
		t.Errorf("cached_no_match = %v, want 1", got)
	}

	// A returned slice is the caller's: changing it does not change the cache.
	got, _ := f.l.Lookup(t.Context(), "org-1", number)
	got[0].Name = "changed"
	if again, _ := f.l.Lookup(t.Context(), "org-1", number); again[0].Name != "Ada" {
		t.Errorf("cached answer changed through a returned slice: %v", again)
	}
}

func TestSettingsReadAgainAfterTTL(t *testing.T) {
	first := newAdapter(t, answer(200, `{"clients":[{"externalId":"a","name":"First"}]}`))
	second := newAdapter(t, answer(200, `{"clients":[{"externalId":"b","name":"Second"}]}`))
	f := newLookup(t, lookup.Options{SettingsTTL: 5 * time.Second})
	f.orgs.set("org-1", store.Lookup{URL: first.URL})
	name := func() string {
		t.Helper()
		got, err := f.l.Lookup(t.Context(), "org-1", number)
		if errors.Is(err, lookup.ErrNotConfigured) {
			return "none"
		}
		if err != nil || len(got) != 1 {
			t.Fatalf("Lookup = %v, %v", got, err)
		}
		return got[0].Name
	}
	if n := name(); n != "First" {
		t.Fatalf("got %s", n)
	}
	for range 10 {
		name()
	}
	if r := f.orgs.reads.Load(); r != 1 {
		t.Errorf("settings read %d times within SettingsTTL, want 1", r)
	}
	f.orgs.set("org-1", store.Lookup{URL: second.URL})
	if n := name(); n != "First" {
		t.Errorf("within SettingsTTL: %s, want First", n)
	}
	f.clk.Advance(6 * time.Second)
	// The new endpoint is asked; the answer cached from the old one is not used.
	if n := name(); n != "Second" {
		t.Errorf("after SettingsTTL: %s, want Second", n)
	}
	f.orgs.set("org-1", store.Lookup{})
	f.clk.Advance(6 * time.Second)
	if n := name(); n != "none" {
		t.Errorf("after removal: %s, want none", n)
	}
}

func TestSettingsUnreadable(t *testing.T) {
	a := newAdapter(t, answer(200, `{"clients":[]}`))
	f := newLookup(t, lookup.Options{SettingsTTL: time.Second})
	f.orgs.set("org-1", store.Lookup{URL: a.URL})
	f.orgs.fail(fmt.Errorf("db down: %w", store.ErrUnavailable))
	if _, err := f.l.Lookup(t.Context(), "org-1", number); err == nil || errors.Is(err, lookup.ErrNotConfigured) {
		t.Errorf("unknown settings, store down: %v; want a failure", err)
	}
	f.orgs.fail(nil)
	if _, err := f.l.Lookup(t.Context(), "org-1", number); err != nil {
		t.Fatal(err)
	}
	// Known settings outlive a store failure.
	f.orgs.fail(fmt.Errorf("db down: %w", store.ErrUnavailable))
	f.clk.Advance(2 * time.Second)
	if _, err := f.l.Lookup(t.Context(), "org-1", "+15550100"); err != nil {
		t.Errorf("known settings, store down: %v; want the last known settings used", err)
	}
}

func TestNewValidates(t *testing.T) {
	o := newOrgs()
	for _, tc := range []struct {
		name string
		opts lookup.Options
	}{
		{"no reader", lookup.Options{}},
		{"negative timeout", lookup.Options{Orgs: o, Timeout: -time.Second}},
		{"timeout over 10s", lookup.Options{Orgs: o, Timeout: 11 * time.Second}},
		{"negative cache size", lookup.Options{Orgs: o, CacheSize: -1}},
		{"negative breaker failures", lookup.Options{Orgs: o, BreakerFailures: -1}},
	} {
		if _, err := lookup.New(tc.opts); err == nil {
			t.Errorf("%s: New accepted %+v", tc.name, tc.opts)
		}
	}
	reg := prometheus.NewRegistry()
	if _, err := lookup.New(lookup.Options{Orgs: o, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := lookup.New(lookup.Options{Orgs: o, Registerer: reg}); err == nil {
		t.Error("registering the metrics twice in one registry must fail")
	}
}
