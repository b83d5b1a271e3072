package popup

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisOptions configure a Redis broker. Zero values take the documented defaults.
type RedisOptions struct {
	// Buffer is how many popups each subscription holds for its reader; past it, new popups for
	// that subscription are dropped and counted. Default DefaultBuffer.
	Buffer int
	// Registerer receives the broker's metrics (callwire_broker_popups_total and
	// callwire_broker_subscriptions, labelled broker="redis"); nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives the broker's warnings (malformed messages, lost subscriptions); nil
	// discards them.
	Logger *slog.Logger
	// DialTimeout bounds opening a connection to Redis. Default 1s.
	DialTimeout time.Duration
	// ReadTimeout and WriteTimeout bound one command's reply and its sending when the caller's
	// context has no earlier deadline. Default 500ms each: a Redis that accepts connections but
	// never answers cannot hold a request longer than that.
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// SubscribeTimeout bounds waiting for Redis to confirm a subscription. Default 2s.
	SubscribeTimeout time.Duration
	// HealthInterval is how long a subscription waits in silence before it pings Redis; a ping
	// unanswered for as long again ends the subscription. It is also how often the broker pings
	// Redis while Redis is up. Default 5s.
	HealthInterval time.Duration
	// ClaimTTL is how long a published ringing stays claimed (the key ClaimKey(org, id)), so
	// that a copy of it published through any broker on the same Redis server and database
	// meanwhile is a repeat. Default DefaultClaimTTL.
	ClaimTTL time.Duration
	// RetryInterval is the longest wait between two pings while Redis is down: they start 100ms
	// apart and the wait doubles up to it. Default 2s.
	RetryInterval time.Duration
}

// ErrDown is what Publish and Subscribe return at once, without asking Redis, while the broker
// knows Redis to be down (see Redis.Up).
var ErrDown = errors.New("popup: redis is down")

// firstRetry is the wait before the first ping after Redis was found down.
const firstRetry = 100 * time.Millisecond

// Redis is the broker shared by every replica: Publish sends the popup with PUBLISH on
// Channel(org, location) for each of its locations, and a subscription listens on its
// organization's location channels, so a popup published through one process reaches the
// workstations connected to any process on the same Redis. On a Redis Cluster (NewRedisCluster)
// the same is done with sharded pub/sub on the channels of ClusterChannel. It is safe for
// concurrent use.
//
// Delivery is Redis pub/sub: at most once, no replay. A subscription whose connection is lost,
// or whose Redis stops answering, ends with Err set; it does not reconnect by itself, since the
// popups published meanwhile are gone and the workstation should know.
//
// The broker itself outlives an outage: it tracks whether Redis is up (Up, and the gauge
// callwire_broker_up{broker="redis"}) from a ping every health interval, pings with backoff while
// Redis is down, and from the outcome of each publish. While Redis is down, Publish and Subscribe
// fail at once with ErrDown; once a ping is answered again they go to Redis again, on fresh
// connections. On a cluster the same holds per shard (see NewRedisCluster and ShardsDown).
type Redis struct {
	// client is a *redis.Client on one server, or a *redis.ClusterClient (see NewRedisCluster).
	client redis.UniversalClient
	names  keyspace
	addr   string
	// pingAll asks Redis for a PONG: the one server, or every master of the cluster (then it
	// also records which shards are down, see pingShards).
	pingAll func(ctx context.Context) error
	// shards is the per-shard health of a cluster broker; nil on one server.
	shards  *shardHealth
	opts    RedisOptions
	log     *slog.Logger
	metrics brokerMetrics
	// publishOnce is the script that claims a ringing and publishes it. Each publish claims
	// with a token of its own, tokenPrefix (random, this broker's) and a count.
	publishOnce *redis.Script
	tokenPrefix string
	tokens      atomic.Uint64
	upGauge     prometheus.Gauge

	up         atomic.Bool
	stateMu    sync.Mutex    // orders changes of up with the gauge and the log
	kick       chan struct{} // asks the health loop for a ping now
	stopHealth context.CancelFunc
	healthDone chan struct{}

	mu     sync.Mutex
	closed bool
	subs   map[*redisSub]struct{}
}

