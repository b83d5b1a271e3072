// Package ingest is callwire's write pipeline for one report: plan the write, ask the clinic's
// client system who is calling, publish the popup, then store the calls and events in one
// atomic write. It is transport-agnostic; the HTTP layer authenticates and decodes, then calls
// Service.Ingest.
package ingest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

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
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
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
