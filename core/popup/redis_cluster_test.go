package popup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/internal/rediscluster"
	"github.com/callwire/callwire/internal/testwait"
)

// clusterNodeTimeout is the test clusters' cluster-node-timeout: how long a dead master goes
// unnoticed before its replica takes over.
const clusterNodeTimeout = time.Second

func newRedisCluster(t *testing.T, urls []string, o popup.RedisOptions) *popup.Redis {
	t.Helper()
	r, err := popup.NewRedisCluster(t.Context(), urls, o)
	if err != nil {
		t.Fatalf("redis cluster broker: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestRedisCluster runs the contract, and what only a cluster shows, against one cluster of the
// test's own.
func TestRedisCluster(t *testing.T) {
	c := popuptest.NewRedisCluster(t, clusterNodeTimeout)
	urls := c.URLs()
	t.Run("Contract", func(t *testing.T) {
		popuptest.Run(t, func(t *testing.T) popup.Broker {
			return newRedisCluster(t, urls, popup.RedisOptions{HealthInterval: time.Second})
		})
	})
	t.Run("AnOrganizationsNamesShareASlot", func(t *testing.T) { testClusterSlots(t, c) })
	t.Run("ReachesAnotherBrokerOnEveryShard", func(t *testing.T) { testClusterAcrossBrokers(t, c) })
	t.Run("PublishesOnceAcrossBrokers", func(t *testing.T) {
		a := newRedisCluster(t, urls, popup.RedisOptions{})
		b := newRedisCluster(t, urls, popup.RedisOptions{})
		org := popuptest.OrgID(t)
		sub, err := b.Subscribe(t.Context(), org, []string{"front"})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		published := 0
		for i := range popuptest.Copies {
			err := []*popup.Redis{a, b}[i%2].Publish(t.Context(), popuptest.Sample(org, "ring", "front"))
			switch {
			case err == nil:
				published++
			case !errors.Is(err, popup.ErrRepeat):
				t.Fatalf("copy %d: %v", i, err)
			}
		}
		if published != 1 {
			t.Fatalf("%d copies published, want 1", published)
		}
		if err := a.Publish(t.Context(), popuptest.Sample(org, "marker", "front")); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"ring", "marker"} {
			if got := popuptest.Receive(t, sub); got.ID != want {
				t.Fatalf("received %s, want %s", got.ID, want)
			}
		}
	})
	// Last: it changes which master serves a slot.
	defer t.Run("SubscriptionEndsWhenItsSlotMoves", func(t *testing.T) { testClusterSlotMoves(t, c) })
	t.Run("RefusesAnOrganizationThatDefeatsTheHashTag", func(t *testing.T) {
		r := newRedisCluster(t, urls, popup.RedisOptions{})
		if err := r.Publish(t.Context(), popuptest.Sample("}org", "x", "main")); err == nil {
			t.Error("publish for the organization }org succeeded")
		}
		if s, err := r.Subscribe(t.Context(), "}org", []string{"main"}); err == nil {
			s.Close()
			t.Error("subscribe for the organization }org succeeded")
		}
		if err := r.NotifyCallbacks(t.Context(), "}org"); err == nil {
			t.Error("notice for the organization }org succeeded")
		}
	})
}

// testClusterSlots checks, with the cluster's own CLUSTER KEYSLOT, that every channel and claim
// key of an organization is in one slot, for ordinary ids and ids with braces.
func testClusterSlots(t *testing.T, c *rediscluster.Cluster) {
	for _, org := range []string{"0192e4c7-5b1a-7cc2-9d4e-1f2a3b4c5d6e", "org", "a}b", "{x}", "a{b", "{"} {
		names := []string{popup.ClusterChannel(org, "front"), popup.ClusterChannel(org, "back"),
			popup.ClusterCallbacksChannel(org), popup.ClusterClaimKey(org, "ring-1"), popup.ClusterClaimKey(org, "}{")}
		want := -1
		for _, n := range names {
			slot, err := c.Slot(t.Context(), n)
			if err != nil {
				t.Fatal(err)
			}
			if want == -1 {
				want = slot
			} else if slot != want {
				t.Errorf("organization %q: %s is in slot %d, %s in slot %d", org, names[0], want, n, slot)
			}
		}
	}
}

// testClusterAcrossBrokers publishes through one broker and receives through another, as two
// replicas do, for an organization on each master of the cluster at once: each subscription is
// bound to its own organization's shard.
func testClusterAcrossBrokers(t *testing.T, c *rediscluster.Cluster) {
	a := newRedisCluster(t, c.URLs(), popup.RedisOptions{})
	b := newRedisCluster(t, c.URLs(), popup.RedisOptions{})
	orgs := map[*rediscluster.Node]string{}
	for range 200 {
		org := popuptest.OrgID(t)
		m, err := c.MasterOf(t.Context(), popup.ClusterClaimKey(org, ""))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := orgs[m]; !ok {
			orgs[m] = org
		}
		if len(orgs) == rediscluster.Masters {
			break
		}
	}
	if len(orgs) != rediscluster.Masters {
		t.Fatalf("organizations found on %d masters, want %d", len(orgs), rediscluster.Masters)
	}
	subs := map[string]popup.Subscription{}
	for _, org := range orgs {
		s, err := b.Subscribe(t.Context(), org, []string{"front", "back"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		subs[org] = s
	}
	for org := range subs {
		if err := a.Publish(t.Context(), popuptest.Sample(org, "cross-"+org, "front", "back")); err != nil {
			t.Fatal(err)
		}
		if err := a.NotifyCallbacks(t.Context(), org); err != nil {
			t.Fatal(err)
		}
	}
	for org, s := range subs {
		if got := popuptest.Receive(t, s); got.ID != "cross-"+org {
			t.Errorf("organization %s received %s", org, got.ID)
		}
		select {
		case <-s.Callbacks():
		case <-time.After(popuptest.Wait):
			t.Errorf("organization %s: no to-call-back notice", org)
		}
	}
}

// TestRedisClusterFailover publishes a steady stream of ringings of one organization, each as two
// copies racing through two brokers (two replicas), to a desk subscribed through one of them
// that subscribes again whenever its subscription ends; meanwhile it kills (SIGKILL) the master
// serving the organization's slot. The replica takes over; publishing and the desk must resume
// within the failover time and a bound, no ringing may be published or delivered twice, and both
// brokers must be up again. What was lost, and for how long, is logged.
func TestRedisClusterFailover(t *testing.T) {
	c := popuptest.NewRedisCluster(t, clusterNodeTimeout)
	opts := func() popup.RedisOptions {
		return popup.RedisOptions{Registerer: prometheus.NewRegistry(), HealthInterval: 200 * time.Millisecond,
			RetryInterval: 200 * time.Millisecond}
	}
	a, b := newRedisCluster(t, c.URLs(), opts()), newRedisCluster(t, c.URLs(), opts())
	org := popuptest.OrgID(t)
	master, err := c.MasterOf(t.Context(), popup.ClusterClaimKey(org, ""))
	if err != nil {
		t.Fatal(err)
	}

	// The desk.
	var (
		mu           sync.Mutex
		delivered    = map[string]int{}
		deliveredAt  = map[string]time.Time{}
		subscribedAt []time.Time
		endedAt      []time.Time
		refused      int // Subscribe failures
	)
	deskCtx, stopDesk := context.WithCancel(t.Context())
	deskDone := make(chan struct{})
	go func() {
		defer close(deskDone)
		for deskCtx.Err() == nil {
			s, err := b.Subscribe(deskCtx, org, []string{"front"})
			if err != nil {
				mu.Lock()
				refused++
				mu.Unlock()
				time.Sleep(50 * time.Millisecond) // the desk's pause before it subscribes again, as a browser's
				continue
			}
			mu.Lock()
			subscribedAt = append(subscribedAt, time.Now())
			mu.Unlock()
			for p := range s.Popups() {
				mu.Lock()
				delivered[p.ID]++
				deliveredAt[p.ID] = time.Now()
				mu.Unlock()
			}
			mu.Lock()
			endedAt = append(endedAt, time.Now())
			mu.Unlock()
			s.Close()
		}
	}()
	testwait.Until(t, popuptest.Wait, "the desk to subscribe", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(subscribedAt) > 0
	})

	// Whether broker a was seen down.
	var sawDown sync.WaitGroup
	downSeen := make(chan struct{})
	sawDown.Add(1)
	watchCtx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	go func() {
		defer sawDown.Done()
		for watchCtx.Err() == nil {
			if !a.Up() {
				close(downSeen)
				return
			}
			time.Sleep(5 * time.Millisecond) // a sample of Up every 5ms, until it is seen false
		}
	}()

	type ringing struct {
		id        string
		at        time.Time
		published int // copies answered nil
		failed    int // copies answered neither nil nor ErrRepeat
	}
	var rings []ringing
	publish := func(i int) ringing {
		r := ringing{id: fmt.Sprintf("ring-%04d", i), at: time.Now()}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k, br := range []*popup.Redis{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
				defer cancel()
				errs[k] = br.Publish(ctx, popuptest.Sample(org, r.id, "front"))
			}()
		}
		wg.Wait()
		for _, err := range errs {
			switch {
			case err == nil:
				r.published++
			case !errors.Is(err, popup.ErrRepeat):
				r.failed++
			}
		}
		return r
	}
	// The ringing rate: a popup every 20ms of real time, before the kill and through the failover,
	// whose gap in delivery is what the test measures.
	const every = 20 * time.Millisecond
	i := 0
	for start := time.Now(); time.Since(start) < time.Second; i++ {
		rings = append(rings, publish(i))
		time.Sleep(every)
	}
	killedAt := time.Now()
	master.Kill()
	t.Logf("killed the master %s serving the organization's slot", master.Addr())

	// Publish until a ringing published after the kill reaches the desk, then a second more.
	const bound = 15 * time.Second // the failover itself takes about two node timeouts
	var resumedAt time.Time
	for resumedAt.IsZero() || time.Since(resumedAt) < time.Second {
		if time.Since(killedAt) > clusterNodeTimeout+bound {
			t.Fatalf("no popup reached the desk within %v of the kill", clusterNodeTimeout+bound)
		}
		rings = append(rings, publish(i))
		i++
		if resumedAt.IsZero() {
			mu.Lock()
			for _, r := range rings {
				if at, ok := deliveredAt[r.id]; ok && r.at.After(killedAt) {
					resumedAt = at
					break
				}
			}
			mu.Unlock()
		}
		time.Sleep(every)
	}
	// Let the last popups arrive.
	last := rings[len(rings)-1].id
	testwait.Poll(popuptest.Wait, func() bool {
		mu.Lock()
		defer mu.Unlock()
		_, ok := delivered[last]
		return ok
	})
	stopDesk()
	<-deskDone

	mu.Lock()
	defer mu.Unlock()
	lastSubscribed := subscribedAt[len(subscribedAt)-1]
	var missed, unheard, inWindow int
	for _, r := range rings {
		if r.published > 1 {
			t.Errorf("%s published %d times", r.id, r.published)
		}
		if n := delivered[r.id]; n > 1 {
			t.Errorf("%s delivered %d times", r.id, n)
		}
		if r.at.Before(killedAt.Add(-time.Second)) || r.at.After(resumedAt) {
			if r.published == 1 && delivered[r.id] == 0 && r.at.After(lastSubscribed) {
				t.Errorf("%s, published at %v after the desk's last subscription, never arrived", r.id, r.at.Sub(killedAt))
			}
		}
		if r.at.After(killedAt) && r.at.Before(resumedAt) {
			inWindow++
			switch {
			case r.published == 0:
				missed++
			case delivered[r.id] == 0:
				unheard++
			}
		}
	}
	var deskGap time.Duration
	for k, end := range endedAt {
		if end.After(killedAt) && k+1 < len(subscribedAt) {
			deskGap = subscribedAt[k+1].Sub(end)
			break
		}
	}
	t.Logf("failover: popups resumed %v after the kill; of the %d ringings published in that window (one each %v), %d were missed "+
		"(the publish failed), %d published but not delivered; the desk's subscription ended %d time(s), it was refused %d time(s) "+
		"and was without a subscription for %v",
		resumedAt.Sub(killedAt).Round(time.Millisecond), inWindow, every, missed, unheard, len(endedAt), refused, deskGap.Round(time.Millisecond))
	if d := resumedAt.Sub(killedAt); d > clusterNodeTimeout+bound {
		t.Errorf("popups resumed %v after the kill", d)
	}
	select {
	case <-downSeen:
	default:
		t.Error("broker a never reported the cluster down during the failover")
	}
	stopWatch()
	sawDown.Wait()
	for name, r := range map[string]*popup.Redis{"a": a, "b": b} {
		testwait.Until(t, popuptest.Wait, "broker "+name+" to be up after the failover", r.Up)
	}
}

// testClusterSlotMoves moves the slot of an organization to another master while a desk is
// subscribed: Redis ends the sharded subscription (SUNSUBSCRIBE), and the subscription must end
// with an error rather than stay open and silent; a new subscription, and publishing, reach the
// new master.
func testClusterSlotMoves(t *testing.T, c *rediscluster.Cluster) {
	r := newRedisCluster(t, c.URLs(), popup.RedisOptions{})
	org := popuptest.OrgID(t)
	sub, err := r.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	key := popup.ClusterClaimKey(org, "")
	owner, err := c.MasterOf(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	masters, err := c.Masters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var to *rediscluster.Node
	for _, m := range masters {
		if m != owner {
			to = m
			break
		}
	}
	slot, err := c.Slot(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MoveSlot(t.Context(), slot, to); err != nil {
		t.Fatal(err)
	}
	popuptest.Ended(t, sub)
	if err := sub.Err(); err == nil || !strings.Contains(err.Error(), "sunsubscribe") {
		t.Errorf("Err of a subscription whose slot moved = %v, want it to name sunsubscribe", err)
	}
	again, err := r.Subscribe(t.Context(), org, []string{"main"})
	if err != nil {
		t.Fatalf("subscribe after the slot moved: %v", err)
	}
	defer again.Close()
	if err := r.Publish(t.Context(), popuptest.Sample(org, "moved", "main")); err != nil {
		t.Fatalf("publish after the slot moved: %v", err)
	}
	if got := popuptest.Receive(t, again); got.ID != "moved" {
		t.Errorf("received %s, want moved", got.ID)
	}
}
