package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/sdktest"
)

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// replica runs one server on st with cfg, and returns it with an env whose organization and key
// are fresh (org empty) or belong to org.
func replica(t *testing.T, st store.Store, cfg config.Config, so server.Options, org, clientID, secret string) (*server.Server, *env) {
	t.Helper()
	so.Store = st
	if so.Logger == nil {
		so.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := server.New(context.WithoutCancel(t.Context()), cfg, so)
	if err != nil {
		t.Fatal(err)
	}
	base, client := serveOn(t, srv)
	e := &env{t: t, base: base, st: st, client: client}
	if org == "" {
		e.org = e.newOrg("Riverside Clinic")
		e.clientID, e.secret = e.newKey(e.org, nil, "org.calls.events")
	} else {
		e.org, e.clientID, e.secret = org, clientID, secret
	}
	return srv, e
}

func openStore(t *testing.T, b backend) store.Store {
	t.Helper()
	return openStoreAt(t, b.db(t))
}

// openStoreAt opens a store on db, closed when the test ends. Opening several on one db gives
// each replica of a test its own connections to the same data.
func openStoreAt(t *testing.T, db config.Database) store.Store {
	t.Helper()
	st, err := server.OpenStore(t.Context(), db)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func subscribeTo(t *testing.T, b popup.Broker, org string, locations ...string) popup.Subscription {
	t.Helper()
	s, err := b.Subscribe(t.Context(), org, locations)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// metric returns the value of the sample line that starts with series on /metrics.
func (e *env) metric(series string) float64 {
	e.t.Helper()
	r := e.do("GET", "/metrics", "")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(r.raw)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		e.t.Fatalf("metric %s: %v", series, err)
	}
	return v
}

func TestInProcessBrokerIsTheDefault(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		cfg := config.Defaults()
		srv, e := replica(t, st, cfg, server.Options{}, "", "", "")
		if _, ok := srv.Broker().(*popup.Memory); !ok {
			t.Fatalf("broker %T, want the in-process broker", srv.Broker())
		}
		main := subscribeTo(t, srv.Broker(), e.org, "main")
		desks := subscribeTo(t, srv.Broker(), e.org, "front", "back")

		r := e.post(ev("call_received", "mem-1", 0, ""))
		if r.status != http.StatusCreated {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		p := popuptest.Receive(t, main)
		if p.CallID != r.body.Calls[0].ID || p.OrgID != e.org || p.TraceID != r.header.Get("X-Trace-ID") ||
			len(p.Locations) != 1 || p.Locations[0] != "main" || p.ProviderCallID != "mem-1" || p.Provider != "sip" {
			t.Errorf("popup %+v", p)
		}
		// A retry does not ring again; the next call does, and only at its locations.
		if r := e.post(ev("call_received", "mem-1", 0, "")); r.status != http.StatusOK {
			t.Fatalf("retry: %d %s", r.status, r.raw)
		}
		e.post(ev("call_received", "mem-2", 0, `,"locations":["front","back"]`))
		e.post(ev("call_received", "mem-3", 0, ""))
		if p := popuptest.Receive(t, main); p.ProviderCallID != "mem-3" {
			t.Errorf("main desk got %s, want mem-3 (the retry must not ring, mem-2 is not for main)", p.ProviderCallID)
		}
		if p := popuptest.Receive(t, desks); p.ProviderCallID != "mem-2" {
			t.Errorf("front/back desk got %s, want mem-2 once", p.ProviderCallID)
		}
		e.post(ev("call_received", "mem-4", 0, `,"locations":["back"]`))
		if p := popuptest.Receive(t, desks); p.ProviderCallID != "mem-4" {
			t.Errorf("front/back desk got %s after mem-2, want mem-4", p.ProviderCallID)
		}
		if n := e.metric(`callwire_popups_total{outcome="published"}`); n != 4 {
			t.Errorf("published %v, want 4", n)
		}
		if n := e.metric(`callwire_popups_total{outcome="repeat"}`); n != 1 {
			t.Errorf("repeat %v, want 1", n)
		}
	})
}

func TestGivenBrokerIsUsedAndNotClosed(t *testing.T) {
	st := openStore(t, backends()[0])
	m := popup.NewMemory(popup.MemoryOptions{})
	defer m.Close()
	srv, e := replica(t, st, config.Defaults(), server.Options{Broker: m}, "", "", "")
	if srv.Broker() != popup.Broker(m) {
		t.Fatal("the given broker is not the server's")
	}
	s := subscribeTo(t, m, e.org, "main")
	e.post(ev("call_received", "given", 0, ""))
	popuptest.Receive(t, s)
	e.client.CloseIdleConnections()
	sctx, cancel := context.WithTimeout(t.Context(), config.Defaults().Server.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Publish(t.Context(), popuptest.Sample(e.org, "after", "main")); err != nil {
		t.Errorf("the server closed a broker it was given: %v", err)
	}
}

// readiness is the body of a 200 from /readyz.
type readiness struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// readyz asks /readyz and decodes its 200 body, failing t on any other answer.
func (e *env) readyz() readiness {
	e.t.Helper()
	r := e.do("GET", "/readyz", "")
	var body readiness
	if r.status != http.StatusOK {
		e.t.Fatalf("readyz %d: %s", r.status, r.raw)
	}
	if err := json.Unmarshal(r.raw, &body); err != nil {
		e.t.Fatalf("readyz body: %v: %s", err, r.raw)
	}
	return body
}

// waitBroker polls /readyz until it names the broker as want, failing t after 30 seconds.
func (e *env) waitBroker(want string) readiness {
	e.t.Helper()
	var r readiness
	if !testwait.Poll(30*time.Second, func() bool { r = e.readyz(); return r.Checks["broker"] == want }) {
		e.t.Fatalf("readyz still names the broker %q after 30s, want %q: %+v", r.Checks["broker"], want, r)
	}
	return r
}

// TestRedisDownAtStart starts the server with broker.redis.url naming a port where nothing
// listens yet, then starts a real redis-server there. Popups are best effort, so the server must
// start and record calls meanwhile, count the popups it could not publish as missed, name the
// broker as degraded in /readyz and answer the popup stream 503 with Retry-After; once Redis
// answers it must deliver popups again without a restart.
func TestRedisDownAtStart(t *testing.T) {
	redisSrv := popuptest.NewRedisServer(t)
	st := openStore(t, backends()[0])
	cfg := config.Defaults()
	cfg.Broker.Redis.URL = redisSrv.URL()
	cfg.Popups.Heartbeat = streamHeartbeat
	srv, e := replica(t, st, cfg, server.Options{}, "", "", "")
	if _, ok := srv.Broker().(*popup.Redis); !ok {
		t.Fatalf("broker %T, want Redis", srv.Broker())
	}
	deskID, deskSecret := e.newKey(e.org, nil, auth.ScopePopupsRead)

	if r := e.readyz(); r.Status != "ready" || r.Checks["store"] != "ok" || r.Checks["broker"] != "degraded" {
		t.Errorf("readyz with Redis down: %+v, want ready with the store ok and the broker degraded", r)
	}
	if n := e.metric(`callwire_broker_up{broker="redis"}`); n != 0 {
		t.Errorf("callwire_broker_up %v with Redis down, want 0", n)
	}
	r := e.post(ev("call_received", "while-down", 0, ""))
	if r.status != http.StatusCreated || !r.body.Calls[0].Created {
		t.Fatalf("call_received with Redis down: %d %s", r.status, r.raw)
	}
	if c, evs := e.call(e.org, "sip", "while-down"); c.ID != r.body.Calls[0].ID || len(evs) != 1 {
		t.Errorf("stored call %+v with %d events", c, len(evs))
	}
	if n := e.metric(`callwire_popups_total{outcome="missed"}`); n != 1 {
		t.Errorf("missed %v, want 1", n)
	}
	down := e.stream(deskID, deskSecret, "")
	if down.status != http.StatusServiceUnavailable {
		t.Fatalf("stream with Redis down answered %d, want 503: %s", down.status, down.body)
	}
	var f struct {
		Success *bool  `json:"success"`
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(down.body, &f); err != nil || f.Success == nil || *f.Success || f.Error != "503 Service Unavailable" || f.Message == "" {
		t.Errorf("stream 503 body: %s", down.body)
	}
	if down.header.Get("Retry-After") == "" {
		t.Error("stream 503 without Retry-After")
	}

	redisSrv.Start()
	if r := e.waitBroker("ok"); r.Status != "ready" || r.Checks["store"] != "ok" {
		t.Errorf("readyz with Redis back: %+v", r)
	}
	if n := e.metric(`callwire_broker_up{broker="redis"}`); n != 1 {
		t.Errorf("callwire_broker_up %v with Redis back, want 1", n)
	}
	desk := e.stream(deskID, deskSecret, "")
	desk.ready()
	r = e.post(ev("call_received", "after", 0, ""))
	if r.status != http.StatusCreated {
		t.Fatalf("call_received with Redis back: %d %s", r.status, r.raw)
	}
	if p := desk.popup(); p.ProviderCallID != "after" || p.CallID != r.body.Calls[0].ID {
		t.Errorf("desk got %+v, want the popup of 'after'", p)
	}
	if n := e.metric(`callwire_popups_total{outcome="published"}`); n != 1 {
		t.Errorf("published %v, want 1", n)
	}
}

// newRedisProxy puts a proxy in front of the test Redis and returns it with the URL through it.
func newRedisProxy(t *testing.T) (*sdktest.Proxy, string) {
	t.Helper()
	raw := popuptest.RedisURL(t)
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("%s %q is not a URL with a host", popuptest.EnvRedisURL, raw)
	}
	p := sdktest.NewProxy(t, u.Host)
	return p, p.URL(raw)
}

// ringUntilPopup posts call_received for calls prefix-0, prefix-1, ... until a popup arrives on
// sub, at most five, and returns the reply to the call whose popup arrived, and that popup. With a
// publish timeout of 300 ms, a machine that pauses the server for longer misses a popup, which is
// that timeout working; a server that does not publish misses all five, and the test fails.
func ringUntilPopup(t *testing.T, e *env, sub popup.Subscription, prefix string) (reply, popup.Popup) {
	t.Helper()
	sent := map[string]reply{}
	for i := range 5 {
		id := prefix + "-" + strconv.Itoa(i)
		r := e.post(ev("call_received", id, 0, ""))
		if r.status != http.StatusCreated {
			t.Fatalf("%s: %d %s", id, r.status, r.raw)
		}
		sent[id] = r
		select {
		case got, ok := <-sub.Popups():
			if !ok {
				t.Fatalf("%s: subscription ended (err %v), want a popup", id, sub.Err())
			}
			r, mine := sent[got.ProviderCallID]
			if !mine {
				t.Fatalf("%s: popup of another call: %+v", id, got)
			}
			return r, got
		case <-time.After(2 * time.Second):
		}
	}
	t.Fatalf("no popup for five calls of %s", prefix)
	panic("unreachable")
}

func TestRedisDownCallStillRecorded(t *testing.T) {
	for _, outage := range []string{"stopped", "hanging"} {
		t.Run(outage, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				p, redisURL := newRedisProxy(t)
				st := openStore(t, b)
				cfg := config.Defaults()
				cfg.Broker.Redis.URL = redisURL
				cfg.Ingest.PublishTimeout = 300 * time.Millisecond
				logs := &syncBuffer{}
				srv, e := replica(t, st, cfg, server.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))}, "", "", "")
				if _, ok := srv.Broker().(*popup.Redis); !ok {
					t.Fatalf("broker %T, want Redis", srv.Broker())
				}
				sub := subscribeTo(t, srv.Broker(), e.org, "main")
				r, got := ringUntilPopup(t, e, sub, "before")
				if got.ProviderCallID != r.body.Calls[0].ProviderCallID || got.TraceID != r.header.Get("X-Trace-ID") {
					t.Fatalf("popup before the outage: %+v", got)
				}
				if !strings.Contains(logs.String(), `"msg":"request","trace_id":"`+r.header.Get("X-Trace-ID")+`"`) {
					t.Errorf("no request log line for trace %s in:\n%s", r.header.Get("X-Trace-ID"), logs.String())
				}

				missed0 := e.metric(`callwire_popups_total{outcome="missed"}`)
				failed0 := e.metric(`callwire_broker_popups_total{broker="redis",outcome="failed"}`)
				if outage == "stopped" {
					p.Cut()
				} else {
					p.Hang()
				}
				for i := range 2 {
					id := "during-" + strconv.Itoa(i)
					start := time.Now()
					r := e.post(ev("call_received", id, 0, `,"locations":["main","annex"]`))
					if d := time.Since(start); d > 2*time.Second {
						t.Errorf("%s: answered in %v with Redis %s (publish timeout 300ms)", id, d, outage)
					}
					if r.status != http.StatusCreated || !r.body.Calls[0].Created {
						t.Fatalf("%s with Redis %s: %d %s", id, outage, r.status, r.raw)
					}
					if c, evs := e.call(e.org, "sip", id); c.ID != r.body.Calls[0].ID || len(evs) != 1 {
						t.Errorf("%s: stored call %+v with %d events", id, c, len(evs))
					}
					trace := r.header.Get("X-Trace-ID")
					missedLine := false
					for _, line := range strings.Split(logs.String(), "\n") {
						if strings.Contains(line, "popup missed") && strings.Contains(line, `"trace_id":"`+trace+`"`) {
							missedLine = true
						}
					}
					if !missedLine {
						t.Errorf("%s: no 'popup missed' log line with trace_id %s in:\n%s", id, trace, logs.String())
					}
				}
				if n := e.metric(`callwire_popups_total{outcome="missed"}`) - missed0; n != 2 {
					t.Errorf("missed %v during the outage, want 2", n)
				}
				if n := e.metric(`callwire_broker_popups_total{broker="redis",outcome="failed"}`) - failed0; n != 2 {
					t.Errorf("broker failed %v during the outage, want 2", n)
				}
				if outage == "stopped" {
					// The workstation learns that its feed is gone.
					popuptest.Ended(t, sub)
					if sub.Err() == nil {
						t.Error("subscription ended without an error")
					}
				}
				// Other events are untouched by the broker.
				if r := e.post(ev("call_ended", "during-0", 3, "")); r.status != http.StatusOK {
					t.Errorf("call_ended with Redis %s: %d %s", outage, r.status, r.raw)
				}
				// Still ready for calls, with the broker named as degraded.
				if r := e.waitBroker("degraded"); r.Checks["store"] != "ok" {
					t.Errorf("readyz with Redis %s: %+v", outage, r)
				}
				if outage == "stopped" {
					// Redis back: the same server publishes again, on fresh connections.
					p.Restore()
					e.waitBroker("ok")
					again := subscribeTo(t, srv.Broker(), e.org, "main")
					if _, got := ringUntilPopup(t, e, again, "after"); !strings.HasPrefix(got.ProviderCallID, "after-") {
						t.Errorf("popup after the outage: %+v", got)
					}
				}
			})
		})
	}
}

