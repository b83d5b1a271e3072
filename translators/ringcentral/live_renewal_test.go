package ringcentral

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
)

// The renewal these tests expect: the answer to a renewal (ClientRequest PUT
// /restapi/v1.0/subscription/<id>) is the message of the same messageId; a ClientRequest answer of
// status 2xx renews the subscription, and a 404 says the gateway no longer has it, upon which
// RingCentral's own client subscribes anew (ringcentral/ringcentral-extensible,
// packages/extensions/ws/src/rest.ts and subscription.ts, MIT); the API reference's "Update
// Subscription" (https://developers.ringcentral.com/api-reference/Subscriptions/updateSubscription)
// lists that 404 as CMN-102 "Resource for parameter [subscriptionId] is not found". The fake
// gateway's side is described in fake_test.go.

// timers is a clock the test moves by hand, with timers that fire when it passes them.
type timers struct {
	mu      sync.Mutex
	t       time.Time
	waiting []timerAt
}

// timerAt is a timer of timers: c receives once the clock reaches at.
type timerAt struct {
	at time.Time
	c  chan time.Time
}

func (c *timers) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// after is a channel that receives once the clock has moved d on.
func (c *timers) after(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.t
		return ch
	}
	c.waiting = append(c.waiting, timerAt{at: c.t.Add(d), c: ch})
	return ch
}

// advance moves the clock d on and fires the timers it reaches.
func (c *timers) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	c.waiting = slices.DeleteFunc(c.waiting, func(w timerAt) bool {
		if w.at.After(c.t) {
			return false
		}
		w.c <- c.t
		return true
	})
}

// armed reports whether a timer is set to fire at at.
func (c *timers) armed(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.waiting, func(w timerAt) bool { return w.at.Equal(at) })
}

// healthLog keeps what the live path reports through its health function, in order.
type healthLog struct {
	mu   sync.Mutex
	errs []error
}

func (h *healthLog) report(err error) {
	h.mu.Lock()
	h.errs = append(h.errs, err)
	h.mu.Unlock()
}

func (h *healthLog) reports() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.errs)
}

// renewRun is a run of the live path against f whose clock and timers are the test's.
type renewRun struct {
	rec    *recorder
	log    *logBuffer
	clock  *timers
	health *healthLog
}

// startRenewing starts the live path against f, its renewals timed by the test's clock, and
// waits for its subscription; it stops when the test ends.
func startRenewing(t *testing.T, f *fakeRC) *renewRun {
	t.Helper()
	r := &renewRun{rec: &recorder{}, log: &logBuffer{}, clock: &timers{t: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}, health: &healthLog{}}
	logger := slog.New(slog.NewTextHandler(r.log, nil))
	a := &auth{server: f.srv.URL, clientID: "client-id", secrets: Secrets{ClientSecret: "client-secret", JWT: "the-jwt"}, hc: f.srv.Client(), now: time.Now}
	em := &emitter{out: r.rec, log: logger}
	l := &live{api: &client{server: f.srv.URL, auth: a, hc: f.srv.Client()}, calls: newCalls(testPlan(t), DefaultProvider, time.Hour),
		ended: &endedSet{m: map[string]time.Time{}, keep: time.Hour}, emit: em.emit, log: logger,
		now: r.clock.now, timer: r.clock.after, health: r.health.report}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("live path: %v", err)
		}
	})
	testwait.Until(t, 20*time.Second, "the subscription", func() bool { return f.Subscriptions() == 1 })
	return r
}

// renewalDue moves the clock to the subscription's renewal, once the live path has set its timer.
func (r *renewRun) renewalDue(t *testing.T, expiresIn int) {
	t.Helper()
	at := r.clock.now().Add(renewIn(time.Duration(expiresIn) * time.Second))
	testwait.Until(t, 20*time.Second, "the renewal timer", func() bool { return r.clock.armed(at) })
	r.clock.advance(at.Sub(r.clock.now()))
}

const (
	subscribePath = "POST /restapi/v1.0/subscription/"
	renewPath     = "PUT /restapi/v1.0/subscription/b6d5bde8-f5c5-4e3b-a5c1-6f1f3d1c5f4a"
)

