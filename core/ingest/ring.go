package ingest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/callwire/callwire/core/lookup"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/sdk/event"
)

// The ring: for each call that starts ringing, the caller lookup and the popup, published once,
// and the to-call-back notice after a write.

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
