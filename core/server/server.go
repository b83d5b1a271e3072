// Package server assembles a callwire server from its configuration: the store chosen by
// database.url (PostgreSQL) or the embedded default, key authentication, the caller lookup, the
// write pipeline and the HTTP API.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/history"
	"github.com/callwire/callwire/core/httpapi"
	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/lookup"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/retention"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/core/store/sqlite"
	apidoc "github.com/callwire/callwire/docs/api"
	"github.com/callwire/callwire/internal/logging"
)

// OpenStore opens the store the configuration names: PostgreSQL when URL is set, otherwise the
// embedded store at Path. With AutoMigrate it applies pending migrations first. The caller closes
// the store.
func OpenStore(ctx context.Context, c config.Database) (store.Store, error) {
	type migrator interface {
		store.Store
		Migrate(ctx context.Context) error
	}
	var st migrator
	if c.URL != "" {
		pg, err := postgres.Open(ctx, c.URL, postgres.Options{
			MaxConns: int32(c.MaxConns), AcquireTimeout: c.AcquireTimeout, ReadURL: c.ReadURL,
			ReadMaxLag: c.ReadMaxLag,
		})
		if err != nil {
			return nil, err
		}
		st = pg
	} else {
		lite, err := sqlite.Open(ctx, c.Path)
		if err != nil {
			return nil, err
		}
		st = lite
	}
	if c.AutoMigrate {
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// Migrate applies every pending migration to the configured store.
func Migrate(ctx context.Context, c config.Database) error {
	c.AutoMigrate = true
	st, err := OpenStore(ctx, c)
	if err != nil {
		return err
	}
	return st.Close()
}

// Server is a running-ready callwire HTTP server.
type Server struct {
	app      *fiber.App
	store    store.Store
	log      *slog.Logger
	shutdown time.Duration
	broker   popup.Broker
	// ownsBroker is whether New made the broker, and so Shutdown closes it.
	ownsBroker bool
	// stopStreams ends the open popup streams, which would otherwise hold Shutdown up.
	stopStreams context.CancelFunc
	// metrics are read by Shutdown to say what it waits for.
	metrics prometheus.Gatherer
	// sweeper removes the calls organizations no longer keep; Serve starts it under sweepCtx,
	// Shutdown ends it with stopSweep and waits for swept, which closes when it has returned.
	sweeper   *retention.Sweeper
	sweepCtx  context.Context
	stopSweep context.CancelFunc
	sweepOnce sync.Once
	swept     chan struct{}
}

// Options are what New needs beyond the configuration. Store and Logger are required.
type Options struct {
	Store  store.Store
	Logger *slog.Logger
	// Lookup is the caller lookup; nil means the HTTP lookup of core/lookup, which asks each
	// organization's own endpoint (store.Org.Lookup) under the configuration's lookup.* settings.
	Lookup ingest.CallerLookup
	// Broker carries popups to the workstations; nil means the one the configuration names:
	// Redis when broker.redis.url is set, otherwise the in-process broker. A broker made by New
	// is closed by Shutdown; one given here is the caller's to close.
	Broker popup.Broker
	// Publisher, when not nil, receives the pipeline's popups instead of Broker (tests record
	// them this way); Broker is still made and exposed.
	Publisher ingest.Publisher
	// Registry collects metrics; nil makes a fresh one.
	Registry *prometheus.Registry
	// Now is the server clock; nil means time.Now.
	Now func() time.Time
}

// New assembles the server. ctx is the parent of every request's context: cancel it only after
// Shutdown has returned.
func New(ctx context.Context, c config.Config, o Options) (*Server, error) {
	if o.Store == nil || o.Logger == nil {
		return nil, errors.New("server: a store and a logger are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	authn, err := auth.NewAuthenticator(o.Store, o.Now)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if o.Lookup == nil {
		l, err := lookup.New(lookup.Options{
			Orgs:            o.Store,
			Timeout:         c.Lookup.Timeout,
			CacheTTL:        c.Lookup.CacheTTL,
			MissTTL:         c.Lookup.MissTTL,
			CacheSize:       c.Lookup.CacheSize,
			BreakerFailures: c.Lookup.BreakerFailures,
			BreakerOpen:     c.Lookup.BreakerOpen,
			Logger:          o.Logger,
			Registerer:      reg,
			Now:             o.Now,
		})
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		o.Lookup = l
	}
	broker, owned := o.Broker, false
	if broker == nil {
		b, err := OpenBroker(ctx, c, o.Logger, reg)
		if err != nil {
			return nil, err
		}
		broker, owned = b, true
	}
	built := false
	defer func() {
		if owned && !built {
			broker.Close()
		}
	}()
	publisher := o.Publisher
	if publisher == nil {
		publisher = broker
	}
	svc, err := ingest.New(ingest.Options{
		Writer:     o.Store,
		Lookup:     o.Lookup,
		Publisher:  publisher,
		Notifier:   broker,
		Logger:     o.Logger,
		Registerer: reg,
		// Each lookup is bounded by its organization's timeout; this is only the outer cap.
		LookupTimeout:  10 * time.Second,
		PublishTimeout: c.Ingest.PublishTimeout,
		WriteTimeout:   c.Ingest.WriteTimeout,
		Now:            o.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	streams, stopStreams := context.WithCancel(ctx)
	defer func() {
		if !built {
			stopStreams()
		}
	}()
	// A broker that can be down (Redis) is named in /readyz and gates the popup stream.
	health, _ := broker.(httpapi.BrokerHealth)
	// A store's replica is named in /readyz; its reads fall back to the primary.
	var replica func(context.Context) error
	if r, ok := o.Store.(replicaStore); ok && r.HasReplica() {
		replica = r.PingReplica
		fallbacks := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "callwire_store_replica_fallbacks_total",
			Help: "Reads of the read replica's list served by the primary because the replica could not.",
		}, func() float64 { return float64(r.ReplicaFallbacks()) })
		lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "callwire_store_replica_lag_seconds",
			Help: "How far the read replica's replay is behind the primary, as last measured (database.read_max_lag); -1 while not measured.",
		}, func() float64 {
			if d, ok := r.ReplicaLag(); ok {
				return d.Seconds()
			}
			return -1
		})
		for _, c := range []prometheus.Collector{fallbacks, lag} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("server: %w", err)
			}
		}
	}
	hist, err := history.New(o.Store)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	replay, err := ingest.NewReplay(o.Store, 0, 0, o.Now)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	app, err := httpapi.New(httpapi.Options{
		Auth:           authn,
		Ingest:         svc,
		Ready:          o.Store.Ping,
		Broker:         health,
		Replica:        replica,
		BaseContext:    ctx,
		Logger:         o.Logger,
		Registerer:     reg,
		Gatherer:       reg,
		BodyLimit:      c.Server.BodyLimit,
		RequestTimeout: c.Server.WriteTimeout,
		ReadTimeout:    c.Server.ReadTimeout,
		WriteTimeout:   c.Server.WriteTimeout,
		IdleTimeout:    c.Server.IdleTimeout,
		RetryAfter:     c.Server.RetryAfter,
		Popups:         broker,
		Ringing:        replay,
		History:        hist,
		Notices:        broker,
		NoticeTimeout:  c.Ingest.PublishTimeout,
		OpenAPI:        apidoc.OpenAPI(),
		Heartbeat:      c.Popups.Heartbeat,
		StreamContext:  streams,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	sweeper, err := retention.New(retention.Options{
		Store:      o.Store,
		Interval:   c.Retention.Interval,
		BatchSize:  c.Retention.BatchSize,
		BatchPause: c.Retention.BatchPause,
		MaxBatches: c.Retention.MaxBatches,
		Logger:     o.Logger,
		Registerer: reg,
		Now:        o.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	sweepCtx, stopSweep := context.WithCancel(ctx)
	built = true
	return &Server{app: app, store: o.Store, log: o.Logger, shutdown: c.Server.ShutdownTimeout,
		broker: broker, ownsBroker: owned, stopStreams: stopStreams, metrics: reg,
		sweeper: sweeper, sweepCtx: sweepCtx, stopSweep: stopSweep, swept: make(chan struct{})}, nil
}

// OpenBroker makes the popup broker the configuration names: Redis at broker.redis.url when it
// is set, or the Redis Cluster of broker.redis.cluster_urls when those are, with every Redis
// wait bounded by ingest.publish_timeout; otherwise the in-process broker, which reaches only
// the workstations connected to this process. Its metrics go to reg
// (nil registers nothing); log receives its warnings. It fails when broker.redis.url is unusable,
// not when Redis is down: popups are best effort, so the server starts with the broker down
// (popups missed, /readyz naming it degraded) and the broker goes up by itself once Redis
// answers. The caller closes the broker.
func OpenBroker(ctx context.Context, c config.Config, log *slog.Logger, reg prometheus.Registerer) (popup.Broker, error) {
	o := popup.RedisOptions{
		Registerer:   reg,
		Logger:       log,
		ReadTimeout:  c.Ingest.PublishTimeout,
		WriteTimeout: c.Ingest.PublishTimeout,
	}
	var (
		r   *popup.Redis
		err error
	)
	switch {
	case len(c.Broker.Redis.ClusterURLs) > 0:
		r, err = popup.NewRedisCluster(ctx, c.Broker.Redis.ClusterURLs, o)
	case c.Broker.Redis.URL != "":
		r, err = popup.NewRedis(ctx, c.Broker.Redis.URL, o)
	default:
		return popup.NewMemory(popup.MemoryOptions{Registerer: reg}), nil
	}
	if err != nil {
		return nil, fmt.Errorf("server: popup broker: %w", err)
	}
	return r, nil
}

// Broker is the server's popup broker: what its pipeline publishes to (unless Options.Publisher
// replaced it) and what workstations' streams subscribe to.
func (s *Server) Broker() popup.Broker {
	return s.broker
}

// Serve answers requests on ln until Shutdown, and runs the retention sweeper (see
// core/retention) beside them: its first sweep at once, then one every retention.interval. It
// returns nil after a clean shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.sweepOnce.Do(func() {
		go func() {
			defer close(s.swept)
			s.sweeper.Run(s.sweepCtx)
		}()
	})
	return s.app.Listener(ln)
}

