package popup_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/internal/metrictest"
)

func newRedis(t *testing.T, url string, o popup.RedisOptions) *popup.Redis {
	t.Helper()
	r, err := popup.NewRedis(t.Context(), url, o)
	if err != nil {
		t.Fatalf("redis broker: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRedisContract(t *testing.T) {
	url := popuptest.RedisURL(t)
	popuptest.Run(t, func(t *testing.T) popup.Broker {
		return newRedis(t, url, popup.RedisOptions{HealthInterval: time.Second})
	})
}

// rawRedis is a plain client of the test Redis, to look at what the broker left there.
func rawRedis(t *testing.T, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRedisPublishesOnceAcrossBrokers races copies of one ringing through two brokers on the
// same Redis, as two replicas do: one is published, the others are repeats, and each broker's
// subscriber receives it once.
func TestRedisPublishesOnceAcrossBrokers(t *testing.T) {
	url := popuptest.RedisURL(t)
	regs := []*prometheus.Registry{prometheus.NewRegistry(), prometheus.NewRegistry()}
	brokers := []*popup.Redis{
		newRedis(t, url, popup.RedisOptions{Registerer: regs[0]}),
		newRedis(t, url, popup.RedisOptions{Registerer: regs[1]}),
	}
	org := popuptest.OrgID(t)
	var subs []popup.Subscription
	for _, b := range brokers {
		s, err := b.Subscribe(t.Context(), org, []string{"front"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		subs = append(subs, s)
	}
	errs := make([]error, popuptest.Copies)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range popuptest.Copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := popuptest.Sample(org, "racing", "front")
			p.TraceID = fmt.Sprintf("copy-%d", i)
			ctx, cancel := context.WithTimeout(t.Context(), popuptest.Wait)
			defer cancel()
			<-gate
			errs[i] = brokers[i%2].Publish(ctx, p)
		}()
	}
	close(gate)
	wg.Wait()
	published := 0
	for i, err := range errs {
		switch {
		case err == nil:
			published++
		case !errors.Is(err, popup.ErrRepeat):
			t.Errorf("copy %d: %v", i, err)
		}
	}
	if published != 1 {
		t.Fatalf("%d copies published, want 1", published)
	}
	if err := brokers[1].Publish(t.Context(), popuptest.Sample(org, "marker", "front")); err != nil {
		t.Fatal(err)
	}
	for i, s := range subs {
		for _, want := range []string{"racing", "marker"} {
			if p := popuptest.Receive(t, s); p.ID != want {
				t.Fatalf("subscriber on broker %d received %s, want %s", i, p.ID, want)
			}
		}
	}
	var repeats float64
	for _, reg := range regs {
		repeats += metrictest.Sum(t, reg, "callwire_broker_popups_total", "outcome", "repeat")
	}
	if repeats != popuptest.Copies-1 {
		t.Errorf("repeat = %v across the brokers, want %d", repeats, popuptest.Copies-1)
	}
}

// TestRedisClaimExpires checks the claim key's time to live, and that a ringing can be published
// again once its claim has expired.
func TestRedisClaimExpires(t *testing.T) {
	url := popuptest.RedisURL(t)
	raw := rawRedis(t, url)
	for _, tt := range []struct {
		name string
		ttl  time.Duration
		want time.Duration
	}{
		{"default", 0, popup.DefaultClaimTTL},
		{"given", 90 * time.Second, 90 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newRedis(t, url, popup.RedisOptions{ClaimTTL: tt.ttl})
			org := popuptest.OrgID(t)
			if err := b.Publish(t.Context(), popuptest.Sample(org, "ring", "main")); err != nil {
				t.Fatal(err)
			}
			left, err := raw.PTTL(t.Context(), popup.ClaimKey(org, "ring")).Result()
			if err != nil {
				t.Fatal(err)
			}
			if left <= 0 || left > tt.want {
				t.Errorf("claim key lives %v more, want up to %v", left, tt.want)
			}
		})
	}

	b := newRedis(t, url, popup.RedisOptions{ClaimTTL: time.Millisecond})
	org := popuptest.OrgID(t)
	s, err := b.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := b.Publish(t.Context(), popuptest.Sample(org, "ring", "main")); err != nil {
		t.Fatal(err)
	}
	popuptest.Receive(t, s)
	deadline := time.Now().Add(popuptest.Wait)
	for {
		err := b.Publish(t.Context(), popuptest.Sample(org, "ring", "main"))
		if err == nil {
			break
		}
		if !errors.Is(err, popup.ErrRepeat) || time.Now().After(deadline) {
			t.Fatalf("publish after the claim expired: %v", err)
		}
	}
	if p := popuptest.Receive(t, s); p.ID != "ring" {
		t.Errorf("received %s after the claim expired, want ring", p.ID)
	}
}

// TestRedisResentPublishIsNotARepeat: the Redis client resends a command whose reply it did not
// get in time; when the first run had claimed and published, the resend must not report the
// publish as a repeat, nor publish again. Another publish of the ringing is a repeat.
func TestRedisResentPublishIsNotARepeat(t *testing.T) {
	r := newRedis(t, popuptest.RedisURL(t), popup.RedisOptions{})
	org := popuptest.OrgID(t)
	s, err := r.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ring := popuptest.Sample(org, "ring", "main")
	for _, step := range []struct {
		what, token string
		want        bool
	}{
		{"the publish", "a", true},
		{"its resend", "a", true},
		{"another publish", "b", false},
	} {
		published, err := r.PublishAs(t.Context(), ring, step.token)
		if err != nil || published != step.want {
			t.Fatalf("%s: published %v, %v; want %v", step.what, published, err, step.want)
		}
	}
	if err := r.Publish(t.Context(), popuptest.Sample(org, "marker", "main")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ring", "marker"} {
		if got := popuptest.Receive(t, s); got.ID != want {
			t.Fatalf("received %s, want %s (the ringing once, then the marker)", got.ID, want)
		}
	}
}

// TestRedisFailedPublishClaimsNothing: a publish that could not reach Redis leaves the ringing
// unclaimed, so the reporter's retry rings the desks once Redis is back.
func TestRedisFailedPublishClaimsNothing(t *testing.T) {
	p, u := proxied(t)
	b := newRedis(t, u, popup.RedisOptions{})
	direct := newRedis(t, popuptest.RedisURL(t), popup.RedisOptions{})
	org := popuptest.OrgID(t)
	s, err := direct.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p.Cut()
	if err := publishWithin(t, b, popuptest.Sample(org, "ring", "main"), 300*time.Millisecond, refusedSlack); err == nil || errors.Is(err, popup.ErrRepeat) {
		t.Fatalf("publish with Redis stopped: %v, want a failure", err)
	}
	p.Restore()
	deadline := time.Now().Add(popuptest.Wait)
	for {
		err := publishWithin(t, b, popuptest.Sample(org, "ring", "main"), time.Second, refusedSlack)
		if err == nil {
			break
		}
		if errors.Is(err, popup.ErrRepeat) || time.Now().After(deadline) {
			t.Fatalf("publish once Redis is back: %v", err)
		}
	}
	if got := popuptest.Receive(t, s); got.ID != "ring" {
		t.Errorf("received %s, want ring", got.ID)
	}
}