// NewRedis makes a broker on the Redis server at url (redis://, rediss:// or unix://, as parsed
// by go-redis's ParseURL) and pings it once, within ctx and the dial and read timeouts, to learn
// whether it is up. A server that does not answer is not an error: the broker starts down, logs a
// warning, and goes up by itself when a later ping is answered. It fails when the URL is unusable
// or when the metrics cannot be registered. The caller closes the broker, which stops its pings.
func NewRedis(ctx context.Context, url string, o RedisOptions) (*Redis, error) {
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("popup: redis url: %w", err)
	}
	o = o.withDefaults()
	o.setClient(clientFields{&ro.DialTimeout, &ro.ReadTimeout, &ro.WriteTimeout, &ro.PoolTimeout,
		&ro.MaxRetries, &ro.ContextTimeoutEnabled, &ro.DisableIdentity, &ro.MaintNotificationsConfig})
	client := redis.NewClient(ro)
	return newRedis(ctx, client, keyspace{}, ro.Addr, func(ctx context.Context) error { return client.Ping(ctx).Err() }, o)
}

// clientFields points at the go-redis client options that setClient sets, in a redis.Options or
// a redis.ClusterOptions (which name them alike), so that the one-server and the cluster broker
// set them in one place.
type clientFields struct {
	dialTimeout, readTimeout, writeTimeout, poolTimeout *time.Duration
	maxRetries                                          *int
	contextTimeoutEnabled, disableIdentity              *bool
	maintNotifications                                  **maintnotifications.Config
}

// setClient sets the client options f points at from o, which has its defaults.
func (o RedisOptions) setClient(f clientFields) {
	*f.dialTimeout = o.DialTimeout
	*f.readTimeout = o.ReadTimeout
	*f.writeTimeout = o.WriteTimeout
	*f.poolTimeout = o.ReadTimeout
	// One retry replaces a pooled connection that died while idle (a Redis restart); more would
	// only stretch a failure.
	*f.maxRetries = 1
	// The caller's deadline (the publish timeout) bounds every network wait, not only the
	// client's own timeouts.
	*f.contextTimeoutEnabled = true
	// No extra handshake round trips: less for a hanging server to hold up.
	*f.disableIdentity = true
	*f.maintNotifications = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// withDefaults returns o with its zero values replaced by the documented defaults.
func (o RedisOptions) withDefaults() RedisOptions {
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = time.Second
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 500 * time.Millisecond
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 500 * time.Millisecond
	}
	if o.SubscribeTimeout <= 0 {
		o.SubscribeTimeout = 2 * time.Second
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = 5 * time.Second
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 2 * time.Second
	}
	return o
}

// newRedis makes the broker on client, whose channels and claim keys names gives, addr naming
// it in logs and ping asking it for a PONG, and pings it once. On an error it closes client.
func newRedis(ctx context.Context, client redis.UniversalClient, names keyspace, addr string, ping func(context.Context) error, o RedisOptions) (*Redis, error) {
	m, err := newBrokerMetrics("redis", o.Registerer)
	if err != nil {
		client.Close()
		return nil, err
	}
	upGauge, err := newUpGauge("redis", o.Registerer)
	if err != nil {
		client.Close()
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Redis{client: client, names: names, addr: addr, pingAll: ping, opts: o, log: log, metrics: m, upGauge: upGauge,
		publishOnce: redis.NewScript(publishOnceLua(names.publish())), tokenPrefix: rand.Text() + ":",
		kick: make(chan struct{}, 1), healthDone: make(chan struct{}), subs: map[*redisSub]struct{}{}}
	if cc, ok := client.(*redis.ClusterClient); ok {
		g, err := newShardsDownGauge("redis", o.Registerer)
		if err != nil {
			client.Close()
			return nil, err
		}
		g.Set(0)
		r.shards = &shardHealth{client: cc, gauge: g, down: map[string]error{}}
		r.pingAll = r.pingShards
	}
	if err := r.ping(ctx); err != nil {
		upGauge.Set(0)
		r.log.Warn("redis does not answer; popups are missed until it does", "component", "popup", "addr", r.addr, "error", err)
	} else {
		r.up.Store(true)
		upGauge.Set(1)
	}
	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stopHealth = stop
	go r.health(hctx)
	return r, nil
}

// newUpGauge makes the gauge callwire_broker_up labelled broker=kind and registers it with reg
// (nil registers nothing); one registered already is shared.
func newUpGauge(kind string, reg prometheus.Registerer) (prometheus.Gauge, error) {
	return sharedGauge(reg, prometheus.GaugeOpts{
		Name:        "callwire_broker_up",
		Help:        "Whether the popup broker answers: 1 up, 0 down (popups are missed and the popup stream answers 503).",
		ConstLabels: prometheus.Labels{"broker": kind},
	})
}

// sharedGauge makes the gauge of opts and registers it with reg (nil registers nothing); when
// reg has it already, from another broker of the process, that one is returned and shared.
func sharedGauge(reg prometheus.Registerer, opts prometheus.GaugeOpts) (prometheus.Gauge, error) {
	g := prometheus.NewGauge(opts)
	if reg == nil {
		return g, nil
	}
	if err := reg.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("popup: register metrics: %w", err)
		}
		existing, ok := are.ExistingCollector.(prometheus.Gauge)
		if !ok {
			return nil, fmt.Errorf("popup: register metrics: %w", err)
		}
		g = existing
	}
	return g, nil
}

