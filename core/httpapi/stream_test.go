package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/httpapi"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/metrictest"
	"github.com/callwire/callwire/internal/ssetest"
	"github.com/callwire/callwire/internal/testwait"
)

// keyring is an Authenticator over a fixed set of secrets whose keys can be revoked while a test
// runs.
type keyring struct {
	mu      sync.Mutex
	keys    map[string]auth.Principal
	revoked map[string]bool
	reads   atomic.Int64
}

func newKeyring() *keyring {
	return &keyring{keys: map[string]auth.Principal{}, revoked: map[string]bool{}}
}

func (k *keyring) add(secret string, p auth.Principal) {
	k.mu.Lock()
	k.keys[secret] = p
	k.mu.Unlock()
}

func (k *keyring) revoke(secret string) { k.mu.Lock(); k.revoked[secret] = true; k.mu.Unlock() }

func (k *keyring) Authenticate(_ context.Context, c auth.Credentials) (auth.Principal, error) {
	k.reads.Add(1)
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.keys[c.ClientSecret]
	if !ok || k.revoked[c.ClientSecret] {
		return auth.Principal{}, &auth.Error{Kind: auth.KindUnauthenticated, Message: "no live key matched the credential"}
	}
	return p, nil
}

func (k *keyring) Resolve(ctx context.Context, c auth.Credentials) (auth.Resolution, error) {
	p, err := k.Authenticate(ctx, c)
	return auth.Resolution{Principal: p, Verified: true}, err
}

func (k *keyring) Forget(store.KeyCheck) {}

// trackingBroker wraps a broker and remembers every subscription it made, to prove they end.
type trackingBroker struct {
	popup.Broker
	mu   sync.Mutex
	subs []*trackedSub
	fail error
}

type trackedSub struct {
	popup.Subscription
	closed chan struct{}
	once   sync.Once
}

func (s *trackedSub) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.Subscription.Close()
}

func (b *trackingBroker) Subscribe(ctx context.Context, org string, locs []string) (popup.Subscription, error) {
	if b.fail != nil {
		return nil, b.fail
	}
	sub, err := b.Broker.Subscribe(ctx, org, locs)
	if err != nil {
		return nil, err
	}
	t := &trackedSub{Subscription: sub, closed: make(chan struct{})}
	b.mu.Lock()
	b.subs = append(b.subs, t)
	b.mu.Unlock()
	return t, nil
}

func (b *trackingBroker) all() []*trackedSub {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*trackedSub(nil), b.subs...)
}

// streamEnv is an API with a memory broker and keys for two organizations.
type streamEnv struct {
	t       *testing.T
	base    string
	keys    *keyring
	broker  *trackingBroker
	reg     *prometheus.Registry
	stop    context.CancelFunc
	options httpapi.Options
}

const (
	secretDesk     = "desk-riverside"
	secretOther    = "desk-hillside"
	secretReporter = "reporter-riverside"
	secretOperator = "operator"
)

