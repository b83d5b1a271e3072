package popup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// On a Redis Cluster the broker's health is kept per shard, a shard being named by the address
// of the master that serves it: a failed publish, notice or subscription of an organization marks
// down only the shard that serves the organization's slot, so that a master's death costs only
// the organizations it serves (see docs/popup.md, "On a Redis Cluster"). While a shard is down,
// Publish, NotifyCallbacks and Subscribe for its organizations fail at once with ErrDown, and
// the subscriptions on it end (so that their desks connect again and get, from the store, the
// ringings they missed); the organizations of the other shards go on as usual. The health loop
// pings every master with backoff while a shard is down; a shard is up again once its master
// answers, or once the cluster no longer names it a master (its replica took over its slots,
// which the organizations' next commands reach).

// shardHealth is the set of a cluster broker's shards known to be down, and its gauge.
type shardHealth struct {
	client *redis.ClusterClient
	gauge  prometheus.Gauge // callwire_broker_shards_down

	mu   sync.Mutex
	down map[string]error // master address: why it is down
}

// newShardsDownGauge makes the gauge callwire_broker_shards_down labelled broker=kind and
// registers it with reg (nil registers nothing); one registered already is shared.
func newShardsDownGauge(kind string, reg prometheus.Registerer) (prometheus.Gauge, error) {
	return sharedGauge(reg, prometheus.GaugeOpts{
		Name:        "callwire_broker_shards_down",
		Help:        "Shards (masters) of the Redis Cluster the popup broker knows to be down: the popups of the organizations they serve are missed, and their popup streams answer 503, until each is up again.",
		ConstLabels: prometheus.Labels{"broker": kind},
	})
}

// ShardsDown reports how many shards of the cluster the broker knows to be down: always 0 on
// one server, whose health is the broker's (Up).
func (r *Redis) ShardsDown() int {
	if r.shards == nil {
		return 0
	}
	r.shards.mu.Lock()
	defer r.shards.mu.Unlock()
	return len(r.shards.down)
}

// shardOf names the shard that serves orgID: the address of its slot's master as the cluster
// client last read the slots, or "" on one server.
func (r *Redis) shardOf(ctx context.Context, orgID string) (string, error) {
	if r.shards == nil {
		return "", nil
	}
	c, err := r.shards.client.MasterForKey(ctx, ClusterClaimKey(orgID, ""))
	if err != nil {
		return "", fmt.Errorf("popup: redis cluster slots: %w", err)
	}
	return c.Options().Addr, nil
}

// available returns the shard that serves orgID, or ErrDown while the broker knows Redis (on a
// cluster: that shard, or every master) to be down.
func (r *Redis) available(ctx context.Context, orgID string) (string, error) {
	if !r.up.Load() {
		return "", ErrDown
	}
	shard, err := r.shardOf(ctx, orgID)
	if err != nil {
		r.kickHealth()
		return "", err
	}
	if r.shardDown(shard) {
		return "", fmt.Errorf("shard %s: %w", shard, ErrDown)
	}
	return shard, nil
}

// shardDown reports whether shard is known to be down.
func (r *Redis) shardDown(shard string) bool {
	if r.shards == nil {
		return false
	}
	r.shards.mu.Lock()
	defer r.shards.mu.Unlock()
	_, down := r.shards.down[shard]
	return down
}

// failed records a failure of Redis met by a command or subscription of shard: on one server the
// broker is down, on a cluster that shard is.
func (r *Redis) failed(shard string, err error) {
	if r.shards == nil {
		r.down(err)
		return
	}
	r.markShardDown(shard, err)
	r.kickHealth()
}

// answered records that shard answered a command: on one server Redis is up, on a cluster that
// shard is, and so is the cluster.
func (r *Redis) answered(shard string) {
	if r.shards != nil {
		r.markShardUp(shard)
	}
	r.setUp(true, nil)
}

// markShardDown records shard as down and ends the subscriptions on it, whose desks would
// otherwise miss its popups without being told.
func (r *Redis) markShardDown(shard string, err error) {
	h := r.shards
	h.mu.Lock()
	_, was := h.down[shard]
	if !was {
		h.down[shard] = err
		h.gauge.Set(float64(len(h.down)))
	}
	h.mu.Unlock()
	if was {
		return
	}
	r.log.Warn("redis shard is down; popups of the organizations it serves are missed until it answers",
		"component", "popup", "shard", shard, "error", err)
	r.mu.Lock()
	var ending []*redisSub
	for s := range r.subs {
		if s.shard == shard {
			ending = append(ending, s)
		}
	}
	r.mu.Unlock()
	why := fmt.Errorf("popup: redis shard %s: %w: %w", shard, ErrDown, err)
	for _, s := range ending {
		if s.finish(why) {
			r.log.Warn("popup subscription ended; the workstation must subscribe again", "error", why, "org_id", s.org)
		}
	}
}

// markShardUp records shard as up.
func (r *Redis) markShardUp(shard string) {
	h := r.shards
	h.mu.Lock()
	_, was := h.down[shard]
	delete(h.down, shard)
	h.gauge.Set(float64(len(h.down)))
	h.mu.Unlock()
	if was {
		r.log.Info("redis shard answers again; popups of the organizations it serves are published",
			"component", "popup", "shard", shard)
	}
}

// pingShards reads the cluster's slots anew and pings every master: each that answers is up, each
// that does not is down, and a shard down whose address the cluster no longer names a master (its
// replica took over its slots) is up. It fails when the slots cannot be read or no master
// answers: then the cluster is down as a whole.
func (r *Redis) pingShards(ctx context.Context) error {
	var (
		mu       sync.Mutex
		answered []string
		failed   = map[string]error{}
	)
	err := r.shards.client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		err := c.Ping(ctx).Err()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed[c.Options().Addr] = err
		} else {
			answered = append(answered, c.Options().Addr)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.shards.mu.Lock()
	var up []string
	for shard := range r.shards.down {
		if _, ok := failed[shard]; !ok {
			up = append(up, shard)
		}
	}
	r.shards.mu.Unlock()
	for _, shard := range up {
		r.markShardUp(shard)
	}
	addrs := make([]string, 0, len(failed))
	for addr := range failed {
		addrs = append(addrs, addr)
	}
	slices.Sort(addrs)
	errs := make([]error, 0, len(addrs))
	for _, addr := range addrs {
		r.markShardDown(addr, failed[addr])
		errs = append(errs, fmt.Errorf("%s: %w", addr, failed[addr]))
	}
	if len(answered) == 0 {
		return fmt.Errorf("no master answers: %w", errors.Join(errs...))
	}
	return nil
}
