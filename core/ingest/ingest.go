// Package ingest is callwire's write pipeline for one report: plan the write, ask the clinic's
// client system who is calling, publish the popup, then store the calls and events in one
// atomic write. It is transport-agnostic; the HTTP layer authenticates and decodes, then calls
// Service.Ingest.
package ingest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/lookup"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/event"
)

// ErrUnavailable reports a transient failure (the store is down, overloaded or too slow): nothing
// was written, and the reporter should resend the same request after a pause.
var ErrUnavailable = errors.New("temporarily unavailable")

// ErrKeyRejected reports that the reporter's key failed the check that guards the request's work
// (it was revoked, rotated or expired a moment ago): nothing was written and no popup was
// published. The reporter must not resend with the same key.
var ErrKeyRejected = errors.New("key rejected")

// CallerLookup asks an organization's client system who owns a phone number.
type CallerLookup interface {
	// Lookup returns the clients whose records carry the E.164 number: none, one or many. An
	// error means the caller is unknown; it never fails the request. An error wrapping
	// lookup.ErrNotConfigured says the organization has no client system set up.
	Lookup(ctx context.Context, orgID, number string) ([]popup.Client, error)
}

// Publisher delivers popups to the workstations of an organization.
type Publisher interface {
	// Publish sends the popup to every location it names, once per ringing (popup id). An error
	// wrapping popup.ErrRepeat means the ringing was published already, by a copy of the report;
	// any other error means the popup was missed. Neither fails the request.
	Publish(ctx context.Context, p popup.Popup) error
}

// Notifier tells an organization's desks that its to-call-back list may have changed, so that
// they read it again. A popup.Broker satisfies it.
type Notifier interface {
	// NotifyCallbacks sends the notice; an error means the desks missed it, and never fails the
	// request.
	NotifyCallbacks(ctx context.Context, orgID string) error
}

// Writer is the part of the store the pipeline needs.
type Writer interface {
	WriteCalls(ctx context.Context, w store.Write) ([]store.CallResult, error)
	Ringing(ctx context.Context, orgID string, refs []store.EventRef, check *store.KeyCheck) ([]store.Ringing, error)
}

// Options configure a Service. Zero durations take the documented defaults.
type Options struct {
	Writer    Writer
	Lookup    CallerLookup // nil: callers stay unknown
	Publisher Publisher    // nil: popups are dropped
	// Notifier receives one notice per write that may have changed the organization's
	// to-call-back list (a store.CallResult with CallbacksChanged); nil sends none.
	Notifier Notifier
	Logger   *slog.Logger // nil: discard
	// Registerer receives the pipeline's metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// LookupTimeout bounds the caller lookups of a request, which start together; default 800ms.
	LookupTimeout time.Duration
	// PublishTimeout bounds publishing a popup, and a to-call-back notice; default 500ms.
	PublishTimeout time.Duration
	// WriteTimeout bounds the store write; past it the request answers 503. Default 10s.
	WriteTimeout time.Duration
	// Now is the server clock; default time.Now.
	Now func() time.Time
}

// Service runs the pipeline. It is safe for concurrent use.
type Service struct {
	opts    Options
	log     *slog.Logger
	metrics metrics
	// plans are *planMemory, each used by one request at a time.
	plans sync.Pool
}

type metrics struct {
	events        *prometheus.CounterVec
	duplicates    prometheus.Counter
	callsCreated  prometheus.Counter
	popups        *prometheus.CounterVec
	lookups       *prometheus.CounterVec
	unavailable   prometheus.Counter
	writeDuration prometheus.Histogram
	// To-call-back notices by outcome: published, failed.
	notices                         *prometheus.CounterVec
	noticesPublished, noticesFailed prometheus.Counter

	// The counters of the vectors above, resolved once for every label value the service uses:
	// a request counts each of its events, rings and lookups, and resolving a label value takes
	// a hash and a lock each time.
	stored, duplicate map[event.Type]prometheus.Counter
	lookup            map[popup.LookupOutcome]prometheus.Counter
	// Popups by outcome, as the brokers keep theirs (popup's brokerMetrics).
	published, missed, repeat, late, dropped prometheus.Counter
}