// Shutdown ends the open popup streams (workstations reconnect, to another replica when there
// is one), stops taking connections and waits for in-flight requests, at most until ctx ends,
// then closes the popup broker if New made it (its subscriptions end). It ends the retention
// sweeper first, which rolls back a batch in progress, and waits for it, at most until ctx ends.
//
// It logs a line as it starts, saying what it is about to wait for (requests in flight, popup
// streams open, connections open), and one when it is done, saying how long it took, whether
// it waited in vain for some connections and what became of the broker.
func (s *Server) Shutdown(ctx context.Context) error {
	start := time.Now()
	requests := s.gauge("callwire_http_requests_in_flight")
	streams := s.gauge("callwire_popup_streams_open")
	conns := s.app.Server().GetOpenConnectionsCount()
	begin := []any{"requests_in_flight", requests, "popup_streams", streams, "open_connections", conns}
	if dl, ok := ctx.Deadline(); ok {
		begin = append(begin, "timeout", time.Until(dl).Round(time.Millisecond).String())
	}
	s.log.Info("shutting down: ending popup streams, waiting for requests in flight", begin...)

	s.stopStreams()
	s.stopSweep()
	// A sweeper that Serve never started is never waited for.
	s.sweepOnce.Do(func() { close(s.swept) })
	select {
	case <-s.swept:
	case <-ctx.Done():
	}
	err := s.app.ShutdownWithContext(ctx)
	done := []any{"duration_ms", time.Since(start).Milliseconds(), "waited_for_requests", requests, "popup_streams_ended", streams}
	if err != nil {
		done = append(done, "connections_left", s.app.Server().GetOpenConnectionsCount())
	}
	broker := "left open: it is not the server's"
	if s.ownsBroker {
		broker = "closed"
		if cerr := s.broker.Close(); cerr != nil {
			broker = "close failed"
			err = errors.Join(err, fmt.Errorf("server: close popup broker: %w", cerr))
		}
	}
	done = append(done, "broker", broker)
	if err != nil {
		s.log.Warn("shut down, not cleanly", append(done, "error", err)...)
		return err
	}
	s.log.Info("shut down", done...)
	return nil
}

