package popup_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/internal/metrictest"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/sdktest"
)

func proxied(t *testing.T) (*sdktest.Proxy, string) {
	raw := popuptest.RedisURL(t)
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("%s %q is not a URL with a host", popuptest.EnvRedisURL, raw)
	}
	p := sdktest.NewProxy(t, u.Host)
	return p, p.URL(raw)
}

// publishWithin publishes with a deadline of d and fails t unless Publish returns within d and
// slack (see the slacks below): small enough that a wait which ignored the deadline would overrun
// it, large enough that a machine that pauses for half a second does not.
func publishWithin(t *testing.T, b popup.Broker, p popup.Popup, d, slack time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	start := time.Now()
	err := b.Publish(ctx, p)
	if took := time.Since(start); took > d+slack {
		t.Errorf("Publish took %v with a deadline of %v", took, d)
	}
	return err
}

// Slacks of publishWithin: deadlineSlack against the broker's default timeouts (500ms), hangSlack
// against TestRedisHanging's longer ones, refusedSlack where Redis refuses at once.
const (
	deadlineSlack = 250 * time.Millisecond
	hangSlack     = time.Second
	refusedSlack  = 3 * time.Second
)

func TestRedisStopped(t *testing.T) {
	p, u := proxied(t)
	reg := prometheus.NewRegistry()
	r := newRedis(t, u, popup.RedisOptions{Registerer: reg})
	org := popuptest.OrgID(t)
	sub, err := r.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := publishWithin(t, r, popuptest.Sample(org, "before", "main"), 300*time.Millisecond, refusedSlack); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	if got := popuptest.Receive(t, sub); got.ID != "before" {
		t.Fatalf("got %s", got.ID)
	}

	p.Cut()
	for i := range 3 {
		if err := publishWithin(t, r, popuptest.Sample(org, "during", "main"), 300*time.Millisecond, refusedSlack); err == nil {
			t.Fatalf("publish %d with Redis stopped succeeded", i)
		}
	}
	popuptest.Ended(t, sub)
	if sub.Err() == nil {
		t.Error("a subscription whose connection was lost ended with a nil Err")
	}
	if got := metrictest.Sum(t, reg, "callwire_broker_popups_total", "outcome", "failed"); got != 3 {
		t.Errorf("failed = %v, want 3", got)
	}
	if _, err := r.Subscribe(t.Context(), org, []string{"main"}); err == nil {
		t.Error("Subscribe with Redis stopped succeeded")
	}
}

