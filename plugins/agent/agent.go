// Package agent is the delivery half of `callwire agent`: the plugins.Sink its translators emit
// into, which stores every event in a durable outbox (sdk/outbox) before the translator is told
// it was taken, and the sender that drains the outbox to the core through the SDK client.
//
// The sender follows the API's advice: each call_received alone and ahead of other calls' tails
// (a phone is ringing), other events in batches of at most 50, the stored bytes sent exactly.
// Each call's events reach the core in the order they were stored. An event leaves the outbox
// only when the core answered 2xx for it, or when the core refused it for good (400 and the
// like), in which case it goes to the dead-letter file with the server's answer. Credential
// problems (401, 403) and a wrong address (404, 405) keep the events and back off; outages,
// 5xx and 503 with Retry-After keep them and retry forever, never sooner than the server asked.
//
// Run wires a whole agent from a Config: outbox, SDK client, Agent, the translator host and the
// local /metrics listener.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/plugins"
	"github.com/callwire/callwire/sdk"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/outbox"
)

// Poster sends one request body to the core's events endpoint exactly as given. *sdk.Client is
// one; errors that carry the server's answer are *sdk.Error.
type Poster interface {
	Post(ctx context.Context, body []byte) (sdk.Result, error)
}

// Options configure an Agent. Outbox and Client are required; the other fields document their
// defaults.
type Options struct {
	// Outbox stores the events. The caller opens and closes it.
	Outbox *outbox.Outbox
	// Client sends them. Its own retries should be off (sdk.Options.MaxAttempts 1): the agent
	// retries, counts and backs off itself.
	Client Poster
	// Logger receives the agent's log. Default: discard.
	Logger *slog.Logger
	// Registerer receives the agent's metrics. Default: none are registered.
	Registerer prometheus.Registerer
	// Workers is how many requests may be in flight at once. Default 2, so that a ring is not
	// stuck behind a large batch.
	Workers int
	// MinBackoff and MaxBackoff bound the pause after a failed request: the n-th failure in a
	// row waits between half and all of min(MaxBackoff, MinBackoff·2ⁿ). Defaults 1s and 1m.
	// A Retry-After from the server overrides them: never sooner, a little jitter after.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// RequestTimeout bounds one request. Default 30s.
	RequestTimeout time.Duration
	// DrainTimeout is how long requests in flight when Run's context ends may still run to
	// get their answer. Default 10s.
	DrainTimeout time.Duration
	// StatusInterval is how often Run logs the counters. Default 1m; negative turns it off.
	StatusInterval time.Duration
	// Health reports the translators' processes (a *plugins.Host). When set, Status, the status
	// log line and the metrics carry each translator's health, restarts and last error. Default:
	// none; then they carry the event counts alone.
	Health HealthSource
}

// HealthSource reports the translators' processes, as plugins.Host.Status does.
type HealthSource interface {
	Status() []plugins.TranslatorStatus
}

// The health a TranslatorStatus reports.
const (
	// HealthHealthy: the translator runs and its last health check passed (or it does not
	// report its health).
	HealthHealthy = "healthy"
	// HealthUnhealthy: the translator runs and its last health check failed.
	HealthUnhealthy = "unhealthy"
	// HealthStarting: the translator runs and its first health check has not answered yet.
	HealthStarting = "starting"
	// HealthDown: no process of the translator runs: it ended, or could not start, and waits to
	// be restarted.
	HealthDown = "down"
)

// Agent is the Sink translators emit into and the sender that drains the outbox. It is safe for
// concurrent use. Create it with New; Accept may be called before and after Run.
type Agent struct {
	o   Options
	log *slog.Logger
	m   *metrics

	// settling is held shared while an event leaves the outbox and its counter moves, and
	// exclusively by Status, so that a Status never shows an event neither queued nor counted.
	settling sync.RWMutex

	started time.Time

	mu        sync.Mutex
	lastEvent map[string]time.Time // when each translator last handed an event to Accept
	counts    map[string]*TranslatorStatus
	suspect   map[int64]bool // events of a refused batch: each now goes alone
	until     time.Time      // no request before this moment
	fails     int            // failed requests in a row
	lastLog   map[string]time.Time
}

