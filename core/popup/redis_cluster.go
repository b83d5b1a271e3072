package popup

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NewRedisCluster makes a broker on the Redis Cluster that the seed nodes at urls belong to
// (redis:// or rediss:// URLs, as parsed by go-redis's ParseURL; one reachable seed is enough,
// the client learns the others from it), and pings every master once, within ctx and the dial
// and read timeouts, to learn whether the cluster is up. The broker is the same as NewRedis's,
// with these differences (see docs/popup.md, "On a Redis Cluster"):
//
//   - Popups and to-call-back notices travel by sharded pub/sub (SPUBLISH, SSUBSCRIBE; Redis 7
//     or later) on the channels ClusterChannel and ClusterCallbacksChannel, and a ringing is
//     claimed under ClusterClaimKey. Their names carry the organization as a hash tag, so all of
//     an organization's channels and claims are in one slot: the claim-and-publish script runs
//     on the master that serves it, and each subscription is one SSUBSCRIBE on one node.
//   - Health is per shard (see ShardsDown): a master that fails a publish, a notice, a
//     subscription or a ping marks down only its shard, whose organizations' Publish,
//     NotifyCallbacks and Subscribe fail at once with ErrDown and whose subscriptions end,
//     until its master answers again or its replica has taken over its slots. The organizations
//     of the other shards go on as usual. The broker is up (Up) while the cluster's slots can be
//     read and at least one master answers.
//   - Organization ids starting with '}' are refused: they would defeat the hash tag.
//
// It fails when urls is empty, when a URL is unusable, names a database other than 0 (a cluster
// has only that one) or other credentials or TLS than the first, or when the metrics cannot be
// registered. A cluster that does not answer is not an error: the broker starts down. The caller
// closes the broker.
func NewRedisCluster(ctx context.Context, urls []string, o RedisOptions) (*Redis, error) {
	co, err := clusterOptions(urls)
	if err != nil {
		return nil, err
	}
	o = o.withDefaults()
	o.setClient(clientFields{&co.DialTimeout, &co.ReadTimeout, &co.WriteTimeout, &co.PoolTimeout,
		&co.MaxRetries, &co.ContextTimeoutEnabled, &co.DisableIdentity, &co.MaintNotificationsConfig})
	client := redis.NewClusterClient(co)
	ping := func(ctx context.Context) error {
		// ForEachMaster reads the cluster's slots anew first, so a replica promoted since the
		// last ping is pinged as the master it now is.
		return client.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			if err := c.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("%s: %w", c.Options().Addr, err)
			}
			return nil
		})
	}
	return newRedis(ctx, client, keyspace{sharded: true}, strings.Join(co.Addrs, ","), ping, o)
}

// clusterOptions turns the seed URLs into the cluster client's options: their addresses, and the
// credentials and TLS they share.
func clusterOptions(urls []string) (*redis.ClusterOptions, error) {
	if len(urls) == 0 {
		return nil, errors.New("popup: redis cluster: at least one seed node URL is required")
	}
	co := &redis.ClusterOptions{}
	var first *redis.Options
	for i, u := range urls {
		ro, err := redis.ParseURL(u)
		if err != nil {
			return nil, fmt.Errorf("popup: redis cluster url %d: %w", i+1, err)
		}
		if ro.DB != 0 {
			return nil, fmt.Errorf("popup: redis cluster url %d: names database %d; a cluster has only database 0", i+1, ro.DB)
		}
		if first == nil {
			first = ro
		} else if ro.Username != first.Username || ro.Password != first.Password || (ro.TLSConfig == nil) != (first.TLSConfig == nil) {
			return nil, fmt.Errorf("popup: redis cluster url %d: every seed node URL must carry the same user, password and scheme", i+1)
		}
		co.Addrs = append(co.Addrs, ro.Addr)
	}
	co.Username, co.Password, co.TLSConfig = first.Username, first.Password, first.TLSConfig
	return co, nil
}

