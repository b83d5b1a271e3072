package popup_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/internal/rediscluster"
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