func TestPopupReachesAnotherReplica(t *testing.T) {
	redisURL := popuptest.RedisURL(t)
	forEachBackend(t, func(t *testing.T, b backend) {
		st := openStore(t, b)
		cfg := config.Defaults()
		cfg.Broker.Redis.URL = redisURL
		srvA, a := replica(t, st, cfg, server.Options{}, "", "", "")
		srvB, _ := replica(t, st, cfg, server.Options{}, a.org, a.clientID, a.secret)
		onB := subscribeTo(t, srvB.Broker(), a.org, "front", "back")
		onA := subscribeTo(t, srvA.Broker(), a.org, "front")

		r := a.post(`{"type":"call_received","providerCallId":"cross","occurredAt":"` + at + `","locations":["front","back"],` +
			`"call":{"direction":"inbound","from":{"number":"+442071234567","name":"Ada"},"to":{"kind":"extension","extension":"101"},"trunk":"t1"}}`)
		if r.status != http.StatusCreated {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		for name, s := range map[string]popup.Subscription{"replica B": onB, "replica A": onA} {
			p := popuptest.Receive(t, s)
			if p.CallID != r.body.Calls[0].ID || p.OrgID != a.org || p.ProviderCallID != "cross" ||
				p.TraceID != r.header.Get("X-Trace-ID") || p.From == nil || p.From.Number != "+442071234567" ||
				p.Trunk != "t1" || len(p.Locations) != 2 || p.ID == "" || p.OccurredAt.IsZero() || p.PublishedAt.IsZero() {
				t.Errorf("%s received %+v", name, p)
			}
		}
		// Named by two subscribed locations, it arrived once: the next popup is the next call.
		a.post(ev("call_received", "cross-2", 0, `,"locations":["back"]`))
		if p := popuptest.Receive(t, onB); p.ProviderCallID != "cross-2" {
			t.Errorf("replica B then received %s, want cross-2", p.ProviderCallID)
		}
	})
}