// resolve fills m's resolved counters from its vectors.
func (m *metrics) resolve() {
	m.stored, m.duplicate = map[event.Type]prometheus.Counter{}, map[event.Type]prometheus.Counter{}
	for _, t := range event.Types() {
		m.stored[t] = m.events.WithLabelValues(string(t), "stored")
		m.duplicate[t] = m.events.WithLabelValues(string(t), "duplicate")
	}
	m.published, m.missed, m.repeat = m.popups.WithLabelValues("published"), m.popups.WithLabelValues("missed"), m.popups.WithLabelValues("repeat")
	m.late, m.dropped = m.popups.WithLabelValues("late"), m.popups.WithLabelValues("dropped")
	m.noticesPublished, m.noticesFailed = m.notices.WithLabelValues("published"), m.notices.WithLabelValues("failed")
	m.lookup = map[popup.LookupOutcome]prometheus.Counter{}
	for _, o := range []popup.LookupOutcome{popup.LookupMatched, popup.LookupNoMatch, popup.LookupSkipped, popup.LookupFailed, popup.LookupNotSet} {
		m.lookup[o] = m.lookups.WithLabelValues(string(o))
	}
}

// countLookup counts a lookup's outcome.
func (m *metrics) countLookup(outcome popup.LookupOutcome) {
	if c, ok := m.lookup[outcome]; ok {
		c.Inc()
		return
	}
	m.lookups.WithLabelValues(string(outcome)).Inc()
}

// countEvent counts an event of type t, stored or a duplicate.
func (m *metrics) countEvent(t event.Type, dup bool) {
	byType, outcome := m.stored, "stored"
	if dup {
		byType, outcome = m.duplicate, "duplicate"
	}
	if c, ok := byType[t]; ok {
		c.Inc()
		return
	}
	m.events.WithLabelValues(string(t), outcome).Inc()
}

// New returns a Service; it fails when the options are unusable.
func New(o Options) (*Service, error) {
	if o.Writer == nil {
		return nil, errors.New("ingest: a writer is required")
	}
	if o.LookupTimeout < 0 || o.PublishTimeout < 0 || o.WriteTimeout < 0 {
		return nil, errors.New("ingest: timeouts must not be negative")
	}
	if o.LookupTimeout == 0 {
		o.LookupTimeout = 800 * time.Millisecond
	}
	if o.PublishTimeout == 0 {
		o.PublishTimeout = 500 * time.Millisecond
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callwire_events_total", Help: "Events accepted, by type and outcome (stored or duplicate).",
		}, []string{"type", "outcome"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callwire_events_duplicate_total", Help: "Events already on file when reported.",
		}),
		callsCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callwire_calls_created_total", Help: "Calls created.",
		}),
		popups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callwire_popups_total", Help: "Popups by outcome: published, missed (broker failed), repeat (already on file, or published by a racing copy of the report), late (the call had already rung or moved on), dropped (no broker configured).",
		}, []string{"outcome"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callwire_lookups_total", Help: "Caller lookups by outcome.",
		}, []string{"outcome"}),
		unavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callwire_ingest_unavailable_total", Help: "Requests answered 503 because the store failed transiently.",
		}),
		writeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "callwire_store_write_seconds", Help: "Time of the atomic store write per request.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callwire_callback_notices_total", Help: "To-call-back notices sent to desks after writes that may have changed an organization's list, by outcome: published, failed.",
		}, []string{"outcome"}),
	}
	m.resolve()
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{m.events, m.duplicates, m.callsCreated, m.popups, m.lookups, m.unavailable, m.writeDuration, m.notices} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("ingest: register metrics: %w", err)
			}
		}
	}
	s := &Service{opts: o, log: log, metrics: m}
	s.plans.New = func() any { return new(planMemory) }
	return s, nil
}