// Up reports whether Redis answered the broker's last ping or publish. While it is false,
// Publish and Subscribe fail at once with ErrDown. On a cluster it reports whether at least one
// master answered the last ping or publish; the shards down meanwhile are counted by ShardsDown.
func (r *Redis) Up() bool {
	return r.up.Load()
}

// ping asks Redis for a PONG, bounded by ctx and the dial and read timeouts.
func (r *Redis) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, r.opts.DialTimeout+r.opts.ReadTimeout)
	defer cancel()
	if err := r.pingAll(pctx); err != nil {
		return fmt.Errorf("popup: ping redis %s: %w", r.addr, err)
	}
	return nil
}

// setUp records whether Redis is up, and on a change sets the gauge and logs it.
func (r *Redis) setUp(up bool, err error) {
	if r.up.Load() == up {
		return // the common case, without the lock
	}
	r.stateMu.Lock()
	defer r.stateMu.Unlock()
	if r.up.Load() == up {
		return
	}
	r.up.Store(up)
	if up {
		r.upGauge.Set(1)
		r.log.Info("redis answers again; popups are published", "component", "popup", "addr", r.addr)
		return
	}
	r.upGauge.Set(0)
	r.log.Warn("redis is down; popups are missed until it answers", "component", "popup", "addr", r.addr, "error", err)
}

// down marks Redis down after a failure of its own and asks the health loop to ping at once, so
// that a blip costs no more than the popups that met it.
func (r *Redis) down(err error) {
	r.setUp(false, err)
	r.kickHealth()
}

// kickHealth asks the health loop to ping at once.
func (r *Redis) kickHealth() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// health pings Redis every health interval while it is up, and with backoff (from firstRetry
// doubling to the retry interval) while it, or on a cluster one of its shards, is down, until ctx
// ends. A kick pings at once.
func (r *Redis) health(ctx context.Context) {
	defer close(r.healthDone)
	retry := firstRetry
	next := func() time.Duration {
		if r.up.Load() && r.ShardsDown() == 0 {
			retry = firstRetry
			return r.opts.HealthInterval
		}
		d := retry
		retry = min(2*retry, r.opts.RetryInterval)
		return min(d, r.opts.RetryInterval)
	}
	t := time.NewTimer(next())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
		err := r.ping(ctx)
		if ctx.Err() != nil {
			return
		}
		r.setUp(err == nil, err)
		t.Reset(next())
	}
}