// gauge reads one of the server's own gauges; -1 when it is not registered.
func (s *Server) gauge(name string) int {
	mfs, err := s.metrics.Gather()
	if err != nil {
		return -1
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return -1
}

// Run listens on addr and serves until ctx is cancelled, then shuts down gracefully within the
// configured shutdown timeout. ready, if not nil, receives the bound address once listening.
func (s *Server) Run(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: listen: %w", err)
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdown)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		return fmt.Errorf("server: shutdown: %w", err)
	}
	return <-errc
}

// NewLogger returns the slog logger the configuration asks for, writing to w (os.Stderr in
// production). The agent's logger is built alike (internal/logging).
func NewLogger(c config.Log, w *os.File) *slog.Logger {
	return logging.New(w, c.Level, c.Format)
}

// ApplyMemoryLimit sets the process's soft memory limit so that the memory the runtime manages,
// with the page caches st keeps outside the runtime (the embedded store's), stays within
// c.MemoryLimit: the runtime gets c.MemoryLimit less st's cache budget, but never less than half
// of c.MemoryLimit. It sets nothing when c.MemoryLimit is 0 or the GOMEMLIMIT variable (read
// through getenv) is set, which the runtime has applied already. It returns the runtime's limit in
// force afterwards (math.MaxInt64 for none). It changes the whole process: only a program's main
// calls it, before serving.
func ApplyMemoryLimit(c config.Server, st store.Store, getenv func(string) string) int64 {
	if c.MemoryLimit > 0 && getenv("GOMEMLIMIT") == "" {
		limit := c.MemoryLimit
		if cs, ok := st.(cacheBudgeter); ok {
			limit = max(c.MemoryLimit-cs.CacheBudget(), c.MemoryLimit/2)
		}
		debug.SetMemoryLimit(limit)
	}
	return debug.SetMemoryLimit(-1)
}

// replicaStore is a store that may serve some reads from a replica of its database
// (postgres.Store with a read URL).
type replicaStore interface {
	// HasReplica reports whether the store has a replica.
	HasReplica() bool
	// PingReplica reports whether the replica answers now.
	PingReplica(ctx context.Context) error
	// ReplicaFallbacks counts the reads the primary served because the replica could not.
	ReplicaFallbacks() int64
	// ReplicaLag is the replica's replay lag as last measured, false while not measured.
	ReplicaLag() (time.Duration, bool)
}

// cacheBudgeter is a store that keeps memory outside the Go runtime: the embedded store's page
// caches.
type cacheBudgeter interface {
	// CacheBudget returns the most memory, in bytes, the store keeps outside the runtime.
	CacheBudget() int64
}