var _ plugins.Sink = (*Agent)(nil)

// TranslatorStatus counts one translator's events. Queued is read from the outbox; the others
// count since the agent started.
type TranslatorStatus struct {
	// Queued is how many of its events wait in the outbox, in flight included.
	Queued int64 `json:"queued"`
	// Accepted is how many Accept stored; Refused how many it refused (too large, the outbox
	// full or closed).
	Accepted int64 `json:"accepted"`
	Refused  int64 `json:"refused"`
	// Sent is how many the core acknowledged with 2xx.
	Sent int64 `json:"sent"`
	// Retried counts events kept after a failed attempt, once per attempt, to be sent again.
	Retried int64 `json:"retried"`
	// DeadLettered is how many the core refused for good.
	DeadLettered int64 `json:"dead_lettered"`
	// LastEvent is when the translator last handed the agent an event, taken or refused; zero
	// before its first.
	LastEvent time.Time `json:"last_event,omitzero"`

	// The process, from Options.Health; empty without it.
	//
	// Health is HealthHealthy, HealthUnhealthy, HealthStarting or HealthDown.
	Health string `json:"health,omitempty"`
	// HealthError is why the last health check failed.
	HealthError string `json:"health_error,omitempty"`
	// Restarts counts the translator's launches after the first.
	Restarts int `json:"restarts"`
	// LastError is why the translator last ended or failed to start; empty if it never has.
	LastError string `json:"last_error,omitempty"`
}

// Up reports whether the translator runs and is healthy.
func (s TranslatorStatus) Up() bool { return s.Health == HealthHealthy }

// healthOf names the health of a translator's process.
func healthOf(p plugins.TranslatorStatus) string {
	switch {
	case !p.Running:
		return HealthDown
	case p.Healthy:
		return HealthHealthy
	case p.HealthChecked.IsZero():
		return HealthStarting
	}
	return HealthUnhealthy
}

// Status is the agent's counters at one moment.
type Status struct {
	// Translators maps each translator's name to its counts.
	Translators map[string]TranslatorStatus `json:"translators"`
	// Queued and Bytes describe the whole outbox; InFlight is how many events are being sent.
	Queued   int   `json:"queued"`
	Bytes    int64 `json:"bytes"`
	InFlight int   `json:"in_flight"`
	// DeadLetterTotal counts every dead letter the outbox file ever kept.
	DeadLetterTotal int `json:"dead_letter_total"`
}

// New returns an Agent over o.Outbox and o.Client. It fails when either is missing or an option
// is negative, or when the metrics cannot be registered.
func New(o Options) (*Agent, error) {
	if o.Outbox == nil || o.Client == nil {
		return nil, errors.New("agent: an outbox and a client are required")
	}
	if o.Workers < 0 || o.MinBackoff < 0 || o.MaxBackoff < 0 || o.RequestTimeout < 0 || o.DrainTimeout < 0 {
		return nil, errors.New("agent: options must not be negative")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Minute
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 10 * time.Second
	}
	if o.StatusInterval == 0 {
		o.StatusInterval = time.Minute
	}
	a := &Agent{o: o, log: o.Logger, counts: map[string]*TranslatorStatus{}, suspect: map[int64]bool{},
		lastLog: map[string]time.Time{}, lastEvent: map[string]time.Time{}, started: time.Now()}
	a.m = newMetrics(a.healthRows)
	if o.Registerer != nil {
		if err := a.m.register(o.Registerer); err != nil {
			return nil, fmt.Errorf("agent: metrics: %w", err)
		}
	}
	return a, nil
}