// Publish claims the ringing p.ID of p.OrgID for the claim TTL and, when the claim is new, sends
// p as JSON on Channel(p.OrgID, l) for each location l of p: one script, one round trip. When the
// ringing is claimed already (by this broker or any other on the same Redis server and database),
// it sends nothing and returns ErrRepeat. It returns once Redis has taken the popup, or with an
// error when ctx ends first, when Redis fails or does not answer, when p has no organization, no
// id or no location, or when the broker is closed; at once with ErrDown while Redis is known to be
// down. When ctx has no deadline, the read and write timeouts together bound the whole call.
//
// A publish that fails before Redis ran the script claims nothing, so a retry can publish. One
// whose reply was lost may have published and claimed; a retry is then a repeat.
func (r *Redis) Publish(ctx context.Context, p Popup) error {
	if err := ctx.Err(); err != nil {
		r.metrics.failed.Inc()
		return fmt.Errorf("popup: publish: %w", err)
	}
	if err := validate(p); err != nil {
		r.metrics.failed.Inc()
		return err
	}
	if err := r.names.checkOrg(p.OrgID); err != nil {
		r.metrics.failed.Inc()
		return fmt.Errorf("popup: publish: %w", err)
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		r.metrics.failed.Inc()
		return ErrClosed
	}
	shard, err := r.available(ctx, p.OrgID)
	if err != nil {
		r.metrics.failed.Inc()
		return fmt.Errorf("popup: publish: %w", err)
	}
	data, err := json.Marshal(p)
	if err != nil {
		r.metrics.failed.Inc()
		return fmt.Errorf("popup: publish: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.ReadTimeout+r.opts.WriteTimeout)
		defer cancel()
	}
	published, err := r.claimAndPublish(ctx, p, data, r.tokenPrefix+strconv.FormatUint(r.tokens.Add(1), 36))
	if err != nil {
		r.metrics.failed.Inc()
		// A caller that gave up is no sign of Redis's health; a deadline that Redis let pass is.
		if !errors.Is(ctx.Err(), context.Canceled) {
			r.failed(shard, err)
		}
		return err
	}
	r.answered(shard) // Redis answered, whatever the answer
	if !published {
		r.metrics.repeat.Inc()
		return ErrRepeat
	}
	r.metrics.published.Inc()
	return nil
}

// notice is the message on an organization's to-call-back channel: the organization, nothing
// else.
type notice struct {
	OrgID string `json:"orgId"`
}

// NotifyCallbacks sends a to-call-back notice on CallbacksChannel(orgID), which every
// subscription of the organization listens on: one PUBLISH, one round trip. It returns once
// Redis has taken it, or with an error when ctx ends first, when Redis fails or does not answer,
// when orgID is empty, or when the broker is closed; at once with ErrDown while Redis is known
// to be down. When ctx has no deadline, the read and write timeouts together bound the call.
func (r *Redis) NotifyCallbacks(ctx context.Context, orgID string) error {
	if err := ctx.Err(); err != nil {
		r.metrics.noticesFailed.Inc()
		return fmt.Errorf("popup: notify: %w", err)
	}
	if err := r.names.checkOrg(orgID); err != nil {
		r.metrics.noticesFailed.Inc()
		return fmt.Errorf("popup: notify: %w", err)
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		r.metrics.noticesFailed.Inc()
		return ErrClosed
	}
	shard, err := r.available(ctx, orgID)
	if err != nil {
		r.metrics.noticesFailed.Inc()
		return fmt.Errorf("popup: notify: %w", err)
	}
	data, err := json.Marshal(notice{OrgID: orgID})
	if err != nil {
		r.metrics.noticesFailed.Inc()
		return fmt.Errorf("popup: notify: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.ReadTimeout+r.opts.WriteTimeout)
		defer cancel()
	}
	if err := r.names.publishCmd(ctx, r.client, r.names.callbacks(orgID), data).Err(); err != nil {
		r.metrics.noticesFailed.Inc()
		if !errors.Is(ctx.Err(), context.Canceled) {
			r.failed(shard, err)
		}
		return fmt.Errorf("popup: notify on redis: %w", err)
	}
	r.answered(shard)
	r.metrics.noticesPublished.Inc()
	return nil
}

// Subscribe listens on orgID's channels for locations and returns once Redis has confirmed every
// one, so that popups published after it returns are delivered. It fails when ctx ends, when
// orgID or locations are empty, when the broker is closed, at once with ErrDown while Redis is
// known to be down, or when Redis does not confirm within the subscribe timeout. The subscription ends when it is closed (Err nil), when ctx ends (Err is
// ctx's error), when the broker is closed (Err is ErrClosed), or when the connection is lost or
// Redis stops answering its pings (Err says why).
func (r *Redis) Subscribe(ctx context.Context, orgID string, locations []string) (Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("popup: subscribe: %w", err)
	}
	locs, err := subscribedLocations(orgID, locations)
	if err != nil {
		return nil, err
	}
	if err := r.names.checkOrg(orgID); err != nil {
		return nil, fmt.Errorf("popup: subscribe: %w", err)
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	shard, err := r.available(ctx, orgID)
	if err != nil {
		return nil, fmt.Errorf("popup: subscribe: %w", err)
	}
	channels := make([]string, len(locs), len(locs)+1)
	for i, l := range locs {
		channels[i] = r.names.channel(orgID, l)
	}
	channels = append(channels, r.names.callbacks(orgID))
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &redisSub{
		r: r, org: orgID, shard: shard, locations: locs, feed: newFeed(r.opts.Buffer),
		ps: r.names.pubSub(loopCtx, r.client), cancel: cancel, done: make(chan struct{}),
		copies: map[string]int{},
	}
	early, err := s.confirm(ctx, channels)
	if _, moved := redis.IsMovedError(errors.Unwrap(err)); moved && r.names.sharded {
		// The slot has moved since the cluster client last read the slots, and go-redis does
		// not follow MOVED for a subscription (redis/go-redis#3099): read them again (the
		// cluster's ping does) and subscribe once more, on the slot's new master.
		s.ps.Close()
		if perr := r.ping(ctx); perr == nil {
			if s.shard, err = r.available(ctx, orgID); err == nil {
				s.ps = r.names.pubSub(loopCtx, r.client)
				early, err = s.confirm(ctx, channels)
			} else {
				err = fmt.Errorf("popup: subscribe: %w", err)
			}
		}
	}
	if err != nil {
		s.ps.Close()
		cancel()
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		s.ps.Close()
		cancel()
		return nil, ErrClosed
	}
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	r.metrics.subscriptions.Inc()
	for _, msg := range early {
		s.handle(msg)
	}
	go s.loop(loopCtx)
	s.watch(ctx, func(err error) { s.finish(err) })
	// A shard marked down since available asked ended the subscriptions it knew of; this one
	// was not among them yet.
	if r.shardDown(s.shard) {
		s.finish(fmt.Errorf("popup: redis shard %s: %w", s.shard, ErrDown))
	}
	return s, nil
}

// Close ends every subscription (their Err is ErrClosed), waits for their listeners and the
// broker's pings to stop, and closes the connections to Redis. Later Publish and Subscribe calls fail with ErrClosed. It is
// safe to call more than once.
func (r *Redis) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	subs := make([]*redisSub, 0, len(r.subs))
	for s := range r.subs {
		subs = append(subs, s)
	}
	r.mu.Unlock()
	for _, s := range subs {
		s.finish(ErrClosed)
		<-s.done
	}
	r.stopHealth()
	<-r.healthDone
	if err := r.client.Close(); err != nil {
		return fmt.Errorf("popup: close redis: %w", err)
	}
	return nil
}

// redisSub is one subscription on a Redis broker.
type redisSub struct {
	r   *Redis
	org string
	// shard is the master serving org's slot when the subscription was made, on a cluster;
	// "" on one server.
	shard     string
	locations []string
	feed      *feed
	ps        *redis.PubSub
	cancel    context.CancelFunc
	done      chan struct{} // closed when loop returns

	// copies counts, per publish of a popup naming several of the subscribed locations, the
	// copies still to come on the other channels; order keeps the keys oldest first.
	copies map[string]int
	order  []string

	ctxWatch
}

// maxPending bounds the publishes a subscription remembers while their other copies arrive.
const maxPending = 1024

// confirm sends SUBSCRIBE and waits for Redis to confirm every channel. Messages that arrive
// meanwhile are returned to be delivered first.
func (s *redisSub) confirm(ctx context.Context, channels []string) ([]*redis.Message, error) {
	cctx, cancel := context.WithTimeout(ctx, s.r.opts.SubscribeTimeout)
	defer cancel()
	if err := s.r.names.subscribe(cctx, s.ps, channels); err != nil {
		return nil, fmt.Errorf("popup: subscribe on redis: %w", err)
	}
	pending := map[string]bool{}
	for _, c := range channels {
		pending[c] = true
	}
	var early []*redis.Message
	for len(pending) > 0 {
		msg, err := s.ps.ReceiveTimeout(cctx, s.r.opts.SubscribeTimeout)
		if err != nil {
			return nil, fmt.Errorf("popup: subscribe on redis: %w", err)
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == s.r.names.subscribed() {
				delete(pending, m.Channel)
			}
		case *redis.Message:
			early = append(early, m)
		}
	}
	return early, nil
}

// loop reads the subscription's connection until it ends, pinging Redis when it has been quiet
// for the health interval.
func (s *redisSub) loop(ctx context.Context) {
	defer close(s.done)
	interval := s.r.opts.HealthInterval
	pinged := false
	for {
		msg, err := s.ps.ReceiveTimeout(ctx, interval)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
				if pinged {
					s.fail(fmt.Errorf("popup: redis did not answer a ping within %v", interval))
					return
				}
				if err := s.ps.Ping(ctx); err != nil {
					s.fail(fmt.Errorf("popup: ping redis: %w", err))
					return
				}
				pinged = true
				continue
			}
			s.fail(fmt.Errorf("popup: redis subscription lost: %w", err))
			return
		}
		pinged = false
		switch m := msg.(type) {
		case *redis.Message:
			s.handle(m)
		case *redis.Subscription:
			// Redis itself ends sharded subscriptions whose slot moved to another shard (a
			// slot migration, or on some versions a failover) with SUNSUBSCRIBE; a
			// subscription that went on would hear nothing more, silently.
			// Redis answers, so the broker stays up.
			if m.Kind == "unsubscribe" || m.Kind == "sunsubscribe" {
				err := fmt.Errorf("popup: redis ended the subscription to %s (%s)", m.Channel, m.Kind)
				if s.finish(err) {
					s.r.log.Warn("popup subscription ended; the workstation must subscribe again", "error", err, "org_id", s.org)
				}
				return
			}
		}
	}
}