// TestRenewalTaken: a renewal the gateway takes changes nothing but the subscription's lifetime:
// the next renewal is timed by the expiresIn of the answer, the one subscription and the one
// connection stay, the health stays good and notifications keep coming.
func TestRenewalTaken(t *testing.T) {
	f := newFakeRC(t)
	r := startRenewing(t, f)
	pushAll(f, scenario(t, "hold"))
	waitForEnd(t, r.rec, holdCall)

	f.mu.Lock()
	f.subExpires = 600 // the renewal's answer gives a lifetime the first subscription did not have
	f.mu.Unlock()
	r.renewalDue(t, 899)
	testwait.Until(t, 20*time.Second, "the renewal", func() bool { return slices.Contains(f.takenRequests(), renewPath) })
	next := r.clock.now().Add(renewIn(600 * time.Second))
	testwait.Until(t, 20*time.Second, "the next renewal timed by the answer's expiresIn", func() bool { return r.clock.armed(next) })

	// The bound on the answer passes: the renewal was answered, so the connection stays.
	r.clock.advance(renewAnswerLimit)
	pushAll(f, scenario(t, "normal_call"))
	waitForEnd(t, r.rec, normalCall)

	matchGolden(t, "hold", eventsOf(r.rec.events(), holdCall))
	matchGolden(t, "normal_call", eventsOf(r.rec.events(), normalCall))
	if got, want := f.takenRequests(), []string{subscribePath, renewPath}; !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
	if subscribed, wsTokens, _, _ := f.counts(); subscribed != 1 || wsTokens != 1 {
		t.Errorf("%d subscriptions, %d WebSocket tokens, want the one subscription on the one connection", subscribed, wsTokens)
	}
	if got := r.health.reports(); len(got) != 1 || got[0] != nil {
		t.Errorf("health reports %v, want the one healthy report of the subscription", got)
	}
	if strings.Contains(r.log.String(), "level=WARN") {
		t.Errorf("warnings for a renewal taken:\n%s", r.log.String())
	}
}

// TestRenewalRefused: the gateway no longer has the subscription (it expired or was deleted on
// its side), so nothing is notified any more and the renewal is answered 404. The live path
// subscribes anew on the same connection, says so in a warning, reports unhealthy until the new
// subscription is in place and healthy once it is; every notification after it comes, none lost.
func TestRenewalRefused(t *testing.T) {
	f := newFakeRC(t)
	r := startRenewing(t, f)
	pushAll(f, scenario(t, "hold"))
	waitForEnd(t, r.rec, holdCall)

	f.dropSubscription(t)
	r.renewalDue(t, 899)
	testwait.Until(t, 20*time.Second, "the new subscription", func() bool { return f.Subscriptions() == 2 })
	pushAll(f, scenario(t, "normal_call"))
	waitForEnd(t, r.rec, normalCall)

	matchGolden(t, "hold", eventsOf(r.rec.events(), holdCall))
	matchGolden(t, "normal_call", eventsOf(r.rec.events(), normalCall))
	if got, want := f.takenRequests(), []string{subscribePath, renewPath, subscribePath}; !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
	if _, wsTokens, _, _ := f.counts(); wsTokens != 1 {
		t.Errorf("%d WebSocket tokens, want the new subscription on the same connection", wsTokens)
	}
	got := r.health.reports()
	var ae *APIError
	if len(got) != 3 || got[0] != nil || !errors.As(got[1], &ae) || ae.Status != 404 || ae.Code != "CMN-102" || got[2] != nil {
		t.Errorf("health reports %v, want healthy, the renewal's 404 CMN-102, healthy again", got)
	}
	if !strings.Contains(r.log.String(), `level=WARN msg="ringcentral: the gateway refused the subscription's renewal; subscribing anew`) {
		t.Errorf("no warning of the refused renewal:\n%s", r.log.String())
	}
	// The new subscription is renewed in its turn.
	r.renewalDue(t, 899)
	testwait.Until(t, 20*time.Second, "the new subscription's renewal", func() bool {
		return slices.Equal(f.takenRequests(), []string{subscribePath, renewPath, subscribePath, renewPath})
	})
}