// CallResult is what a report did to one call.
type CallResult struct {
	// ID is the call's identifier.
	ID             string
	ProviderCallID string
	Provider       string
	// Created is true only for the one report that created the call.
	Created bool
	// Clients are the client-system matches on file for the call after the write; never nil.
	Clients []popup.Client
}

// EventResult is what a report did with one of its events.
type EventResult struct {
	// ID is the event's identifier: the new one, or the one on file for a duplicate.
	ID        string
	Type      string
	DedupeKey string
	// Duplicate is true when the event was already on file, or repeated earlier in the report.
	Duplicate bool
}

// Result is what a report did: calls in the order they first appear in the request, events in
// request order.
type Result struct {
	Calls  []CallResult
	Events []EventResult
}

// Created reports whether the request created at least one call.
func (r Result) Created() bool {
	for _, c := range r.Calls {
		if c.Created {
			return true
		}
	}
	return false
}

// Ingest processes one report of orgID's, already authenticated, decoded and validated: plan,
// caller lookup (call_received only; its answer used only for a call_received not already on
// file), popup, then one atomic write.
// events, their Bodies and what they point to must stay valid and unchanged until Ingest
// returns; Ingest keeps nothing of them afterwards, so its caller may then reuse their memory.
//
// check, when not nil, is the proof that the reporter's key is live; the store runs it with the
// read that precedes any popup and with the write, so a key revoked a moment ago can neither
// light a desk nor store a call. Errors: wrapping ErrKeyRejected when the check fails,
// ErrUnavailable when the store fails transiently; in both cases nothing was written.
func (s *Service) Ingest(ctx context.Context, orgID, traceID string, events []event.Parsed, check *store.KeyCheck) (Result, error) {
	if orgID == "" {
		return Result{}, errors.New("ingest: organization is required")
	}
	if len(events) == 0 {
		return Result{}, errors.New("ingest: no events")
	}
	now := s.opts.Now().UTC()
	m := s.plans.Get().(*planMemory)
	defer func() {
		m.forget()
		s.plans.Put(m)
	}()
	calls := plan(events, now, eventIDs(len(events)), m)
	log := reqLog{l: s.log, traceID: traceID, orgID: orgID}

	if err := s.ring(ctx, log, orgID, traceID, events, calls, check, m); err != nil {
		return Result{}, err
	}

	// The store keeps nothing of the write once it answers.
	m.callWrites = slices.Grow(m.callWrites[:0], len(calls))[:len(calls)]
	w := store.Write{OrgID: orgID, ReceivedAt: now, Calls: m.callWrites, Check: check}
	for i, pc := range calls {
		w.Calls[i] = pc.write
	}
	wctx, cancel := context.WithTimeout(ctx, s.opts.WriteTimeout)
	start := time.Now()
	results, err := s.opts.Writer.WriteCalls(wctx, w)
	cancel()
	s.metrics.writeDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return Result{}, s.storeError("write", err)
	}
	if len(results) != len(calls) {
		return Result{}, fmt.Errorf("ingest: store returned %d results for %d calls", len(results), len(calls))
	}
	for i := range results {
		if results[i].CallbacksChanged {
			s.notify(ctx, log, orgID)
			break
		}
	}
	return s.result(log, events, calls, results)
}