func TestRedisHanging(t *testing.T) {
	p, u := proxied(t)
	// Timeouts of the broker's own well beyond the deadlines the test gives, so that a wait
	// that ignored a deadline would overrun its bound by far more than a machine's pause.
	r := newRedis(t, u, popup.RedisOptions{HealthInterval: 300 * time.Millisecond, ReadTimeout: 2 * time.Second,
		WriteTimeout: 2 * time.Second, SubscribeTimeout: 5 * time.Second})
	org := popuptest.OrgID(t)
	sub, err := r.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := publishWithin(t, r, popuptest.Sample(org, "before", "main"), 300*time.Millisecond, hangSlack); err != nil {
		t.Fatalf("before the hang: %v", err)
	}
	popuptest.Receive(t, sub)

	p.Hang()
	for i := range 3 {
		if err := publishWithin(t, r, popuptest.Sample(org, "during", "main"), 300*time.Millisecond, hangSlack); err == nil {
			t.Fatalf("publish %d with Redis hanging succeeded", i)
		}
	}
	// Without a deadline of its own, Publish is bounded by the read and write timeouts (2s each
	// here).
	start := time.Now()
	if err := r.Publish(context.WithoutCancel(t.Context()), popuptest.Sample(org, "no-deadline", "main")); err == nil {
		t.Error("publish without a deadline, Redis hanging, succeeded")
	}
	if d := time.Since(start); d > 4*time.Second+hangSlack {
		t.Errorf("publish without a deadline took %v with Redis hanging", d)
	}
	// The silent subscription notices within two health intervals and ends.
	popuptest.Ended(t, sub)
	if err := sub.Err(); err == nil || !strings.Contains(err.Error(), "ping") {
		t.Errorf("Err of a subscription on a hanging Redis = %v, want a failed ping", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := r.Subscribe(ctx, org, []string{"main"}); err == nil {
		t.Error("Subscribe on a hanging Redis succeeded")
	}
	if d := time.Since(start); d > 300*time.Millisecond+hangSlack {
		t.Errorf("Subscribe on a hanging Redis took %v with a 300ms deadline", d)
	}
}

// TestRedisNeverAnswering starts the broker against a server that accepts connections and never
// writes a byte.
func TestRedisNeverAnswering(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	u := "redis://" + ln.Addr().String() + "/0"

	start := time.Now()
	r, err := popup.NewRedis(t.Context(), u, popup.RedisOptions{})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("NewRedis took %v against a server that never answers", d)
	}
	if err == nil {
		// Allowed, as long as publishing stays bounded.
		defer r.Close()
		if err := publishWithin(t, r, popuptest.Sample("org", "x", "main"), 300*time.Millisecond, deadlineSlack); err == nil {
			t.Error("publish to a server that never answers succeeded")
		}
	}

	// With a short deadline of the caller's own, NewRedis stops waiting by it, and the broker
	// starts down: publishing fails at once.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	r2, err := popup.NewRedis(ctx, u, popup.RedisOptions{})
	if err != nil {
		t.Fatalf("NewRedis against a server that never answers: %v, want a broker that is down", err)
	}
	defer r2.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("NewRedis took %v with a 300ms deadline", d)
	}
	if r2.Up() {
		t.Error("a broker on a server that never answers is up")
	}
	if err := r2.Publish(t.Context(), popuptest.Sample("org", "x", "main")); !errors.Is(err, popup.ErrDown) {
		t.Errorf("publish while down: %v, want ErrDown", err)
	}
}

// waitUp polls r until Up is want, failing t after 30 seconds.
func waitUp(t *testing.T, r *popup.Redis, want bool) {
	t.Helper()
	testwait.Until(t, 30*time.Second, fmt.Sprintf("broker Up() to be %v", want), func() bool { return r.Up() == want })
}

// TestRedisDownAtStart makes the broker while nothing listens at its address, then starts a real
// redis-server there: the broker starts down (no error), fails publishes at once and counts them,
// and goes up by itself, after which publishing and subscribing work without a new broker.
func TestRedisDownAtStart(t *testing.T) {
	srv := popuptest.NewRedisServer(t)
	reg := prometheus.NewRegistry()
	r := newRedis(t, srv.URL(), popup.RedisOptions{Registerer: reg, RetryInterval: 200 * time.Millisecond})
	if r.Up() {
		t.Fatal("broker up with nothing listening")
	}
	if got := metrictest.Sum(t, reg, "callwire_broker_up"); got != 0 {
		t.Errorf("callwire_broker_up = %v while down, want 0", got)
	}
	org := popuptest.OrgID(t)
	for i := range 3 {
		// Known down, the broker does not wait for Redis: no deadline is needed to bound this.
		if err := r.Publish(context.WithoutCancel(t.Context()), popuptest.Sample(org, "down", "main")); !errors.Is(err, popup.ErrDown) {
			t.Fatalf("publish %d while down: %v, want ErrDown", i, err)
		}
	}
	if got := metrictest.Sum(t, reg, "callwire_broker_popups_total", "outcome", "failed"); got != 3 {
		t.Errorf("failed = %v, want 3", got)
	}
	if _, err := r.Subscribe(t.Context(), org, []string{"main"}); !errors.Is(err, popup.ErrDown) {
		t.Errorf("subscribe while down: %v, want ErrDown", err)
	}

	srv.Start()
	waitUp(t, r, true)
	if got := metrictest.Sum(t, reg, "callwire_broker_up"); got != 1 {
		t.Errorf("callwire_broker_up = %v once up, want 1", got)
	}
	sub, err := r.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatalf("subscribe once up: %v", err)
	}
	defer sub.Close()
	if err := r.Publish(t.Context(), popuptest.Sample(org, "back", "main")); err != nil {
		t.Fatalf("publish once up: %v", err)
	}
	if got := popuptest.Receive(t, sub); got.ID != "back" {
		t.Fatalf("got %q, want back", got.ID)
	}

	// Down again: the lost subscription ends, and the broker notices by itself.
	srv.Stop()
	popuptest.Ended(t, sub)
	waitUp(t, r, false)
	if got := metrictest.Sum(t, reg, "callwire_broker_up"); got != 0 {
		t.Errorf("callwire_broker_up = %v after Redis stopped, want 0", got)
	}
	srv.Start()
	waitUp(t, r, true)
	if err := r.Publish(t.Context(), popuptest.Sample(org, "again", "main")); err != nil {
		t.Fatalf("publish after the second restart: %v", err)
	}
}