// Accept stores e, emitted by translator and validated by the host, in the outbox as it is, and
// returns nil only once it is on disk. The error, passed back to the translator's Emit, wraps the
// outbox's: outbox.ErrTooLarge, outbox.ErrFull (the translator keeps the event and may retry
// later) or outbox.ErrClosed (the agent is stopping).
func (a *Agent) Accept(ctx context.Context, translator string, e event.Valid) error {
	a.mu.Lock()
	a.lastEvent[translator] = time.Now()
	a.mu.Unlock()
	err := a.o.Outbox.AddValid(ctx, translator, e)
	if err != nil {
		reason := "error"
		switch {
		case errors.Is(err, outbox.ErrFull):
			reason = "full"
		case errors.Is(err, outbox.ErrTooLarge):
			reason = "too_large"
		case errors.Is(err, outbox.ErrClosed):
			reason = "closed"
		}
		a.count(translator, func(s *TranslatorStatus) { s.Refused++ })
		a.m.refused.WithLabelValues(translator, reason).Inc()
		if a.shouldLog("refused:" + reason + ":" + translator) {
			a.log.Warn("agent refused an event; the translator keeps it", "translator", translator,
				"reason", reason, "err", err)
		}
		return fmt.Errorf("agent: %w", err)
	}
	a.count(translator, func(s *TranslatorStatus) { s.Accepted++ })
	a.m.accepted.WithLabelValues(translator).Inc()
	return nil
}

// shouldLog rate-limits a repeated warning to one a minute per key.
func (a *Agent) shouldLog(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	if now.Sub(a.lastLog[key]) < time.Minute {
		return false
	}
	a.lastLog[key] = now
	return true
}

// count applies f to translator's counters.
func (a *Agent) count(translator string, f func(*TranslatorStatus)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.counts[translator]
	if s == nil {
		s = &TranslatorStatus{}
		a.counts[translator] = s
	}
	f(s)
}

// countItems adds n per item to the counter f picks, per source, and to the metric.
func (a *Agent) countItems(items []outbox.Item, f func(*TranslatorStatus) *int64, vec *prometheus.CounterVec) {
	for _, it := range items {
		a.count(it.Source, func(s *TranslatorStatus) { *f(s)++ })
		vec.WithLabelValues(it.Source).Inc()
	}
}

// Status returns the counters now: one moment's view, in which an event that has left the outbox
// is already counted as sent or dead-lettered.
func (a *Agent) Status(ctx context.Context) (Status, error) {
	a.settling.Lock()
	defer a.settling.Unlock()
	st, err := a.o.Outbox.Stats(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("agent: status: %w", err)
	}
	out := Status{Translators: map[string]TranslatorStatus{}, Queued: st.Queued, Bytes: st.Bytes,
		InFlight: st.InFlight, DeadLetterTotal: st.DeadLettered}
	for name, t := range a.translatorStatus() {
		out.Translators[name] = t
	}
	for name, s := range st.Sources {
		t := out.Translators[name]
		t.Queued = int64(s.Queued)
		out.Translators[name] = t
	}
	return out, nil
}

// translatorStatus returns every known translator's counts, last event and process (without the
// outbox's Queued).
func (a *Agent) translatorStatus() map[string]TranslatorStatus {
	var procs []plugins.TranslatorStatus
	if a.o.Health != nil {
		procs = a.o.Health.Status()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]TranslatorStatus, len(a.counts)+len(procs))
	for name, c := range a.counts {
		t := *c
		t.LastEvent = a.lastEvent[name]
		out[name] = t
	}
	for _, p := range procs {
		t := out[p.Name]
		t.LastEvent = a.lastEvent[p.Name]
		t.Health, t.HealthError, t.Restarts, t.LastError = healthOf(p), p.HealthError, p.Restarts, p.LastError
		out[p.Name] = t
	}
	return out
}

// healthRows are the translators' rows of the health metrics now.
func (a *Agent) healthRows(now time.Time) []healthRow {
	all := a.translatorStatus()
	rows := make([]healthRow, 0, len(all))
	for name, t := range all {
		rows = append(rows, healthRow{name: name, known: t.Health != "", up: t.Up(), restarts: t.Restarts,
			since: a.sinceLastEvent(t, now)})
	}
	return rows
}

// sinceLastEvent is how long ago t's translator last handed over an event, or, before its first,
// how long ago the agent started.
func (a *Agent) sinceLastEvent(t TranslatorStatus, now time.Time) time.Duration {
	if t.LastEvent.IsZero() {
		return now.Sub(a.started)
	}
	return now.Sub(t.LastEvent)
}