// ring looks up the caller and publishes the popup for each call_received of the request that is
// not already on file. Lookups and publishes run concurrently, each bounded by its timeout; their
// failures are logged and counted, never returned. The only error is a transient store failure
// while checking what is on file.
//
// A lookup that may wait on a client system starts before that check, for every call_received
// of the request, and runs while the store is read; the answers for calls found on file are
// dropped, uncounted. A lookup that cannot wait is made only for a call that rings.
//
// Rings that can wait on nothing outside this process (no client system to ask, an in-process
// broker; see waiter) run in turn on the request's goroutine, and a publish that cannot wait has
// no deadline of its own: each is over at once, and a goroutine or a timer per ring would cost
// more than the ring.
func (s *Service) ring(ctx context.Context, log reqLog, orgID, traceID string, events []event.Parsed, calls []*plannedCall, check *store.KeyCheck, m *planMemory) error {
	ringing, refs := m.ringing[:0], m.refs[:0]
	for _, pc := range calls {
		if pc.received >= 0 {
			ringing = append(ringing, pc)
			refs = append(refs, store.EventRef{
				Provider:       pc.write.Provider,
				ProviderCallID: pc.write.ProviderCallID,
				DedupeKey:      pc.write.Events[pc.slots[pc.received]].DedupeKey,
			})
		}
	}
	m.ringing, m.refs = ringing, refs
	if len(ringing) == 0 {
		return nil
	}
	r := ringer{s: s, log: log, orgID: orgID, traceID: traceID, events: events, ctx: ctx, lctx: ctx}
	lookupWaits := mayWait(ctx, s.opts.Lookup, orgID)
	if lookupWaits {
		defer r.boundLookups()() // released after endLookups, deferred below, has waited
		// A client system is asked while the store is read, not after: the popup waits for the
		// slower of the two instead of both in turn. A lookup for a call found on file is not
		// cut short (its connection stays open for the next, its answer is remembered for the
		// next ring from that number) and its answer is not used; ring returns once every
		// lookup it started has ended.
		r.asks = m.asks[:0]
		for _, pc := range ringing {
			r.asks = append(r.asks, r.startLookup(pc))
		}
		m.asks = r.asks
		defer r.endLookups()
	}
	known, err := s.opts.Writer.Ringing(ctx, orgID, refs, check)
	if err != nil {
		return s.storeError("check events on file", err)
	}
	// The calls to ring are kept in place, with their refs and lookups.
	n := 0
	for i, pc := range ringing {
		if i < len(known) && known[i].Known {
			s.metrics.repeat.Inc()
			continue
		}
		if i < len(known) && known[i].State >= store.StateRinging {
			// The call already rang, or was answered or ended: a late call_received does not
			// move it, and does not light the desks (the state only climbs).
			s.metrics.late.Inc()
			continue
		}
		ringing[n], refs[n] = pc, refs[i]
		if r.asks != nil {
			r.asks[i], r.asks[n] = r.asks[n], r.asks[i]
		}
		n++
	}
	if n == 0 {
		return nil
	}
	if !lookupWaits && s.opts.Lookup != nil {
		// Lookups that cannot wait are made only now, for the calls that ring.
		defer r.boundLookups()()
	}
	r.publishWaits = mayWait(ctx, s.opts.Publisher, orgID)
	if n == 1 || !r.publishWaits && !lookupWaits {
		// A report's one ring, or rings that wait on nothing: a goroutine would only add its
		// start and its stack.
		for i := range n {
			r.ring(i, ringing[i], refs[i])
		}
		return nil
	}
	var wg sync.WaitGroup
	for i := range n {
		pc, ref := ringing[i], refs[i]
		wg.Go(func() { r.ring(i, pc, ref) })
	}
	wg.Wait()
	return nil
}

// waiter is what a CallerLookup or a Publisher may also tell: whether asking it on behalf of
// orgID may wait on something outside this process (a client system, a Redis server). One that
// says no answers at once; one that does not implement waiter may wait.
type waiter interface {
	MayWait(ctx context.Context, orgID string) bool
}

// mayWait reports whether asking v (a CallerLookup or a Publisher) on behalf of orgID may wait;
// nil never does.
func mayWait(ctx context.Context, v any, orgID string) bool {
	if v == nil {
		return false
	}
	w, ok := v.(waiter)
	return !ok || w.MayWait(ctx, orgID)
}