func TestRedisDropsMalformedMessages(t *testing.T) {
	u := popuptest.RedisURL(t)
	reg := prometheus.NewRegistry()
	r := newRedis(t, u, popup.RedisOptions{Registerer: reg})
	org := popuptest.OrgID(t)
	sub, err := r.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	raw := redis.NewClient(opt)
	defer raw.Close()
	foreign := `{"id":"foreign","orgId":"someone-else","locations":["main"]}`
	for _, payload := range []string{"not json", `{"id":`, foreign, `{"orgId":"` + org + `"}`} {
		if err := raw.Publish(t.Context(), popup.Channel(org, "main"), payload).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Publish(t.Context(), popuptest.Sample(org, "good", "main")); err != nil {
		t.Fatal(err)
	}
	if got := popuptest.Receive(t, sub); got.ID != "good" {
		t.Fatalf("got %q, want only the good popup", got.ID)
	}
	if got := metrictest.Sum(t, reg, "callwire_broker_popups_total", "outcome", "malformed"); got != 4 {
		t.Errorf("malformed = %v, want 4", got)
	}
	// The subscription counts a delivery after handing the popup over, so the count may trail
	// the receive by a moment.
	testwait.Poll(5*time.Second, func() bool {
		return metrictest.Sum(t, reg, "callwire_broker_popups_total", "outcome", "delivered") == 1
	})
	if got := metrictest.Sum(t, reg, "callwire_broker_popups_total", "outcome", "delivered"); got != 1 {
		t.Errorf("delivered = %v, want 1", got)
	}
}

func TestRedisBadURL(t *testing.T) {
	for _, u := range []string{"", "http://127.0.0.1:6379", "redis://127.0.0.1:6379/notanumber"} {
		if r, err := popup.NewRedis(t.Context(), u, popup.RedisOptions{}); err == nil {
			r.Close()
			t.Errorf("NewRedis(%q) succeeded", u)
		} else if !strings.HasPrefix(err.Error(), "popup: ") {
			t.Errorf("NewRedis(%q): %v", u, err)
		}
	}
}

// TestRedisReachesAnotherProcess publishes through one broker and receives through another, as
// two replicas on one Redis do.
func TestRedisReachesAnotherProcess(t *testing.T) {
	u := popuptest.RedisURL(t)
	a := newRedis(t, u, popup.RedisOptions{})
	b := newRedis(t, u, popup.RedisOptions{})
	org := popuptest.OrgID(t)
	sub, err := b.Subscribe(t.Context(), org, []string{"front", "back"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := a.Publish(t.Context(), popuptest.Sample(org, "cross", "front", "back")); err != nil {
		t.Fatal(err)
	}
	if got := popuptest.Receive(t, sub); got.ID != "cross" {
		t.Fatalf("got %q", got.ID)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(t.Context(), popuptest.Sample(org, "late", "front")); !errors.Is(err, popup.ErrClosed) {
		t.Errorf("publish after close: %v, want ErrClosed", err)
	}
}