func newStreamEnv(t *testing.T, tweak func(*httpapi.Options)) *streamEnv {
	t.Helper()
	keys := newKeyring()
	keys.add(secretDesk, auth.Principal{ClientID: "cwid_desk", OrgID: "org_riverside", Scopes: []string{auth.ScopePopupsRead}})
	keys.add(secretOther, auth.Principal{ClientID: "cwid_other", OrgID: "org_hillside", Scopes: []string{auth.ScopePopupsRead}})
	keys.add(secretReporter, auth.Principal{ClientID: "cwid_rep", OrgID: "org_riverside", Scopes: []string{auth.ScopeCallsEvents}})
	keys.add(secretOperator, auth.Principal{ClientID: "cwid_op", Scopes: []string{auth.ScopePopupsRead}})
	mem := popup.NewMemory(popup.MemoryOptions{})
	t.Cleanup(func() { mem.Close() })
	broker := &trackingBroker{Broker: mem}
	reg := prometheus.NewRegistry()
	streams, stop := context.WithCancel(t.Context())
	o := httpapi.Options{
		Auth: keys, Ingest: fakeIngest{}, BaseContext: t.Context(), StreamContext: streams,
		Popups: broker, Heartbeat: 150 * time.Millisecond, Registerer: reg, Gatherer: reg,
	}
	if tweak != nil {
		tweak(&o)
	}
	app, err := httpapi.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() {
		stop()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		if err := app.ShutdownWithContext(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &streamEnv{t: t, base: "http://" + ln.Addr().String(), keys: keys, broker: broker, reg: reg, stop: stop, options: o}
}

// streamClient is an open stream and the events read from it.
type streamClient struct {
	resp   *http.Response
	events chan ssetest.Event
	cancel context.CancelFunc
}

// open requests the stream with the given secret and query; it returns the response whatever
// its status.
func (e *streamEnv) open(secret, query string) *streamClient {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", e.base+httpapi.PopupsStreamPath+query, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("Client-Secret", secret)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		cancel()
		e.t.Fatalf("GET stream: %v", err)
	}
	c := &streamClient{resp: resp, events: make(chan ssetest.Event, 64), cancel: cancel}
	e.t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode == http.StatusOK {
		go ssetest.Read(resp.Body, c.events)
	}
	return c
}

// next returns the next event (comments skipped unless wantComment), failing after d.
func (c *streamClient) next(t *testing.T, d time.Duration, wantComment bool) ssetest.Event {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatal("stream ended")
			}
			if ev.Comment != "" && !wantComment {
				continue
			}
			return ev
		case <-timer.C:
			t.Fatalf("no event within %v", d)
		}
	}
}

// ended waits for the stream to end, failing after d; it returns the events read meanwhile.
func (c *streamClient) ended(t *testing.T, d time.Duration) []ssetest.Event {
	t.Helper()
	var seen []ssetest.Event
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				return seen
			}
			seen = append(seen, ev)
		case <-timer.C:
			t.Fatalf("stream still open after %v", d)
		}
	}
}

func (e *streamEnv) publish(org string, id string, locations ...string) {
	e.t.Helper()
	p := popup.Popup{ID: id, OrgID: org, CallID: "call-" + id, Provider: "sip", ProviderCallID: id,
		Locations: locations, Direction: "inbound", Clients: []popup.Client{{ExternalID: "c-42", Name: "Ada Lovelace"}},
		Lookup: popup.LookupMatched, OccurredAt: time.Now().UTC(), PublishedAt: time.Now().UTC()}
	if err := e.broker.Publish(e.t.Context(), p); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
}

func TestStreamDeliversOwnPopupsOnly(t *testing.T) {
	e := newStreamEnv(t, nil)
	c := e.open(secretDesk, "?locations=front,main")
	if c.resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", c.resp.StatusCode)
	}
	for h, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := c.resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if c.resp.Header.Get(httpapi.TraceHeader) == "" {
		t.Error("no trace id")
	}
	ready := c.next(t, 5*time.Second, false)
	if ready.Event != "ready" || !strings.Contains(ready.Data, `"locations":["front","main"]`) {
		t.Fatalf("first event %+v, want ready with the locations", ready)
	}
	other := e.open(secretOther, "?locations=front,main")
	if other.next(t, 5*time.Second, false).Event != "ready" {
		t.Fatal("other org's stream not ready")
	}

	e.publish("org_hillside", "p-other", "front")      // another organization, same location
	e.publish("org_riverside", "p-back", "back")       // a location not subscribed
	e.publish("org_riverside", "p-1", "front", "main") // both: delivered once
	e.publish("org_riverside", "p-2", "main")

	for _, want := range []string{"p-1", "p-2"} {
		ev := c.next(t, 5*time.Second, false)
		if ev.Event != "popup" || ev.ID != want {
			t.Fatalf("got %+v, want popup %s", ev, want)
		}
		var p popup.Popup
		if err := json.Unmarshal([]byte(ev.Data), &p); err != nil {
			t.Fatalf("data is not a popup: %v: %s", err, ev.Data)
		}
		if p.ID != want || p.OrgID != "org_riverside" || len(p.Clients) != 1 || p.Clients[0].Name != "Ada Lovelace" {
			t.Errorf("popup %+v", p)
		}
	}
	if ev := other.next(t, 5*time.Second, false); ev.ID != "p-other" {
		t.Fatalf("other org got %+v, want only p-other", ev)
	}
	// Nothing more arrives on either stream: wait past two heartbeats.
	deadline := time.After(400 * time.Millisecond)
	for done := false; !done; {
		select {
		case ev := <-c.events:
			if ev.Comment == "" {
				t.Errorf("unexpected event %+v", ev)
			}
		case ev := <-other.events:
			if ev.Comment == "" {
				t.Errorf("other org: unexpected event %+v", ev)
			}
		case <-deadline:
			done = true
		}
	}
	if got := metrictest.Sum(t, e.reg, "callwire_popup_streams_open"); got != 2 {
		t.Errorf("open streams gauge %v, want 2", got)
	}
}