// ringer rings the calls of one request.
type ringer struct {
	s              *Service
	log            reqLog
	orgID, traceID string
	events         []event.Parsed
	// ctx is the request's; lctx bounds its lookups.
	ctx, lctx context.Context
	// asks are the lookups started before the read, one per ringing call in the order of the
	// calls being rung; nil when the lookups are made as each call rings.
	asks []*lookupAsk
	// publishWaits is set when a publish may wait, and so takes a deadline of its own.
	publishWaits bool
}

// boundLookups gives the request's lookups their one deadline, and returns what releases it:
// they start together, or follow one another when none may wait.
func (r *ringer) boundLookups() context.CancelFunc {
	var cancel context.CancelFunc
	r.lctx, cancel = context.WithTimeout(r.ctx, r.s.opts.LookupTimeout)
	return cancel
}

// lookupAsk is one lookup started before the read; the other fields hold its answer once done
// is closed.
type lookupAsk struct {
	done    chan struct{}
	clients []popup.Client
	outcome popup.LookupOutcome
	err     error
}

// startLookup starts the lookup of pc's caller on a goroutine of its own, unless it needs none
// (a caller with no E.164 number is not looked up).
func (r *ringer) startLookup(pc *plannedCall) *lookupAsk {
	a := &lookupAsk{done: make(chan struct{})}
	e := &r.events[pc.received].Event
	number, ok := lookupNumber(e)
	if !ok {
		a.outcome = popup.LookupSkipped
		close(a.done)
		return a
	}
	go func() {
		defer close(a.done)
		defer func() {
			// A lookup that panics costs the popup's names, never the call.
			if p := recover(); p != nil {
				a.outcome, a.err = popup.LookupFailed, fmt.Errorf("lookup panicked: %v", p)
			}
		}()
		a.clients, a.outcome, a.err = r.s.ask(r.lctx, r.orgID, number)
	}()
	return a
}

// endLookups waits for every lookup started before the read, so that none outlives the request
// whose events it reads.
func (r *ringer) endLookups() {
	for _, a := range r.asks {
		<-a.done
	}
}

// ring looks up the caller of pc's call_received (or takes the answer of the lookup started for
// it, the i-th of the calls being rung) and publishes its popup.
func (r *ringer) ring(i int, pc *plannedCall, ref store.EventRef) {
	s := r.s
	defer func() {
		// A lookup or broker that panics costs the popup, never the call.
		if p := recover(); p != nil {
			s.metrics.missed.Inc()
			r.log.error("popup: recovered from a panic; the call is still recorded", "panic", fmt.Sprint(p))
		}
	}()
	e := &r.events[pc.received].Event
	var clients []popup.Client
	var outcome popup.LookupOutcome
	if r.asks != nil {
		a := r.asks[i]
		<-a.done
		clients, outcome = s.account(r.log, a.clients, a.outcome, a.err)
	} else {
		clients, outcome = s.lookup(r.lctx, r.log, r.orgID, e)
	}
	if outcome != popup.LookupFailed && outcome != popup.LookupNotSet {
		pc.write.Clients = mustJSON(clients)
	}
	// The publisher gets parties of its own: the events' are the caller's memory.
	s.publish(r.ctx, r.log, popup.Popup{
		ID:             PopupID(r.orgID, ref.Provider, ref.ProviderCallID),
		OrgID:          r.orgID,
		CallID:         store.CallID(r.orgID, ref.Provider, ref.ProviderCallID),
		Provider:       ref.Provider,
		ProviderCallID: ref.ProviderCallID,
		Locations:      popup.UniqueLocations(e.EffectiveLocations()),
		Direction:      string(e.Call.Direction),
		From:           copyParty(e.Call.From),
		To:             copyParty(e.Call.To),
		Trunk:          e.Call.Trunk,
		Clients:        clients,
		OccurredAt:     e.OccurredAt,
		TraceID:        r.traceID,
		Lookup:         outcome,
	}, r.publishWaits)
}

