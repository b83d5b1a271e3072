package sip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/translators/netaddr"
	"github.com/callwire/callwire/translators/numbering"
	"github.com/callwire/callwire/translators/sip/callmodel"
)

// Name is the translator's name: `builtin: sip` in the agent's configuration.
const Name = "sip"

// drainTime is how long a stopping translator keeps handing the agent the events its call model
// already produced.
const drainTime = 3 * time.Second

// statsEvery is how often the translator logs its counters, when they changed.
const statsEvery = time.Minute

// Translator is the SIP observer as a translator.Translator. The zero value is ready to use; each
// Run reads its configuration afresh.
type Translator struct {
	// Logger receives the translator's log lines; nil means slog.Default().
	Logger *slog.Logger

	mu          sync.Mutex
	health      error     // why the mode stopped, when it did
	running     *pipeline // the current run's, for Health
	seenDropped uint64    // the drop count at the last Health call
}

// New returns the SIP observer translator.
func New() *Translator { return &Translator{} }

// runner is one observer mode: a proxy or a tap, running until ctx ends.
type runner interface {
	Run(ctx context.Context) error
}

// Run implements translator.Translator: it validates config (reporting every problem at once),
// resolves the PBX and trunk addresses (waiting, reported unhealthy, while a name does not
// resolve), and runs the configured mode until ctx ends. A mode that cannot listen ends Run with
// an error, and the agent restarts the translator with backoff.
func (t *Translator) Run(ctx context.Context, config json.RawMessage, out translator.Emitter) error {
	log := t.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg, err := ParseConfig(config)
	if err != nil {
		return fmt.Errorf("sip: invalid configuration:\n%w", err)
	}
	plan, err := numbering.New(cfg.Config)
	if err != nil {
		return fmt.Errorf("sip: invalid configuration: %w", err)
	}
	pbx, err := t.awaitResolve(ctx, log, "pbx", cfg.PBXAddr)
	if err != nil {
		return nil // ctx ended while the name did not resolve
	}
	var trunk []netip.AddrPort
	if !cfg.TrunkAddr.IsZero() {
		if trunk, err = t.awaitResolve(ctx, log, "trunk", cfg.TrunkAddr); err != nil {
			return nil
		}
	}
	tracker, err := callmodel.NewTracker(callmodel.Config{
		Plan:        plan,
		PBX:         pbx,
		Trunk:       trunk,
		Provider:    cfg.Provider,
		Observer:    event.ObserverProxy,
		RingTimeout: time.Duration(cfg.RingTimeout),
		CallTimeout: time.Duration(cfg.CallTimeout),
		Grace:       time.Duration(cfg.Grace),
		MaxCalls:    cfg.MaxCalls,
	})
	if err != nil {
		return fmt.Errorf("sip: invalid configuration: %w", err)
	}
	p := newPipeline(cfg.QueueSize, tracker, out, log, time.Now)
	t.mu.Lock()
	t.running, t.seenDropped, t.health = p, 0, nil
	t.mu.Unlock()
	mode, modeStats, err := newMode(cfg, p.offer, log)
	if err != nil {
		return fmt.Errorf("sip: %w", err)
	}
	listen := make([]string, len(cfg.Listeners))
	for i, l := range cfg.Listeners {
		listen[i] = l.String()
	}
	log.Info("sip observer starting", "mode", cfg.Mode, "listen", strings.Join(listen, " "), "pbx", cfg.PBXAddr.String(), "trunk", cfg.TrunkAddr.String())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last string
		p.run(ctx, drainTime, func(ms callmodel.Stats) {
			line := fmt.Sprintf("%+v %+v %+v", ms, modeStats(), p.snapshot())
			if line == last {
				return
			}
			last = line
			log.Info("sip observer counters", "model", ms, "observer", modeStats(), "pipeline", p.snapshot())
		})
	}()
	runErr := mode.Run(ctx)
	cancel()
	wg.Wait()
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		t.setHealth(runErr)
		return fmt.Errorf("sip: %s: %w", cfg.Mode, runErr)
	}
	return nil
}

// Health implements translator.HealthChecker: it reports a mode that stopped with an error, and SIP
// messages dropped since the previous call because the translation queue was full (the calls
// went on; their events may be incomplete).
func (t *Translator) Health(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.health != nil {
		return t.health
	}
	if t.running == nil {
		return nil
	}
	dropped := t.running.stats.dropped.Load()
	if n := dropped - t.seenDropped; n > 0 {
		t.seenDropped = dropped
		return fmt.Errorf("translation queue full: %d SIP messages dropped since the last check (calls are not affected; their events may be incomplete)", n)
	}
	return nil
}

func (t *Translator) setHealth(err error) {
	t.mu.Lock()
	t.health = err
	t.mu.Unlock()
}

// Pauses between lookups of a pbx or trunk name that does not resolve.
const (
	minResolveRetry = time.Second
	maxResolveRetry = 30 * time.Second
)

// awaitResolve resolves hp, the address of the key named, trying again after a pause (1 s,
// doubling up to 30 s) for as long as the name does not resolve, with the failure reported as the
// translator's health. A name not in DNS yet (a PBX container that starts later, a resolver not up
// at boot) is a condition to wait out, like a PBX that does not answer: returning would count as
// a failed run, and a translator that keeps failing stops the agent. It returns an error only
// when ctx ends first.
func (t *Translator) awaitResolve(ctx context.Context, log *slog.Logger, key string, hp netaddr.HostPort) ([]netip.AddrPort, error) {
	pause := minResolveRetry
	for {
		addrs, err := resolve(ctx, hp)
		if err == nil {
			t.setHealth(nil)
			return addrs, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		err = fmt.Errorf("%s: %w", key, err)
		t.setHealth(err)
		log.Warn("sip observer waiting for an address to resolve", "key", key, "address", hp.String(), "error", err, "retry_in", pause.String())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, maxResolveRetry)
	}
}

// resolve turns hp into the addresses it names now. A name is looked up once, at start: a PBX
// that moves needs the translator restarted (the agent does so when its configuration changes).
func resolve(ctx context.Context, hp netaddr.HostPort) ([]netip.AddrPort, error) {
	if ap, ok := hp.AddrPort(); ok {
		return []netip.AddrPort{ap}, nil
	}
	host, port := hp.Host, hp.Port
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("look up %q: %w", host, err)
	}
	out := make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, netip.AddrPortFrom(a.Unmap(), port))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("look up %q: no addresses", host)
	}
	return out, nil
}
