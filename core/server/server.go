// Package server assembles a callwire server from its configuration: the store chosen by
// database.url (PostgreSQL) or the embedded default, key authentication, the write pipeline and
// the HTTP API.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/httpapi"
	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/core/store/sqlite"
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
		pg, err := postgres.Open(ctx, c.URL, postgres.Options{MaxConns: int32(c.MaxConns), AcquireTimeout: c.AcquireTimeout})
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
}

// Options are what New needs beyond the configuration. Store and Logger are required.
type Options struct {
	Store  store.Store
	Logger *slog.Logger
	// Lookup and Publisher are the caller lookup and popup broker; nil leaves callers unknown
	// and drops popups.
	Lookup    ingest.CallerLookup
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
	svc, err := ingest.New(ingest.Options{
		Writer:     o.Store,
		Lookup:     o.Lookup,
		Publisher:  o.Publisher,
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
	app, err := httpapi.New(httpapi.Options{
		Auth:           authn,
		Ingest:         svc,
		Ready:          o.Store.Ping,
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
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return &Server{app: app, store: o.Store, log: o.Logger, shutdown: c.Server.ShutdownTimeout}, nil
}

// Serve answers requests on ln until Shutdown. It returns nil after a clean shutdown.
func (s *Server) Serve(ln net.Listener) error {
	return s.app.Listener(ln)
}

// Shutdown stops taking connections and waits for in-flight requests, at most until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.app.ShutdownWithContext(ctx)
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
// production).
func NewLogger(c config.Log, w *os.File) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	format := c.Format
	if format == "auto" {
		format = "json"
		if fi, err := w.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