// copyParty returns a copy of *p, or nil for nil.
func copyParty(p *event.Party) *event.Party {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// lookup asks who is calling; ctx bounds the lookup (ring gives it the request's lookup deadline).
func (s *Service) lookup(ctx context.Context, log reqLog, orgID string, e *event.Event) ([]popup.Client, popup.LookupOutcome) {
	number, ok := lookupNumber(e)
	if !ok {
		return s.account(log, nil, popup.LookupSkipped, nil)
	}
	clients, outcome, err := s.ask(ctx, orgID, number)
	return s.account(log, clients, outcome, err)
}

// lookupNumber returns the number to look up for e's caller: only an E.164 caller is looked up.
func lookupNumber(e *event.Event) (string, bool) {
	from := e.Call.From
	if from == nil || from.EffectiveKind() != event.KindE164 || from.Number == "" {
		return "", false
	}
	return from.Number, true
}

// ask asks the caller lookup who owns number, and tells the outcome; it counts and logs nothing
// (account does, for an answer that is used).
func (s *Service) ask(ctx context.Context, orgID, number string) ([]popup.Client, popup.LookupOutcome, error) {
	if s.opts.Lookup == nil {
		return nil, popup.LookupNotSet, nil
	}
	clients, err := s.opts.Lookup.Lookup(ctx, orgID, number)
	switch {
	case errors.Is(err, lookup.ErrNotConfigured):
		return nil, popup.LookupNotSet, nil
	case err != nil:
		return nil, popup.LookupFailed, err
	case len(clients) == 0:
		return nil, popup.LookupNoMatch, nil
	}
	return clients, popup.LookupMatched, nil
}

// account counts a lookup's outcome, logs a failure, and returns the clients to show: none
// unless the lookup matched.
func (s *Service) account(log reqLog, clients []popup.Client, outcome popup.LookupOutcome, err error) ([]popup.Client, popup.LookupOutcome) {
	s.metrics.countLookup(outcome)
	if outcome == popup.LookupFailed {
		log.warn("caller lookup failed; caller treated as unknown", "error", err)
	}
	if outcome != popup.LookupMatched {
		return []popup.Client{}, outcome
	}
	return clients, outcome
}

// publish hands p to the publisher, within PublishTimeout when it may wait.
func (s *Service) publish(ctx context.Context, log reqLog, p popup.Popup, waits bool) {
	if s.opts.Publisher == nil {
		s.metrics.dropped.Inc()
		return
	}
	if waits {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.PublishTimeout)
		defer cancel()
	}
	p.PublishedAt = s.opts.Now().UTC()
	err := s.opts.Publisher.Publish(ctx, p)
	switch {
	case errors.Is(err, popup.ErrRepeat):
		// Another copy of the report, racing this one here or on another replica, rang the
		// desks already.
		s.metrics.repeat.Inc()
	case err != nil:
		s.metrics.missed.Inc()
		log.warn("popup missed; the call is still recorded", "error", err, "call_id", p.CallID, "popup_id", p.ID)
	default:
		s.metrics.published.Inc()
	}
}

// notify tells orgID's desks, once for the write, that its to-call-back list may have changed,
// within PublishTimeout when the notifier may wait. A failure is logged and counted: the write
// stands, and desks read the list again when they reconnect.
func (s *Service) notify(ctx context.Context, log reqLog, orgID string) {
	if s.opts.Notifier == nil {
		return
	}
	if mayWait(ctx, s.opts.Notifier, orgID) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.PublishTimeout)
		defer cancel()
	}
	if err := s.opts.Notifier.NotifyCallbacks(ctx, orgID); err != nil {
		s.metrics.noticesFailed.Inc()
		log.warn("to-call-back notice missed; desks read the list again when they reconnect", "error", err)
		return
	}
	s.metrics.noticesPublished.Inc()
}