// ClusterChannel is the channel carrying an organization's popups for one location on a Redis
// Cluster: the organization is its hash tag, so that every channel and claim of the organization
// is in one slot.
func ClusterChannel(orgID, location string) string {
	return "callwire:{" + orgID + "}:popups:" + location
}

// ClusterCallbacksChannel is the channel carrying an organization's to-call-back notices on a
// Redis Cluster, in the slot of the organization's other channels.
func ClusterCallbacksChannel(orgID string) string {
	return "callwire:{" + orgID + "}:callbacks"
}

// ClusterClaimKey is the key that claims the ringing popupID of orgID on a Redis Cluster, in the
// slot of the organization's channels.
func ClusterClaimKey(orgID, popupID string) string {
	return "callwire:{" + orgID + "}:claim:" + popupID
}

// keyspace is how a Redis broker names its channels and claim keys, and which pub/sub carries
// them: the zero value is one server's (PUBLISH and SUBSCRIBE on the names of Channel,
// CallbacksChannel and ClaimKey, unchanged, so that brokers of several versions share one
// server), sharded a cluster's.
type keyspace struct {
	sharded bool
}

func (k keyspace) channel(org, location string) string {
	if k.sharded {
		return ClusterChannel(org, location)
	}
	return Channel(org, location)
}

func (k keyspace) callbacks(org string) string {
	if k.sharded {
		return ClusterCallbacksChannel(org)
	}
	return CallbacksChannel(org)
}

func (k keyspace) claim(org, id string) string {
	if k.sharded {
		return ClusterClaimKey(org, id)
	}
	return ClaimKey(org, id)
}

// checkOrg refuses an organization id whose names would not share a slot: one starting with
// '}' makes an empty hash tag, and Redis then hashes each whole name.
func (k keyspace) checkOrg(org string) error {
	if org == "" {
		return errors.New("organization is required")
	}
	if k.sharded && strings.HasPrefix(org, "}") {
		return fmt.Errorf("organization id %q cannot start with '}' on a redis cluster", org)
	}
	return nil
}

// publish is the command that publishes one message.
func (k keyspace) publish() string {
	if k.sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

func (k keyspace) publishCmd(ctx context.Context, c redis.UniversalClient, channel string, msg any) *redis.IntCmd {
	if k.sharded {
		return c.SPublish(ctx, channel, msg)
	}
	return c.Publish(ctx, channel, msg)
}

// pubSub returns a subscription of c not yet subscribed to anything. On a cluster, it is bound
// to the node serving the slot of the first channels it subscribes to. The broker ends a
// subscription whose connection is lost rather than letting go-redis reconnect it, which for a
// sharded subscription went to a random node before v9.20 (redis/go-redis#3806), and would hide
// the popups lost meanwhile in any case.
func (k keyspace) pubSub(ctx context.Context, c redis.UniversalClient) *redis.PubSub {
	if k.sharded {
		return c.SSubscribe(ctx)
	}
	return c.Subscribe(ctx)
}

// subscribe subscribes ps to channels with one command. On a cluster they must share a slot:
// go-redis's ClusterClient sends a PubSub's SSUBSCRIBE to the node of its first channel only
// (redis/go-redis#3133), a later SSUBSCRIBE on the same PubSub for another slot meets MOVED
// (#3099), and one SSUBSCRIBE naming several slots is refused with CROSSSLOT (#3581). So a
// subscription is one organization's, its channels hash-tagged into one slot.
func (k keyspace) subscribe(ctx context.Context, ps *redis.PubSub, channels []string) error {
	if k.sharded {
		return ps.SSubscribe(ctx, channels...)
	}
	return ps.Subscribe(ctx, channels...)
}

// subscribed is the kind of the message that confirms a subscription.
func (k keyspace) subscribed() string {
	if k.sharded {
		return "ssubscribe"
	}
	return "subscribe"
}