// fail ends the subscription for a broker-side reason, unless it has ended already.
func (s *redisSub) fail(err error) {
	if s.finish(err) {
		s.r.failed(s.shard, err)
		s.r.log.Warn("popup subscription ended; the workstation must subscribe again", "error", err, "org_id", s.org)
	}
}

// handle decodes one message and queues it, once per publish.
func (s *redisSub) handle(m *redis.Message) {
	if m.Channel == s.r.names.callbacks(s.org) {
		var n notice
		if err := json.Unmarshal([]byte(m.Payload), &n); err != nil || n.OrgID != s.org {
			s.r.metrics.malformed.Inc()
			s.r.log.Warn("malformed to-call-back notice dropped", "channel", m.Channel, "error", err)
			return
		}
		s.feed.notify()
		return
	}
	var p Popup
	if err := json.Unmarshal([]byte(m.Payload), &p); err != nil || p.OrgID != s.org || p.ID == "" {
		s.r.metrics.malformed.Inc()
		s.r.log.Warn("malformed popup message dropped", "channel", m.Channel, "error", err)
		return
	}
	if n := s.covered(p.Locations); n > 1 {
		key := p.ID + "|" + strconv.FormatInt(p.PublishedAt.UnixNano(), 10)
		if left, ok := s.copies[key]; ok {
			if left <= 1 {
				delete(s.copies, key)
			} else {
				s.copies[key] = left - 1
			}
			return
		}
		s.copies[key] = n - 1
		s.order = append(s.order, key)
		for len(s.order) > maxPending {
			delete(s.copies, s.order[0])
			s.order = s.order[1:]
		}
		if len(s.order) > 2*len(s.copies)+maxPending/4 {
			s.compact()
		}
	}
	switch s.feed.send(p) {
	case sent:
		s.r.metrics.delivered.Inc()
	case dropped:
		s.r.metrics.dropped.Inc()
	}
}

