package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/callwire/callwire/internal/logging"
	"github.com/callwire/callwire/plugins"
	"github.com/callwire/callwire/sdk"
	"github.com/callwire/callwire/sdk/outbox"
)

// DefaultGiveUpAfter is how many runs in a row of one translator may each end within a minute of
// its launch before Run takes it to keep failing and ends (plugins.HostOptions.GiveUpAfter).
const DefaultGiveUpAfter = 5

// RunOptions adjust Run. The zero value is ready to use.
type RunOptions struct {
	// Logger receives the agent's log and its translators'. Default: NewLogger(c.Log, os.Stderr).
	Logger *slog.Logger
	// Registry receives the metrics served at /metrics. Default: a new registry with the Go and
	// process collectors.
	Registry *prometheus.Registry
	// OnReady, when set, is called once the outbox is open, the metrics listener is up (addr is
	// nil when metrics.listen is empty) and the translators are starting.
	OnReady func(metricsAddr net.Addr)
	// Host adjusts the translator host's options before it is created (for example shorter
	// restart backoffs in tests). Translators, Sink, Logger and GiveUpAfter (DefaultGiveUpAfter)
	// are already set.
	Host func(*plugins.HostOptions)
}

// Specs returns the host's translator specs for c.Translators: a builtin runs the callwire
// executable again as `callwire translator <builtin>` (plugins.BuiltinCommand), a path runs that
// executable with args.
func Specs(c Config) ([]plugins.TranslatorSpec, error) {
	specs := make([]plugins.TranslatorSpec, 0, len(c.Translators))
	for _, t := range c.Translators {
		var cmd []string
		if t.Builtin != "" {
			var err error
			if cmd, err = plugins.BuiltinCommand(t.Builtin); err != nil {
				return nil, fmt.Errorf("agent: translator %s: %w", t.Name, err)
			}
		} else {
			cmd = append([]string{t.Path}, t.Args...)
		}
		cfg, err := t.ConfigJSON()
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		specs = append(specs, plugins.TranslatorSpec{Name: t.Name, Command: cmd, Config: cfg})
	}
	return specs, nil
}

// NewClient returns the SDK client the agent sends with: c.Core's address and credential, one
// attempt per request (the agent retries), c.Delivery.RequestTimeout per request.
func NewClient(c Config) (*sdk.Client, error) {
	cl, err := sdk.New(c.Core.URL, sdk.Credential{ClientID: c.Core.ClientID, Secret: c.Core.Secret, Bearer: c.Core.Bearer},
		sdk.Options{MaxAttempts: 1, HTTPClient: &http.Client{Timeout: c.Delivery.RequestTimeout}, UserAgent: "callwire-agent"})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return cl, nil
}

// Run runs a whole agent from c until ctx ends: it opens the outbox, serves /metrics on
// c.Metrics.Listen, starts the translators under a plugins.Host with the Agent as their Sink,
// and sends the outbox to the core. When ctx ends it stops the translators (their last events
// are still taken), lets requests in flight finish for up to c.Delivery.ShutdownTimeout, closes
// the outbox and the metrics listener, and returns nil. When a translator keeps failing (its
// last DefaultGiveUpAfter runs each ended within a minute of their launch) it stops alike and
// returns an error wrapping the host's *plugins.FailingError, which names the translator, its
// restarts and its last error. It returns an error, having started nothing that still runs,
// when any of that cannot start.
func Run(ctx context.Context, c Config, o RunOptions) error {
	if err := c.Validate(); err != nil {
		return err
	}
	log := o.Logger
	if log == nil {
		log = NewLogger(c.Log, os.Stderr)
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	specs, err := Specs(c)
	if err != nil {
		return err
	}
	client, err := NewClient(c)
	if err != nil {
		return err
	}
	ob, err := outbox.Open(ctx, c.Outbox.Path, outbox.Options{MaxEvents: c.Outbox.MaxEvents,
		MaxBytes: c.Outbox.MaxBytes, DeadLetterPath: c.Outbox.DeadLetter})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	defer ob.Close()
	health := &hostHealth{}
	a, err := New(Options{Outbox: ob, Client: client, Logger: log, Registerer: reg, Workers: c.Delivery.Workers,
		MinBackoff: c.Delivery.MinBackoff, MaxBackoff: c.Delivery.MaxBackoff, RequestTimeout: c.Delivery.RequestTimeout,
		DrainTimeout: c.Delivery.ShutdownTimeout, StatusInterval: statusInterval(c.Metrics.LogInterval), Health: health})
	if err != nil {
		return err
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	a.Known(names...)
	hopts := plugins.HostOptions{Translators: specs, Sink: a, Logger: log, GiveUpAfter: DefaultGiveUpAfter}
	if o.Host != nil {
		o.Host(&hopts)
	}
	host, err := plugins.NewHost(hopts)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	health.host.Store(host)

	var metricsAddr net.Addr
	var srv *http.Server
	if c.Metrics.Listen != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", c.Metrics.Listen)
		if err != nil {
			return fmt.Errorf("agent: metrics: %w", err)
		}
		metricsAddr = ln.Addr()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("agent: metrics listener", "err", err)
			}
		}()
		defer srv.Close()
	}
	st, err := ob.Stats(ctx)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	log.Info("callwire agent starting", "core", c.Core.URL, "translators", names, "outbox", ob.Path(),
		"queued", st.Queued, "dead_letter_file", ob.DeadLetterPath(), "metrics", addrString(metricsAddr))
	if o.OnReady != nil {
		o.OnReady(metricsAddr)
	}

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	sendDone := make(chan struct{})
	go func() {
		defer close(sendDone)
		_ = a.Run(ctx)
	}()
	hostErr := host.Run(ctx)
	if hostErr != nil {
		// The host has stopped every translator; stop as on a signal: requests in flight finish,
		// the events still queued stay in the outbox for the next start.
		log.Error("callwire agent stopping: a translator keeps failing", "err", hostErr)
		stop()
	}
	<-ctx.Done()
	log.Info("callwire agent stopping: translators stopped, finishing requests in flight")
	<-sendDone
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	if err := ob.Close(); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if hostErr != nil {
		return fmt.Errorf("agent: %w", hostErr)
	}
	log.Info("callwire agent stopped")
	return nil
}

// hostHealth is the Agent's HealthSource: the host, once it is created (after the Agent, which
// is its Sink).
type hostHealth struct {
	host atomic.Pointer[plugins.Host]
}

// Status implements HealthSource; nil before the host is set.
func (h *hostHealth) Status() []plugins.TranslatorStatus {
	if p := h.host.Load(); p != nil {
		return p.Status()
	}
	return nil
}

func addrString(a net.Addr) string {
	if a == nil {
		return "off"
	}
	return a.String()
}

// NewLogger returns the agent's logger for c writing to w: JSON, or text when c.Format is text
// (or auto and w is a terminal), at c.Level. The core's logger is built alike (internal/logging).
func NewLogger(c Log, w *os.File) *slog.Logger {
	return logging.New(w, c.Level, c.Format)
}

// statusInterval maps the configuration's log interval, where 0 means no status lines, to the
// agent's, where 0 means the default and a negative value means none.
func statusInterval(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