func TestStreamRefusals(t *testing.T) {
	e := newStreamEnv(t, nil)
	tests := []struct {
		name, secret, query string
		want                int
		message             string
	}{
		{"no key", "", "", 401, ""},
		{"unknown key", "nope", "", 401, ""},
		{"events key lacks the scope", secretReporter, "", 403, auth.ScopePopupsRead},
		{"operator key", secretOperator, "", 403, "federat"},
		{"bad location", secretDesk, "?locations=Front", 400, "locations"},
		{"empty location", secretDesk, "?locations=front,,main", 400, "empty"},
		{"empty parameter", secretDesk, "?locations=", 400, "empty"},
		{"location too long", secretDesk, "?locations=" + strings.Repeat("a", 65), 400, "64"},
		{"too many locations", secretDesk, "?locations=" + manyLocations(33), 400, "at most 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.open(tt.secret, tt.query)
			defer c.resp.Body.Close()
			if c.resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", c.resp.StatusCode, tt.want)
			}
			var f struct {
				Success *bool  `json:"success"`
				Error   string `json:"error"`
				Message string `json:"message"`
			}
			if err := json.NewDecoder(c.resp.Body).Decode(&f); err != nil || f.Success == nil || *f.Success || f.Error == "" || f.Message == "" {
				t.Fatalf("not the failure body: %v %+v", err, f)
			}
			if !strings.Contains(f.Message, tt.message) {
				t.Errorf("message %q does not mention %q", f.Message, tt.message)
			}
			if c.resp.Header.Get(httpapi.TraceHeader) == "" {
				t.Error("no trace id")
			}
		})
	}
	if subs := e.broker.all(); len(subs) != 0 {
		t.Errorf("%d subscriptions made for refused requests", len(subs))
	}
}

func manyLocations(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("l" + string(rune('a'+i/26)) + string(rune('a'+i%26)))
	}
	return b.String()
}

func TestStreamDefaultLocationAndHeartbeat(t *testing.T) {
	e := newStreamEnv(t, nil)
	c := e.open(secretDesk, "")
	if ev := c.next(t, 5*time.Second, false); ev.Event != "ready" || !strings.Contains(ev.Data, `"locations":["main"]`) {
		t.Fatalf("ready %+v, want locations [main]", ev)
	}
	if ev := c.next(t, 5*time.Second, true); !strings.HasPrefix(ev.Comment, "heartbeat") {
		t.Fatalf("got %+v, want a heartbeat comment", ev)
	}
	e.publish("org_riverside", "p-main", "main")
	if ev := c.next(t, 5*time.Second, false); ev.ID != "p-main" {
		t.Fatalf("got %+v", ev)
	}
}

func TestStreamEndsWhenKeyRevoked(t *testing.T) {
	e := newStreamEnv(t, nil)
	c := e.open(secretDesk, "")
	if ev := c.next(t, 5*time.Second, false); ev.Event != "ready" {
		t.Fatalf("%+v", ev)
	}
	e.keys.revoke(secretDesk)
	revoked := time.Now()
	seen := c.ended(t, 5*time.Second)
	// The bound: the next heartbeat re-reads the key.
	if took := time.Since(revoked); took > 3*e.options.Heartbeat+time.Second {
		t.Errorf("stream ended %v after revocation; the bound is one heartbeat (%v)", took, e.options.Heartbeat)
	}
	var last ssetest.Event
	for _, ev := range seen {
		if ev.Comment == "" {
			last = ev
		}
	}
	if last.Event != "error" || !strings.Contains(last.Data, `"401 Unauthorized"`) {
		t.Errorf("last event %+v, want an error event with the 401 failure body", last)
	}
	waitClosed(t, e.broker.all()[0])
	// Reconnecting is refused.
	if again := e.open(secretDesk, ""); again.resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("reconnect answered %d, want 401", again.resp.StatusCode)
	}
}