// Run sends the outbox's events to the core until ctx ends, logging the counters every
// StatusInterval. When ctx ends it starts no new request, lets requests in flight finish for up
// to DrainTimeout (their events are acknowledged, or stay stored for the next start), logs the
// counters once more and returns nil. It does not close the outbox.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range a.o.Workers {
		wg.Go(func() { a.worker(ctx) })
	}
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			a.refreshMetrics(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	if a.o.StatusInterval > 0 {
		wg.Go(func() {
			t := time.NewTicker(a.o.StatusInterval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					a.logStatus(ctx)
				}
			}
		})
	}
	wg.Wait()
	a.refreshMetrics(context.WithoutCancel(ctx))
	a.logStatus(context.WithoutCancel(ctx))
	return nil
}

// Known makes the named translators appear in Status and the metrics before their first event.
func (a *Agent) Known(names ...string) {
	for _, n := range names {
		a.count(n, func(*TranslatorStatus) {})
		for _, v := range []*prometheus.CounterVec{a.m.accepted, a.m.sent, a.m.retried, a.m.dead} {
			v.WithLabelValues(n)
		}
	}
}

// refreshMetrics sets the outbox gauges from the outbox now.
func (a *Agent) refreshMetrics(ctx context.Context) {
	st, err := a.o.Outbox.Stats(ctx)
	if err != nil {
		return
	}
	a.mu.Lock()
	names := make([]string, 0, len(a.counts)+len(st.Sources))
	for n := range a.counts {
		names = append(names, n)
	}
	a.mu.Unlock()
	for n := range st.Sources {
		names = append(names, n)
	}
	a.m.refresh(st, names, time.Now())
}

// logStatus logs one line per translator with its counters.
func (a *Agent) logStatus(ctx context.Context) {
	st, err := a.Status(ctx)
	if err != nil {
		a.log.Error("agent status", "err", err)
		return
	}
	names := make([]string, 0, len(st.Translators))
	for n := range st.Translators {
		names = append(names, n)
	}
	sort.Strings(names)
	now := time.Now()
	for _, n := range names {
		t := st.Translators[n]
		attrs := []any{"translator", n}
		level := slog.LevelInfo
		if t.Health != "" {
			attrs = append(attrs, "health", t.Health, "restarts", t.Restarts)
			if t.HealthError != "" {
				attrs = append(attrs, "health_error", t.HealthError)
			}
			if t.LastError != "" {
				attrs = append(attrs, "last_error", t.LastError)
			}
			if !t.Up() && t.Health != HealthStarting {
				level = slog.LevelWarn
			}
		}
		attrs = append(attrs, "since_last_event", a.sinceLastEvent(t, now).Round(time.Second).String(),
			"queued", t.Queued, "sent", t.Sent, "retried", t.Retried,
			"dead_lettered", t.DeadLettered, "accepted", t.Accepted, "refused", t.Refused)
		a.log.Log(ctx, level, "agent status", attrs...)
	}
	a.log.Info("agent outbox", "queued", st.Queued, "bytes", st.Bytes, "in_flight", st.InFlight,
		"dead_letter_total", st.DeadLetterTotal, "dead_letter_file", a.o.Outbox.DeadLetterPath())
}

// worker takes ready events from the outbox and delivers them, one request at a time, until ctx
// ends.
func (a *Agent) worker(ctx context.Context) {
	for ctx.Err() == nil {
		if !a.waitGate(ctx) {
			return
		}
		changed := a.o.Outbox.Changed()
		items, err := a.o.Outbox.Next(ctx, event.MaxBatch)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, outbox.ErrClosed) {
				return
			}
			a.log.Error("agent: reading the outbox", "err", err)
			sleep(ctx, a.o.MinBackoff)
			continue
		}
		if len(items) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			case <-time.After(5 * time.Second):
			}
			continue
		}
		items = a.isolate(items)
		a.deliver(ctx, items)
	}
}

// isolate keeps a suspect (an event of a batch the core refused) alone, and otherwise cuts the
// batch before the first suspect, releasing the rest.
func (a *Agent) isolate(items []outbox.Item) []outbox.Item {
	a.mu.Lock()
	cut := len(items)
	for i, it := range items {
		if a.suspect[it.ID] {
			cut = max(i, 1)
			break
		}
	}
	a.mu.Unlock()
	if cut < len(items) {
		a.o.Outbox.Release(outbox.IDs(items[cut:]))
	}
	return items[:cut]
}

