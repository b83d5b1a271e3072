package ringcentral

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/filelock"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/translators/numbering"
)

// Name is the translator's name: `builtin: ringcentral` in the agent's configuration.
const Name = "ringcentral"

// Translator is the RingCentral translator as a translator.Translator. The zero value is ready to
// use; each Run reads its configuration afresh.
type Translator struct {
	// Logger receives the translator's log lines; nil means slog.Default().
	Logger *slog.Logger
	// HTTPClient makes the REST requests; nil means a client with a 30s timeout.
	HTTPClient *http.Client

	mu sync.Mutex
	// The live path's health and the poll's, kept apart so that one's success does not hide
	// the other's failure.
	liveHealth, pollHealth error
}

// New returns the RingCentral translator.
func New() *Translator { return &Translator{} }

// Run implements translator.Translator: it validates config (reporting every problem at once),
// signs in, and runs the live path (WebSocket notifications) and the call-log poll until ctx
// ends. Bad credentials or a missing permission end Run with an error the agent logs; network
// failures and rate limits are waited out.
func (t *Translator) Run(ctx context.Context, config json.RawMessage, out translator.Emitter) error {
	log := t.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg, err := ParseConfig(config)
	if err != nil {
		return fmt.Errorf("ringcentral: invalid configuration:\n%w", err)
	}
	secrets, err := cfg.LoadSecrets()
	if err != nil {
		return fmt.Errorf("ringcentral: invalid configuration:\n%w", err)
	}
	plan, err := numbering.New(cfg.Config)
	if err != nil {
		return fmt.Errorf("ringcentral: invalid configuration: %w", err)
	}
	// One translator per cursor: two polls saving one file could set it back, and the
	// configuration check only sees one agent's translators.
	lock, err := filelock.Lock(cfg.CursorFile + ".lock")
	if errors.Is(err, filelock.ErrHeld) {
		return fmt.Errorf("ringcentral: cursor_file %s is in use by another translator (%w); give each its own", cfg.CursorFile, err)
	}
	if err != nil {
		return fmt.Errorf("ringcentral: cursor_file: %w", err)
	}
	defer lock.Close()
	hc := t.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	a := &auth{server: cfg.Server, clientID: cfg.ClientID, secrets: secrets, hc: hc, now: time.Now}
	api := &client{server: cfg.Server, auth: a, hc: hc}
	if _, err := a.Token(ctx); err != nil {
		// The first poll, which comes at once, signs in again and reports what it finds.
		t.setPollHealth(err)
		if IsPermanent(err) {
			return fmt.Errorf("ringcentral: %w", err)
		}
		log.Warn("ringcentral: cannot sign in yet; retrying", "error", err)
	}
	log.Info("ringcentral translator starting", "server", cfg.Server, "live", *cfg.Live, "poll_interval", time.Duration(cfg.PollInterval).String())

	ended := &endedSet{m: map[string]time.Time{}, keep: 2*time.Duration(cfg.MaxCallLength) + time.Duration(cfg.PollOverlap)}
	cs := newCalls(plan, cfg.Provider, time.Duration(cfg.MaxCallLength))
	em := &emitter{out: out, log: log}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	if *cfg.Live {
		l := &live{api: api, calls: cs, ended: ended, emit: em.emit, log: log, now: time.Now, health: t.setLiveHealth}
		wg.Add(1)
		go func() { defer wg.Done(); errc <- l.run(ctx) }()
	}
	p := &poller{api: &client{server: cfg.Server, auth: a, hc: hc}, calls: cs, ended: ended, emit: em.emit, log: log,
		path: cfg.CursorFile, overlap: time.Duration(cfg.PollOverlap), lookback: time.Duration(cfg.MaxCallLength), now: time.Now, sleep: sleep}
	wg.Add(1)
	go func() { defer wg.Done(); errc <- t.pollLoop(ctx, p, time.Duration(cfg.PollInterval)) }()

	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	cancel()
	wg.Wait()
	if first != nil && !errors.Is(first, context.Canceled) {
		t.setPollHealth(first)
		return fmt.Errorf("ringcentral: %w", first)
	}
	return nil
}

// pollLoop polls the call log at once and then every interval until ctx ends. A permanent error
// ends it; others are logged and the next poll tries again.
func (t *Translator) pollLoop(ctx context.Context, p *poller, interval time.Duration) error {
	for {
		n, err := p.pollOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && IsPermanent(err):
			return err
		case err != nil:
			t.setPollHealth(err)
			p.log.Warn("ringcentral: call-log poll failed; the next one reads from the same cursor", "error", err)
		default:
			t.setPollHealth(nil)
			p.log.Debug("ringcentral: call log polled", "records", n)
		}
		p.ended.prune(p.now())
		if err := sleep(ctx, interval); err != nil {
			return nil
		}
	}
}

// Health implements translator.HealthChecker: it reports unhealthy while the live path or the
// call-log poll is failing, with the last failure of each that is (the live path's until its
// subscription is in place again, the poll's until a poll succeeds), and nil when neither is.
func (t *Translator) Health(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var live, poll error
	if t.liveHealth != nil {
		live = fmt.Errorf("live path: %w", t.liveHealth)
	}
	if t.pollHealth != nil {
		poll = fmt.Errorf("call-log poll: %w", t.pollHealth)
	}
	return errors.Join(live, poll)
}

// setLiveHealth records the live path's health: err, or nil once it is well again.
func (t *Translator) setLiveHealth(err error) {
	t.mu.Lock()
	t.liveHealth = err
	t.mu.Unlock()
}

// setPollHealth records the call-log poll's health: err, or nil after a poll that succeeded.
func (t *Translator) setPollHealth(err error) {
	t.mu.Lock()
	t.pollHealth = err
	t.mu.Unlock()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// emitter hands events to the agent, retrying with backoff what it could not take.
type emitter struct {
	out translator.Emitter
	log *slog.Logger
}

// emit returns nil once the agent took e, or skipped it as invalid (it can never be taken), and
// ctx's error when ctx ended first.
func (m *emitter) emit(ctx context.Context, e event.Event) error {
	backoff := 50 * time.Millisecond
	for {
		err := m.out.Emit(ctx, e)
		if err == nil {
			return nil
		}
		var invalid *event.ValidationError
		if errors.As(err, &invalid) {
			m.log.Error("ringcentral: the agent refused an event as invalid; it is skipped",
				"type", string(e.Type), "provider_call_id", e.ProviderCallID, "error", err)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		m.log.Warn("ringcentral: the agent did not take an event; retrying", "type", string(e.Type),
			"provider_call_id", e.ProviderCallID, "error", err, "retry_in", backoff.String())
		if err := sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// endedSet remembers the calls whose call_ended this run handed to the agent, so that the live
// path and the poll do not both send one. Across restarts the core's deduplication does that.
type endedSet struct {
	mu   sync.Mutex
	m    map[string]time.Time
	keep time.Duration
}

func (s *endedSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[id]
	return ok
}

func (s *endedSet) mark(id string) {
	s.mu.Lock()
	s.m[id] = time.Now()
	s.mu.Unlock()
}

func (s *endedSet) prune(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, at := range s.m {
		if now.Sub(at) > s.keep {
			delete(s.m, id)
		}
	}
}