// TestRenewalUnanswered: the gateway answers heartbeats but not the renewal. Once
// renewAnswerLimit has passed without an answer the connection is taken for broken and made
// again (its session recovered, the subscription with it), the health saying why meanwhile; the
// notifications come again over the new connection.
func TestRenewalUnanswered(t *testing.T) {
	f := newFakeRC(t)
	r := startRenewing(t, f)
	pushAll(f, scenario(t, "hold"))
	waitForEnd(t, r.rec, holdCall)

	f.mu.Lock()
	f.unanswered = "PUT"
	f.mu.Unlock()
	r.renewalDue(t, 899)
	testwait.Until(t, 20*time.Second, "the renewal", func() bool { return slices.Contains(f.takenRequests(), renewPath) })
	limit := r.clock.now().Add(renewAnswerLimit)
	testwait.Until(t, 20*time.Second, "the bound on the renewal's answer", func() bool { return r.clock.armed(limit) })
	if _, wsTokens, _, _ := f.counts(); wsTokens != 1 {
		t.Fatalf("%d WebSocket tokens before the bound passed, want 1", wsTokens)
	}
	r.clock.advance(renewAnswerLimit)
	testwait.Until(t, 20*time.Second, "the connection made again", func() bool { return f.recoveries() == 1 })
	pushAll(f, scenario(t, "normal_call"))
	waitForEnd(t, r.rec, normalCall)

	matchGolden(t, "hold", eventsOf(r.rec.events(), holdCall))
	matchGolden(t, "normal_call", eventsOf(r.rec.events(), normalCall))
	if subscribed, wsTokens, _, _ := f.counts(); subscribed != 1 || wsTokens != 2 {
		t.Errorf("%d subscriptions, %d WebSocket tokens, want the one subscription recovered on a second connection", subscribed, wsTokens)
	}
	got := r.health.reports()
	var ae *APIError
	if len(got) != 3 || got[0] != nil || !errors.As(got[1], &ae) || ae.Op != "renew the subscription" || got[2] != nil {
		t.Errorf("health reports %v, want healthy, the unanswered renewal, healthy again", got)
	}
	if !strings.Contains(r.log.String(), "no answer from the gateway within 1m0s") {
		t.Errorf("the log does not say why the connection was made again:\n%s", r.log.String())
	}
}

// TestRenewalRefusedThenUnanswered: the renewal is refused and the subscription made anew is not
// answered. Once renewAnswerLimit has passed since the renewal, the connection is taken for broken
// and made again; the session had no subscription left, so the next connection subscribes anew,
// and the notifications come again.
func TestRenewalRefusedThenUnanswered(t *testing.T) {
	f := newFakeRC(t)
	r := startRenewing(t, f)
	pushAll(f, scenario(t, "hold"))
	waitForEnd(t, r.rec, holdCall)

	f.mu.Lock()
	f.unanswered = "POST"
	f.mu.Unlock()
	f.dropSubscription(t)
	r.renewalDue(t, 899)
	testwait.Until(t, 20*time.Second, "the new subscription asked for", func() bool {
		return slices.Equal(f.takenRequests(), []string{subscribePath, renewPath, subscribePath})
	})
	limit := r.clock.now().Add(renewAnswerLimit)
	testwait.Until(t, 20*time.Second, "the bound on the answers", func() bool { return r.clock.armed(limit) })
	f.mu.Lock()
	f.unanswered = ""
	f.mu.Unlock()
	r.clock.advance(renewAnswerLimit)
	testwait.Until(t, 20*time.Second, "a subscription on a new connection", func() bool { return f.Subscriptions() == 2 })
	pushAll(f, scenario(t, "normal_call"))
	waitForEnd(t, r.rec, normalCall)

	matchGolden(t, "hold", eventsOf(r.rec.events(), holdCall))
	matchGolden(t, "normal_call", eventsOf(r.rec.events(), normalCall))
	if got, want := f.wscNamed(), []string{"", ""}; !slices.Equal(got, want) {
		t.Errorf("the connections named the session contexts %q, want %q: no recovery of a session without a subscription", got, want)
	}
	got := r.health.reports()
	var refused, broken *APIError
	if len(got) != 4 || got[0] != nil || !errors.As(got[1], &refused) || refused.Status != 404 ||
		!errors.As(got[2], &broken) || broken.Op != "renew the subscription" || broken.Status != 0 || got[3] != nil {
		t.Errorf("health reports %v, want healthy, the renewal's 404, no answer, healthy again", got)
	}
}
