package popup_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
)

// failoverDesk is a desk of one organization, subscribed through one broker, that subscribes
// again whenever its subscription ends, and records what it receives.
type failoverDesk struct {
	mu           sync.Mutex
	delivered    map[string]int
	deliveredAt  map[string]time.Time
	subscribedAt []time.Time
	endedAt      []time.Time
	ends         []error // why each subscription ended
	refused      int     // Subscribe failures
	done         chan struct{}
}

func startFailoverDesk(t *testing.T, ctx context.Context, b *popup.Redis, org string) *failoverDesk {
	d := &failoverDesk{delivered: map[string]int{}, deliveredAt: map[string]time.Time{}, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for ctx.Err() == nil {
			s, err := b.Subscribe(ctx, org, []string{"front"})
			if err != nil {
				d.mu.Lock()
				d.refused++
				d.mu.Unlock()
				time.Sleep(50 * time.Millisecond)
				continue
			}
			d.mu.Lock()
			d.subscribedAt = append(d.subscribedAt, time.Now())
			d.mu.Unlock()
			for p := range s.Popups() {
				d.mu.Lock()
				d.delivered[p.ID]++
				d.deliveredAt[p.ID] = time.Now()
				d.mu.Unlock()
			}
			d.mu.Lock()
			d.endedAt = append(d.endedAt, time.Now())
			d.ends = append(d.ends, s.Err())
			d.mu.Unlock()
			s.Close()
		}
	}()
	deadline := time.Now().Add(popuptest.Wait)
	for {
		d.mu.Lock()
		n := len(d.subscribedAt)
		d.mu.Unlock()
		if n > 0 {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the desk of %s did not subscribe", org)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// has reports whether the desk received the ringing id.
func (d *failoverDesk) has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.delivered[id] > 0
}

// ringing is one ringing of the failover test, published as two copies through two brokers.
type ringing struct {
	id        string
	at        time.Time
	published int // copies answered nil
	failed    int // copies answered neither nil nor ErrRepeat
}

// TestRedisClusterFailover publishes a steady stream of ringings of two organizations, one on
// the master it kills (SIGKILL) and one on another shard, each ringing as two copies racing
// through two brokers (two replicas), to a desk of each organization subscribed through one of
// them that subscribes again whenever its subscription ends. The killed master's replica takes
// over. The organization on the other shard must not notice: every one of its ringings is
// published once and delivered once, and its desk's subscription never ends. The killed
// shard's organization must resume within the failover time and a bound, its desk's
// subscription must end (the desk is told, and would get the replay from the store), no ringing
// of it may be published or delivered twice, and both brokers must have the shard up again.
// What was lost, and for how long, is logged.
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
	var other string // an organization on another shard
	for range 200 {
		o := popuptest.OrgID(t)
		m, err := c.MasterOf(t.Context(), popup.ClusterClaimKey(o, ""))
		if err != nil {
			t.Fatal(err)
		}
		if m != master {
			other = o
			break
		}
	}
	if other == "" {
		t.Fatal("no organization found on another shard")
	}

	deskCtx, stopDesks := context.WithCancel(t.Context())
	defer stopDesks()
	desk := startFailoverDesk(t, deskCtx, b, org)
	otherDesk := startFailoverDesk(t, deskCtx, b, other)

	// Whether broker a saw the shard down, and whether it ever saw the whole cluster down.
	var (
		watchMu   sync.Mutex
		shardDown bool
		allDown   bool
	)
	watchCtx, stopWatch := context.WithCancel(t.Context())
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for watchCtx.Err() == nil {
			watchMu.Lock()
			shardDown = shardDown || a.ShardsDown() > 0
			allDown = allDown || !a.Up()
			watchMu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()

	publish := func(orgID, id string) ringing {
		r := ringing{id: id, at: time.Now()}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k, br := range []*popup.Redis{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
				defer cancel()
				errs[k] = br.Publish(ctx, popuptest.Sample(orgID, r.id, "front"))
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
	var (
		rings, others []ringing
		pubs          sync.WaitGroup
	)
	tick := func(i int) {
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			others = append(others, publish(other, fmt.Sprintf("other-%04d", i)))
		}()
		rings = append(rings, publish(org, fmt.Sprintf("ring-%04d", i)))
		pubs.Wait()
	}
	const every = 20 * time.Millisecond
	i := 0
	for start := time.Now(); time.Since(start) < time.Second; i++ {
		tick(i)
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
		tick(i)
		i++
		if resumedAt.IsZero() {
			desk.mu.Lock()
			for _, r := range rings {
				if at, ok := desk.deliveredAt[r.id]; ok && r.at.After(killedAt) {
					resumedAt = at
					break
				}
			}
			desk.mu.Unlock()
		}
		time.Sleep(every)
	}
	// Let the last popups arrive.
	deadline := time.Now().Add(popuptest.Wait)
	for !desk.has(rings[len(rings)-1].id) || !otherDesk.has(others[len(others)-1].id) {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopDesks()
	<-desk.done
	<-otherDesk.done
	stopWatch()
	<-watchDone

	desk.mu.Lock()
	defer desk.mu.Unlock()
	otherDesk.mu.Lock()
	defer otherDesk.mu.Unlock()

	// The other shard's organization.
	var otherLost int
	for _, r := range others {
		if r.published != 1 || r.failed != 0 {
			t.Errorf("%s of the other shard's organization: published %d times, failed %d times", r.id, r.published, r.failed)
		}
		switch n := otherDesk.delivered[r.id]; {
		case n == 0:
			otherLost++
		case n > 1:
			t.Errorf("%s delivered %d times", r.id, n)
		}
	}
	if otherLost > 0 {
		t.Errorf("the other shard's organization lost %d of its %d ringings", otherLost, len(others))
	}
	if n := len(otherDesk.subscribedAt); n != 1 {
		t.Errorf("the other shard's desk subscribed %d times (its subscription ended: %v), want once", n, otherDesk.ends)
	}

	// The killed shard's organization.
	lastSubscribed := desk.subscribedAt[len(desk.subscribedAt)-1]
	var missed, unheard, inWindow int
	for _, r := range rings {
		if r.published > 1 {
			t.Errorf("%s published %d times", r.id, r.published)
		}
		if n := desk.delivered[r.id]; n > 1 {
			t.Errorf("%s delivered %d times", r.id, n)
		}
		if r.at.Before(killedAt.Add(-time.Second)) || r.at.After(resumedAt) {
			if r.published == 1 && desk.delivered[r.id] == 0 && r.at.After(lastSubscribed) {
				t.Errorf("%s, published at %v after the desk's last subscription, never arrived", r.id, r.at.Sub(killedAt))
			}
		}
		if r.at.After(killedAt) && r.at.Before(resumedAt) {
			inWindow++
			switch {
			case r.published == 0:
				missed++
			case desk.delivered[r.id] == 0:
				unheard++
			}
		}
	}
	var deskGap time.Duration
	for k, end := range desk.endedAt {
		if end.After(killedAt) && k+1 < len(desk.subscribedAt) {
			deskGap = desk.subscribedAt[k+1].Sub(end)
			break
		}
	}
	if len(desk.endedAt) == 0 || !desk.endedAt[0].After(killedAt) {
		t.Error("the killed shard's desk was not told: its subscription did not end after the kill")
	}
	t.Logf("failover: popups of the killed shard's organization resumed %v after the kill; of its %d ringings published in that "+
		"window (one each %v), %d were missed (the publish failed), %d published but not delivered; its desk's subscription "+
		"ended %d time(s) (first: %v), it was refused %d time(s) and was without a subscription for %v. "+
		"The other shard's organization: %d ringings, %d lost, its desk subscribed %d time(s)",
		resumedAt.Sub(killedAt).Round(time.Millisecond), inWindow, every, missed, unheard, len(desk.endedAt), firstErr(desk.ends),
		desk.refused, deskGap.Round(time.Millisecond), len(others), otherLost, len(otherDesk.subscribedAt))
	if d := resumedAt.Sub(killedAt); d > clusterNodeTimeout+bound {
		t.Errorf("popups resumed %v after the kill", d)
	}
	watchMu.Lock()
	if !shardDown {
		t.Error("broker a never reported a shard down during the failover")
	}
	if allDown {
		t.Error("broker a reported the whole cluster down during the failover of one master")
	}
	watchMu.Unlock()
	for name, r := range map[string]*popup.Redis{"a": a, "b": b} {
		deadline := time.Now().Add(popuptest.Wait)
		for !r.Up() || r.ShardsDown() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("broker %s: up %v, %d shards down, %v after the failover", name, r.Up(), r.ShardsDown(), popuptest.Wait)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// firstErr returns the first non-nil error of errs, or nil.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