// waitGate waits until the shared back-off allows a request. It reports false when ctx ended.
func (a *Agent) waitGate(ctx context.Context) bool {
	for {
		a.mu.Lock()
		d := time.Until(a.until)
		a.mu.Unlock()
		if d <= 0 {
			return ctx.Err() == nil
		}
		if !sleep(ctx, d) {
			return false
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// backOff records a failed request and pushes the shared gate: retryAfter plus a little jitter
// when the server asked for a pause, otherwise an exponential pause with jitter.
func (a *Agent) backOff(retryAfter time.Duration) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fails++
	var d time.Duration
	if retryAfter > 0 {
		d = retryAfter + rand.N(a.o.MinBackoff/4+1)
	} else {
		bound := a.o.MaxBackoff
		if a.fails < 32 {
			if b := a.o.MinBackoff << (a.fails - 1); b > 0 && b < bound {
				bound = b
			}
		}
		d = bound/2 + rand.N(bound/2+1)
	}
	if u := time.Now().Add(d); u.After(a.until) {
		a.until = u
	}
	return d
}

// succeeded records a request the core answered 2xx.
func (a *Agent) succeeded() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fails = 0
}

// deliver sends items as one request and settles them by the answer: one handler per outcome.
func (a *Agent) deliver(ctx context.Context, items []outbox.Item) {
	ids := outbox.IDs(items)
	// Another worker may have been told to pause while this one read the outbox.
	if !a.waitGate(ctx) {
		a.o.Outbox.Release(ids)
		return
	}
	// A request in flight when ctx ends still gets DrainTimeout to be answered.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.o.RequestTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(a.o.DrainTimeout, cancel)
		context.AfterFunc(rctx, func() { t.Stop() })
	})
	defer stop()
	start := time.Now()
	res, err := a.o.Client.Post(rctx, outbox.Body(items))
	a.m.latency.Observe(time.Since(start).Seconds())
	if err == nil {
		a.sent(ctx, items, ids, res)
		return
	}
	var se *sdk.Error
	if !errors.As(err, &se) {
		se = &sdk.Error{Err: err}
	}
	switch {
	case se.Status == 0 || se.Retryable() || (se.Status >= 200 && se.Status < 300):
		a.keep(ctx, items, ids, se, err)
	case se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden ||
		se.Status == http.StatusNotFound || se.Status == http.StatusMethodNotAllowed ||
		se.Status == http.StatusRequestTimeout || !se.FromServer:
		a.refusedAgent(ctx, items, ids, se)
	case len(items) > 1:
		a.split(items, ids, se)
	default:
		a.deadLetter(ctx, items, ids, se)
	}
}

// sent settles items the core took: acknowledged in the outbox and counted.
func (a *Agent) sent(ctx context.Context, items []outbox.Item, ids []int64, res sdk.Result) {
	a.m.requests.WithLabelValues("sent").Inc()
	a.settling.RLock()
	if err := a.o.Outbox.Ack(context.WithoutCancel(ctx), ids); err != nil {
		a.settling.RUnlock()
		// The core has them; they stay stored and are sent again, which the core dedupes.
		// Pause first, so that a failing disk does not turn into a resend loop.
		d := a.backOff(0)
		a.o.Outbox.Release(ids)
		a.log.Error("agent: acknowledging sent events in the outbox", "err", err, "events", len(ids),
			"retry_in", d.Round(time.Millisecond).String())
		return
	}
	a.countItems(items, func(s *TranslatorStatus) *int64 { return &s.Sent }, a.m.sent)
	a.settling.RUnlock()
	a.forget(ids)
	a.succeeded()
	a.log.Debug("agent sent", "events", len(items), "status", res.Status, "trace_id", res.TraceID)
}