func waitClosed(t *testing.T, s *trackedSub) {
	t.Helper()
	select {
	case <-s.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not closed")
	}
}

func TestStreamClientGoneClosesSubscription(t *testing.T) {
	e := newStreamEnv(t, nil)
	c := e.open(secretDesk, "")
	if ev := c.next(t, 5*time.Second, false); ev.Event != "ready" {
		t.Fatalf("%+v", ev)
	}
	c.cancel()
	c.resp.Body.Close()
	// A write fails within a heartbeat or two of the client leaving.
	waitClosed(t, e.broker.all()[0])
	testwait.Until(t, 5*time.Second, "the open streams gauge to return to 0", func() bool {
		return metrictest.Sum(t, e.reg, "callwire_popup_streams_open") == 0
	})
}

func TestStreamOutlivesRequestAndWriteTimeouts(t *testing.T) {
	e := newStreamEnv(t, func(o *httpapi.Options) {
		o.RequestTimeout = 100 * time.Millisecond
		o.WriteTimeout = 200 * time.Millisecond
		o.Heartbeat = 300 * time.Millisecond
	})
	c := e.open(secretDesk, "")
	if ev := c.next(t, 5*time.Second, false); ev.Event != "ready" {
		t.Fatalf("%+v", ev)
	}
	// Past the request and write timeouts several times over, on the server's wall clock: the
	// stream outliving them is what is under test.
	time.Sleep(1500 * time.Millisecond)
	e.publish("org_riverside", "late", "main")
	if ev := c.next(t, 5*time.Second, false); ev.ID != "late" {
		t.Fatalf("got %+v", ev)
	}
}

func TestStreamEndsOnShutdown(t *testing.T) {
	e := newStreamEnv(t, func(o *httpapi.Options) { o.Heartbeat = time.Hour })
	c := e.open(secretDesk, "")
	if ev := c.next(t, 5*time.Second, false); ev.Event != "ready" {
		t.Fatalf("%+v", ev)
	}
	e.stop()
	c.ended(t, 5*time.Second)
	waitClosed(t, e.broker.all()[0])
}

func TestStreamSubscribeFailure(t *testing.T) {
	e := newStreamEnv(t, nil)
	e.broker.fail = popup.ErrClosed
	c := e.open(secretDesk, "")
	if c.resp.StatusCode != http.StatusServiceUnavailable || c.resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q; want 503 with Retry-After", c.resp.StatusCode, c.resp.Header.Get("Retry-After"))
	}
}

func TestDeskPage(t *testing.T) {
	e := newStreamEnv(t, nil)
	for path, ctype := range map[string]string{
		"/desk": "text/html", "/desk/desk.js": "text/javascript", "/desk/desk.css": "text/css", "/desk/icon.svg": "image/svg+xml",
	} {
		resp, err := http.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("%s: %d %q (%d bytes)", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		if csp := resp.Header.Get("Content-Security-Policy"); csp != httpapi.DeskCSP {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
		// Nothing is loaded from elsewhere (the network at a clinic may be closed, and the policy
		// would refuse it anyway), and nothing is inline.
		if path == "/desk" {
			for _, bad := range []string{`src="http`, `href="http`, `src="//`, `href="//`, "<style", " style=", "<script>"} {
				if strings.Contains(string(body), bad) {
					t.Errorf("%s holds %q", path, bad)
				}
			}
			if m := regexp.MustCompile(` on[a-z]+=`).FindString(string(body)); m != "" {
				t.Errorf("%s holds an inline handler %q", path, m)
			}
		}
	}
}