// compact forgets the keys of publishes whose copies have all arrived.
func (s *redisSub) compact() {
	kept := s.order[:0]
	for _, k := range s.order {
		if _, ok := s.copies[k]; ok {
			kept = append(kept, k)
		}
	}
	s.order = kept
}

// covered counts the distinct subscribed locations among ls: the copies of one publish this
// subscription receives.
func (s *redisSub) covered(ls []string) int {
	n := 0
	for _, l := range UniqueLocations(ls) {
		for _, mine := range s.locations {
			if l == mine {
				n++
				break
			}
		}
	}
	return n
}

// finish ends the subscription with err as its reason and reports whether this call ended it.
// It does not wait for the listener to stop.
func (s *redisSub) finish(err error) bool {
	if !s.markFinished() {
		return false
	}
	s.feed.end(err)
	s.cancel()
	s.ps.Close() // unblocks the listener's read
	s.r.mu.Lock()
	delete(s.r.subs, s)
	s.r.mu.Unlock()
	s.r.metrics.subscriptions.Dec()
	return true
}

// Popups implements Subscription.
func (s *redisSub) Popups() <-chan Popup { return s.feed.ch }

// Callbacks implements Subscription.
func (s *redisSub) Callbacks() <-chan struct{} { return s.feed.notices }

// Err implements Subscription.
func (s *redisSub) Err() error { return s.feed.reason() }

// Close implements Subscription; it returns once the listener has stopped.
func (s *redisSub) Close() error {
	s.finish(nil)
	<-s.done
	return nil
}