func (s *Service) result(log reqLog, events []event.Parsed, calls []*plannedCall, results []store.CallResult) (Result, error) {
	r := Result{Calls: make([]CallResult, len(calls)), Events: make([]EventResult, len(events))}
	for ci, pc := range calls {
		res := results[ci]
		if len(res.Events) != len(pc.write.Events) {
			return Result{}, fmt.Errorf("ingest: store returned %d event results for %d events", len(res.Events), len(pc.write.Events))
		}
		clients := []popup.Client{}
		if len(res.Clients) > 0 {
			if err := json.Unmarshal(res.Clients, &clients); err != nil {
				log.warn("stored client matches are unreadable", "error", err, "call_id", res.ID)
				clients = []popup.Client{}
			}
		}
		r.Calls[ci] = CallResult{
			ID:             res.ID,
			ProviderCallID: pc.write.ProviderCallID,
			Provider:       pc.write.Provider,
			Created:        res.Created,
			Clients:        clients,
		}
		if res.Created {
			s.metrics.callsCreated.Inc()
		}
		for _, i := range pc.members {
			pos := pc.slots[i]
			er := res.Events[pos]
			dup := er.Duplicate || pc.unique[pos] != i
			e := &events[i].Event
			r.Events[i] = EventResult{ID: er.ID, Type: string(e.Type), DedupeKey: pc.write.Events[pos].DedupeKey, Duplicate: dup}
			if dup {
				s.metrics.duplicates.Inc()
			}
			s.metrics.countEvent(e.Type, dup)
		}
	}
	return r, nil
}

// storeError classifies a store failure: a rejected key becomes ErrKeyRejected, a transient
// failure or a deadline ErrUnavailable, anything else is wrapped as is. The store's error stays
// in the chain.
func (s *Service) storeError(op string, err error) error {
	switch {
	case errors.Is(err, store.ErrKeyRejected):
		return fmt.Errorf("ingest: %s: %w: %w", op, ErrKeyRejected, err)
	case errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		s.metrics.unavailable.Inc()
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("ingest: %s: %w", op, err)
}

// PopupID returns the identifier of the ringing of the call filed under org, provider and
// providerCallID: 32 hex digits, the same for every report of a call_received of that call,
// whatever its dedupe key, and known before anything is stored. A call rings once (a later
// call_received is late), so this is what brokers claim to publish the ringing once, and what
// desks drop repeats by.
func PopupID(orgID, provider, providerCallID string) string {
	// The domain keeps the id from sharing its digits with CallID's, taken from the same key.
	sum := store.KeySum("callwire popup\x00", orgID, provider, providerCallID)
	return hex.EncodeToString(sum[:16])
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// A []popup.Client always marshals; keep the stored matches rather than fail the call.
		return nil
	}
	return b
}

func newEventID() string { return uuid.Must(uuid.NewV7()).String() }

// eventIDs returns a source of n new event IDs (UUIDv7, as newEventID makes them) whose
// randomness is read from the system at once rather than in one call per ID: under batches, a
// system call per event was a sixth of the service's own CPU.
func eventIDs(n int) func() string {
	if n <= 1 {
		return newEventID
	}
	r := bufio.NewReaderSize(rand.Reader, 16*n)
	return func() string { return uuid.Must(uuid.NewV7FromReader(r)).String() }
}

// reqLog logs on behalf of one request: every line carries the request's trace and organization
// ids. They are added per line, not up front with slog.Logger.With, since most requests log
// nothing and With formats its attributes at once.
type reqLog struct {
	l              *slog.Logger
	traceID, orgID string
}

func (r reqLog) warn(msg string, args ...any) {
	r.l.Warn(msg, append([]any{"trace_id", r.traceID, "org_id", r.orgID}, args...)...)
}

func (r reqLog) error(msg string, args ...any) {
	r.l.Error(msg, append([]any{"trace_id", r.traceID, "org_id", r.orgID}, args...)...)
}
