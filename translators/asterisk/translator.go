package asterisk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/translators/asterisk/ami"
	"github.com/callwire/callwire/translators/numbering"
)

// Name is the translator's name: `builtin: asterisk` in the agent's configuration.
const Name = "asterisk"

// statsEvery is how often the translator logs its counters, when they changed.
const statsEvery = time.Minute

// actionTimeout bounds the login and the CoreShowChannels list.
const actionTimeout = 30 * time.Second

// Translator is the Asterisk AMI translator as a translator.Translator. The zero value is ready to
// use; each Run reads its configuration afresh.
type Translator struct {
	// Logger receives the translator's log lines; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock for events Asterisk sends without a Timestamp; nil means time.Now.
	Now func() time.Time
	// Getenv reads secret_env; nil means os.Getenv.
	Getenv func(string) string

	mu     sync.Mutex
	health error // why the manager connection is down, while it is
}

// New returns the Asterisk translator.
func New() *Translator { return &Translator{} }

// Run implements translator.Translator: it validates config (reporting every problem at once),
// then connects to the manager, logs in and translates its events until ctx ends, reconnecting
// with backoff whenever the connection is lost. After every login it rebuilds its view of the
// calls in progress from CoreShowChannels.
func (t *Translator) Run(ctx context.Context, config json.RawMessage, out translator.Emitter) error {
	log := t.Logger
	if log == nil {
		log = slog.Default()
	}
	now := t.Now
	if now == nil {
		now = time.Now
	}
	getenv := t.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := ParseConfig(config)
	if err != nil {
		return fmt.Errorf("asterisk: invalid configuration:\n%w", err)
	}
	plan, err := numbering.New(cfg.Config)
	if err != nil {
		return fmt.Errorf("asterisk: invalid configuration: %w", err)
	}
	secret, err := cfg.ReadSecret(getenv)
	if err != nil {
		return fmt.Errorf("asterisk: %w", err)
	}
	tlsCfg, err := cfg.TLSConfig()
	if err != nil {
		return fmt.Errorf("asterisk: %w", err)
	}
	addr := cfg.Manager
	tracker, err := NewTracker(TrackerConfig{Plan: plan, Provider: cfg.Provider,
		TrunkChannels: cfg.TrunkChannels, TrunkContexts: cfg.TrunkContexts, EndpointExtensions: cfg.EndpointExtensions})
	if err != nil {
		return fmt.Errorf("asterisk: %w", err)
	}
	s := &session{
		log: log, now: now, out: out, tracker: tracker,
		checkEvery: time.Duration(cfg.CheckEvery),
		dial:       ami.Config{Addr: addr, TLS: tlsCfg, PingInterval: time.Duration(cfg.PingInterval), Logger: log},
		cred:       ami.Credentials{Username: cfg.Username, Secret: secret, Events: cfg.Events},
	}
	if cfg.PingInterval == 0 {
		s.dial.PingInterval = -1
	}
	log.Info("asterisk translator starting", "address", addr.String(), "tls", cfg.TLS, "user", cfg.Username, "events", cfg.Events)
	t.setHealth(errors.New("not connected to the manager yet"))
	backoff := time.Duration(cfg.ReconnectMin)
	for {
		connected, err := s.connect(ctx, t.setHealth)
		if ctx.Err() != nil {
			return nil
		}
		if connected {
			backoff = time.Duration(cfg.ReconnectMin)
		}
		t.setHealth(fmt.Errorf("manager connection lost: %w", err))
		log.Warn("asterisk manager connection lost; reconnecting", "error", err.Error(), "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Duration(cfg.ReconnectMax))
	}
}

// Health implements translator.HealthChecker: it reports the manager connection being down.
func (t *Translator) Health(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.health
}

func (t *Translator) setHealth(err error) {
	t.mu.Lock()
	t.health = err
	t.mu.Unlock()
}

// session is what one Run shares between its connections.
type session struct {
	log     *slog.Logger
	now     func() time.Time
	out     translator.Emitter
	tracker *Tracker
	dial    ami.Config
	cred    ami.Credentials
	last    TrackerStats
	// checkEvery is the time between Sweeps (not positive: none).
	checkEvery time.Duration
}

// connect runs one manager connection until it ends or ctx does. connected reports whether it
// got as far as logging in and rebuilding the view.
func (s *session) connect(ctx context.Context, health func(error)) (connected bool, err error) {
	c, err := ami.Dial(ctx, s.dial)
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer cancel()
		_ = c.Close(cctx)
	}()
	actx, cancel := context.WithTimeout(ctx, actionTimeout)
	defer cancel()
	if err := c.Login(actx, s.cred); err != nil {
		return false, err
	}
	list, err := c.DoList(actx, ami.Action{Name: "CoreShowChannels"})
	if err != nil {
		return false, fmt.Errorf("rebuild the view of calls: %w", err)
	}
	evs := s.tracker.Resync(list.Items, s.now())
	s.log.Info("asterisk manager connected", "version", c.Version(), "channels_up", len(list.Items),
		"calls_in_progress", s.tracker.Stats().Active)
	if err := s.emit(ctx, evs); err != nil {
		return true, err
	}
	health(nil)
	tick := time.NewTicker(statsEvery)
	defer tick.Stop()
	var check <-chan time.Time
	if s.checkEvery > 0 {
		ct := time.NewTicker(s.checkEvery)
		defer ct.Stop()
		check = ct.C
	}
	for {
		select {
		case <-ctx.Done():
			return true, ctx.Err()
		case <-check:
			lctx, cancel := context.WithTimeout(ctx, actionTimeout)
			list, err := c.DoList(lctx, ami.Action{Name: "CoreShowChannels"})
			cancel()
			if err != nil {
				return true, fmt.Errorf("check the calls in progress: %w", err)
			}
			if err := s.emit(ctx, s.tracker.Sweep(list.Items, s.now())); err != nil {
				return true, err
			}
		case <-tick.C:
			if st := s.tracker.Stats(); st != s.last {
				s.last = st
				s.log.Info("asterisk translator counters", "model", st)
			}
		case m, ok := <-c.Events():
			if !ok {
				err := c.Err()
				if err == nil {
					err = errors.New("event stream ended")
				}
				return true, err
			}
			if err := s.emit(ctx, s.observe(m)); err != nil {
				return true, err
			}
		}
	}
}

// observe runs the model on m; a panic in the model is contained and logged, never fatal.
func (s *session) observe(m ami.Message) (evs []event.Event) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("asterisk translator: the call model failed on an event; it was skipped",
				"panic", r, "event", m.Event())
			evs = nil
		}
	}()
	return s.tracker.Observe(m, s.now())
}

// emit hands events to the agent in order, retrying one it could not take with backoff. An
// event refused as invalid is logged and skipped. It returns only when ctx ends.
func (s *session) emit(ctx context.Context, evs []event.Event) error {
	for _, e := range evs {
		backoff := 50 * time.Millisecond
		for {
			err := s.out.Emit(ctx, e)
			if err == nil {
				break
			}
			var invalid *event.ValidationError
			if errors.As(err, &invalid) {
				s.log.Error("asterisk translator: the agent refused an event as invalid; it is skipped",
					"type", string(e.Type), "provider_call_id", e.ProviderCallID, "error", err)
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.log.Warn("asterisk translator: the agent did not take an event; retrying", "type", string(e.Type),
				"provider_call_id", e.ProviderCallID, "error", err, "retry_in", backoff.String())
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return ctx.Err()
			}
			backoff = min(backoff*2, 5*time.Second)
		}
	}
	return nil
}
