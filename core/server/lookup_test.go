package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store"
)

// clinicAdapter is a client system's lookup adapter: it knows one number, checks the token, and
// can be made to fail or hang.
type clinicAdapter struct {
	*httptest.Server
	hits    atomic.Int64
	mu      sync.Mutex
	mode    string // "ok", "500", "invalid", "slow"
	numbers []string
	auth    []string
}

const adaNumber = "+442071234567" // the number ev() calls from

func newClinicAdapter(t *testing.T) *clinicAdapter {
	a := &clinicAdapter{mode: "ok"}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		a.mu.Lock()
		mode := a.mode
		a.numbers = append(a.numbers, r.URL.Query().Get("number"))
		a.auth = append(a.auth, r.Header.Get("Authorization"))
		a.mu.Unlock()
		switch mode {
		case "500":
			http.Error(w, "database is down", http.StatusInternalServerError)
			return
		case "invalid":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"clients":[{"externalId":"p-1",`)
			return
		case "slow":
			select {
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("number") == adaNumber {
			fmt.Fprint(w, `{"clients":[{"externalId":"p-1","name":"Ada Lovelace"},{"externalId":"p-9","name":"Ada's guardian"}]}`)
			return
		}
		fmt.Fprint(w, `{"clients":[]}`)
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *clinicAdapter) setMode(m string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mode = m
}

func (p *popupRecorder) last() popup.Popup {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.popups[len(p.popups)-1]
}

// withLookup points the env's organization at the adapter.
func (e *env) withLookup(l store.Lookup) {
	e.t.Helper()
	if err := e.st.UpdateOrgLookup(e.t.Context(), e.org, l); err != nil {
		e.t.Fatalf("update org lookup: %v", err)
	}
}

func lookupConfig(f func(*config.Lookup)) option {
	return func(c *config.Config, _ *server.Options) { f(&c.Lookup) }
}

func TestCallerLookupMatches(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		a := newClinicAdapter(t)
		e := start(t, b.db(t))
		e.withLookup(store.Lookup{URL: a.URL + "/lookup", Token: "clinic-token-1234"})

		r := e.post(ev("call_received", "m1", 0, ""))
		if r.status != http.StatusCreated {
			t.Fatalf("received: %d %s", r.status, r.raw)
		}
		want := []popup.Client{{ExternalID: "p-1", Name: "Ada Lovelace"}, {ExternalID: "p-9", Name: "Ada's guardian"}}
		if got := r.body.Calls[0].CRMClients; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("crmClients = %+v, want %+v", got, want)
		}
		if !strings.Contains(string(r.raw), `"crmClients":[{"externalId":"p-1","name":"Ada Lovelace"}`) {
			t.Errorf("crmClients JSON: %s", r.raw)
		}
		p := e.popups.last()
		if p.Lookup != popup.LookupMatched || fmt.Sprint(p.Clients) != fmt.Sprint(want) || p.From.Number != adaNumber {
			t.Errorf("popup lookup %q clients %+v", p.Lookup, p.Clients)
		}
		if a.numbers[0] != adaNumber || a.auth[0] != "Bearer clinic-token-1234" {
			t.Errorf("adapter saw number %q, Authorization %q", a.numbers[0], a.auth[0])
		}
		c, _ := e.call(e.org, "sip", "m1")
		var stored []popup.Client
		if err := json.Unmarshal(c.Clients, &stored); err != nil || fmt.Sprint(stored) != fmt.Sprint(want) {
			t.Errorf("stored clients %s (%v)", c.Clients, err)
		}

		// Later events of the call keep the matches and ask nothing.
		r = e.post(ev("call_answered", "m1", 1, `,"answeredBy":"101"`))
		if fmt.Sprint(r.body.Calls[0].CRMClients) != fmt.Sprint(want) || a.hits.Load() != 1 {
			t.Errorf("call_answered: crmClients %+v, adapter asked %d times", r.body.Calls[0].CRMClients, a.hits.Load())
		}
		// A caller the client system does not know.
		r = e.post(strings.Replace(ev("call_received", "m2", 0, ""), adaNumber, "+15550100", 1))
		if r.status != http.StatusCreated || len(r.body.Calls[0].CRMClients) != 0 || e.popups.last().Lookup != popup.LookupNoMatch {
			t.Errorf("unknown number: %d %s, popup %q", r.status, r.raw, e.popups.last().Lookup)
		}
	})
}

func TestCallerLookupSkipsCallersWithoutNumber(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		a := newClinicAdapter(t)
		e := start(t, b.db(t))
		e.withLookup(store.Lookup{URL: a.URL})
		for i, from := range []string{
			`,"from":{"kind":"anonymous"}`,
			`,"from":{"kind":"anonymous","name":"Withheld"}`,
			`,"from":{"kind":"unknown"}`,
			`,"from":{"kind":"extension","extension":"205"}`,
			``, // no caller at all
		} {
			body := fmt.Sprintf(`{"type":"call_received","providerCallId":"anon-%d","occurredAt":%q,"call":{"direction":"inbound"%s}}`, i, at, from)
			r := e.post(body)
			if r.status != http.StatusCreated || len(r.body.Calls[0].CRMClients) != 0 {
				t.Errorf("from %s: %d %s", from, r.status, r.raw)
			}
			if p := e.popups.last(); p.Lookup != popup.LookupSkipped {
				t.Errorf("from %s: popup lookup %q, want skipped", from, p.Lookup)
			}
		}
		// Events other than call_received never ask either.
		e.post(batch(ev("call_placed", "out-1", 0, ""), ev("call_missed", "out-2", 0, "")))
		if n := a.hits.Load(); n != 0 {
			t.Errorf("adapter asked %d times, want 0", n)
		}
	})
}

func TestCallerLookupFailuresLeaveCallerUnknown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, mode := range []string{"500", "invalid", "slow"} {
			t.Run(mode, func(t *testing.T) {
				const timeout = 200 * time.Millisecond
				a := newClinicAdapter(t)
				a.setMode(mode)
				e := start(t, b.db(t))
				e.withLookup(store.Lookup{URL: a.URL, Timeout: timeout})
				start := time.Now()
				r := e.post(ev("call_received", "f-"+mode, 0, ""))
				took := time.Since(start)
				if r.status != http.StatusCreated || !r.body.Success {
					t.Fatalf("%d %s", r.status, r.raw)
				}
				// The slow adapter answers after 10 s: a request that waited for it took that
				// long; a machine that pauses the process for a second does not.
				if took > timeout+3*time.Second {
					t.Errorf("request took %v; the lookup must be bounded by its %v timeout", took, timeout)
				}
				if !strings.Contains(string(r.raw), `"crmClients":[]`) {
					t.Errorf("crmClients: %s", r.raw)
				}
				p := e.popups.last()
				if p.Lookup != popup.LookupFailed || len(p.Clients) != 0 || p.From == nil || p.From.Number != adaNumber {
					t.Errorf("popup %+v: want lookup failed, no clients, the number", p)
				}
				if a.hits.Load() != 1 {
					t.Errorf("adapter asked %d times, want 1", a.hits.Load())
				}
			})
		}
	})
}

func TestCallerLookupBreaker(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const (
			failures = 3
			open     = 3 * time.Second // long enough for 25 calls on a busy machine: the breaker must not half-open among them
			timeout  = 150 * time.Millisecond
			calls    = 25
		)
		a := newClinicAdapter(t)
		a.setMode("slow")
		e := start(t, b.db(t), lookupConfig(func(l *config.Lookup) {
			l.BreakerFailures, l.BreakerOpen, l.Timeout = failures, open, timeout
		}))
		e.withLookup(store.Lookup{URL: a.URL}) // the configured timeout applies

		// Calls ring one after another, fast enough that the breaker does not half-open meanwhile.
		// That the calls after the third did not wait for the timeout is shown by what the lookup
		// counted (breaker_open, below) and by the adapter's hits, not by a wall clock: on a busy
		// machine a request can take longer than the timeout for reasons of its own.
		for i := range calls {
			r := e.post(ev("call_received", fmt.Sprintf("down-%d", i), 0, ""))
			if r.status != http.StatusCreated || e.popups.last().Lookup != popup.LookupFailed {
				t.Fatalf("call %d: %d %s, popup %q", i, r.status, r.raw, e.popups.last().Lookup)
			}
		}
		if n := a.hits.Load(); n != failures {
			t.Errorf("adapter asked %d times for %d calls, want %d: the breaker must open", n, calls, failures)
		}

		// The adapter comes back; after BreakerOpen one call probes it and the breaker closes.
		a.setMode("ok")
		// The open period is what is under test, and it runs on the server's wall clock; the
		// breaker's own test in core/lookup covers it on a bubble's clock.
		time.Sleep(open + 100*time.Millisecond)
		for i := range 3 {
			r := e.post(ev("call_received", fmt.Sprintf("up-%d", i), 0, ""))
			if len(r.body.Calls[0].CRMClients) != 2 || e.popups.last().Lookup != popup.LookupMatched {
				t.Errorf("after recovery, call %d: %s, popup %q", i, r.raw, e.popups.last().Lookup)
			}
		}
		// One probe, then the answer is cached for the same number.
		if n := a.hits.Load(); n != failures+1 {
			t.Errorf("adapter asked %d times in all, want %d", n, failures+1)
		}
		metrics := e.do("GET", "/metrics", "")
		for _, want := range []string{
			`callwire_lookup_breaker_transitions_total{to="open"} 1`,
			`callwire_lookup_breaker_transitions_total{to="closed"} 1`,
			fmt.Sprintf(`callwire_lookup_results_total{result="breaker_open"} %d`, calls-failures),
			`callwire_lookups_total{outcome="failed"} 25`,
		} {
			if !strings.Contains(string(metrics.raw), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}