// keep keeps items the core did not take (no answer, 5xx, 429, or a 2xx that was not a success
// body) and retries them after a pause. The pause is set before the events are released, so that
// no other worker sends them (or anything else) sooner than Retry-After.
func (a *Agent) keep(ctx context.Context, items []outbox.Item, ids []int64, se *sdk.Error, err error) {
	if ctx.Err() != nil {
		a.o.Outbox.Release(ids)
		return
	}
	d := a.backOff(se.RetryAfter)
	a.o.Outbox.Release(ids)
	a.m.requests.WithLabelValues("retry").Inc()
	a.countItems(items, func(s *TranslatorStatus) *int64 { return &s.Retried }, a.m.retried)
	level := slog.LevelWarn
	if se.Status == 503 && se.RetryAfter > 0 {
		level = slog.LevelInfo
	}
	a.log.Log(ctx, level, "agent: the core did not take the events; keeping them", "events", len(items),
		"status", se.Status, "err", err, "retry_in", d.Round(time.Millisecond).String(), "trace_id", se.TraceID)
}

// refusedAgent keeps items refused for the agent's own setup: the credential or the address is
// wrong, not the events, so they are kept and retried until it is fixed, and the log says what to
// fix.
func (a *Agent) refusedAgent(ctx context.Context, items []outbox.Item, ids []int64, se *sdk.Error) {
	if ctx.Err() != nil {
		a.o.Outbox.Release(ids)
		return
	}
	d := a.backOff(0)
	a.o.Outbox.Release(ids)
	a.m.requests.WithLabelValues("refused_config").Inc()
	a.countItems(items, func(s *TranslatorStatus) *int64 { return &s.Retried }, a.m.retried)
	what := "the credential (core.client_id, core.secret) was refused"
	switch se.Status {
	case http.StatusForbidden:
		what = "the key lacks a scope or is not federated to a clinic"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		what = "the events endpoint is not at core.url"
	case http.StatusRequestTimeout:
		what = "the core timed out reading the request"
	}
	if !se.FromServer {
		what = "something other than the core answered " + strconv.Itoa(se.Status) + " (is core.url right, and is a proxy in the way?)"
	}
	a.log.Error("agent: THE CORE REFUSED THE AGENT: "+what+"; events are kept and retried", "status", se.Status,
		"message", se.Message, "missing_scopes", se.MissingScopes, "trace_id", se.TraceID,
		"events", len(items), "retry_in", d.Round(time.Millisecond).String())
}

// split handles a refused batch: a batch is all or nothing, so its events are marked suspect and
// sent again each alone, to find the refused ones.
func (a *Agent) split(items []outbox.Item, ids []int64, se *sdk.Error) {
	a.mu.Lock()
	for _, id := range ids {
		a.suspect[id] = true
	}
	a.mu.Unlock()
	a.o.Outbox.Release(ids)
	a.m.requests.WithLabelValues("split").Inc()
	a.log.Warn("agent: the core refused a batch; sending its events one by one", "events", len(items),
		"status", se.Status, "message", se.Message, "trace_id", se.TraceID)
}

// deadLetter settles an event the core refused for good: it moves to the dead-letter file.
func (a *Agent) deadLetter(ctx context.Context, items []outbox.Item, ids []int64, se *sdk.Error) {
	a.m.requests.WithLabelValues("dead_letter").Inc()
	r := outbox.Reason{Status: se.Status, Code: se.Code, Message: se.Message, TraceID: se.TraceID}
	a.settling.RLock()
	if err := a.o.Outbox.DeadLetter(context.WithoutCancel(ctx), ids, r); err != nil {
		a.settling.RUnlock()
		d := a.backOff(0)
		a.o.Outbox.Release(ids)
		a.log.Error("agent: dead-lettering a refused event", "err", err, "retry_in", d.Round(time.Millisecond).String())
		return
	}
	a.countItems(items, func(s *TranslatorStatus) *int64 { return &s.DeadLettered }, a.m.dead)
	a.settling.RUnlock()
	a.forget(ids)
	a.log.Error("agent: the core refused an event for good; it is in the dead-letter file",
		"translator", items[0].Source, "type", items[0].Type, "status", se.Status, "message", se.Message,
		"trace_id", se.TraceID, "file", a.o.Outbox.DeadLetterPath())
}

// forget drops settled events from the suspects.
func (a *Agent) forget(ids []int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		delete(a.suspect, id)
	}
}
