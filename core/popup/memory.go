package popup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MemoryOptions configure a Memory broker. The zero value is usable.
type MemoryOptions struct {
	// Buffer is how many popups each subscription holds for its reader; past it, new popups for
	// that subscription are dropped and counted. Zero or less means DefaultBuffer.
	Buffer int
	// Registerer receives the broker's metrics (callwire_broker_popups_total and
	// callwire_broker_subscriptions, labelled broker="memory"); nil registers nothing.
	Registerer prometheus.Registerer
	// ClaimTTL is how long a published ringing stays claimed, so that a copy of it published
	// meanwhile is a repeat. Zero or less means DefaultClaimTTL.
	ClaimTTL time.Duration
	// MaxClaims bounds the claims held at once; past it the oldest is forgotten before its time.
	// Zero or less means DefaultMaxClaims.
	MaxClaims int
}

// Memory is the in-process broker: it reaches only the subscriptions made on the same Memory, so
// only the workstations connected to this process. It is safe for concurrent use. Publish never
// waits for a subscriber: each subscription has a bounded buffer, and a popup that does not fit
// is dropped for that subscription alone.
type Memory struct {
	buffer  int
	metrics brokerMetrics
	claims  *claimSet

	mu     sync.RWMutex
	closed bool
	subs   map[route]map[*memorySub]struct{}
	// byOrg holds every subscription of an organization, whatever its locations, for its
	// to-call-back notices.
	byOrg map[string]map[*memorySub]struct{}
}

// route is one organization's location.
type route struct{ org, location string }

// NewMemory returns an in-process broker. It panics if o.Registerer refuses the broker's metrics
// for any reason other than their being registered already by another Memory, which is a
// programming error; metrics registered already are shared.
func NewMemory(o MemoryOptions) *Memory {
	return newMemory(o, time.Now)
}

// newMemory is NewMemory with the clock its claims read.
func newMemory(o MemoryOptions, now func() time.Time) *Memory {
	if o.Buffer <= 0 {
		o.Buffer = DefaultBuffer
	}
	m, err := newBrokerMetrics("memory", o.Registerer)
	if err != nil {
		panic(err)
	}
	return &Memory{buffer: o.Buffer, metrics: m, claims: newClaimSet(o.ClaimTTL, o.MaxClaims, now),
		subs: map[route]map[*memorySub]struct{}{}, byOrg: map[string]map[*memorySub]struct{}{}}
}

// MayWait reports false: a publish to this broker never waits (a full subscription buffer drops
// the popup for that subscription), whatever the organization.
func (m *Memory) MayWait(context.Context, string) bool { return false }

// Publish claims the ringing p.ID of p.OrgID for the claim TTL and, when the claim is new, queues
// p for every subscription of p.OrgID to one of p.Locations, once per subscription however many
// of its locations p names. When this broker published the ringing already within the claim TTL,
// it queues nothing and returns ErrRepeat. It fails, claiming nothing, when ctx has ended, when p
// has no organization, no id or no location, or when the broker is closed; a full subscription
// buffer is not a failure (the popup is dropped for that subscription and counted).
func (m *Memory) Publish(ctx context.Context, p Popup) error {
	if err := ctx.Err(); err != nil {
		m.metrics.failed.Inc()
		return fmt.Errorf("popup: publish: %w", err)
	}
	if err := validate(p); err != nil {
		m.metrics.failed.Inc()
		return err
	}
	p = clonePopup(p)
	var targets []*memorySub
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		m.metrics.failed.Inc()
		return ErrClosed
	}
	if !m.claims.claim(p.OrgID, p.ID) {
		m.mu.RUnlock()
		m.metrics.repeat.Inc()
		return ErrRepeat
	}
	for i, l := range p.Locations {
		for s := range m.subs[route{p.OrgID, l}] {
			// A subscription of several locations named by p is reached once.
			if i > 0 && s.coversAny(p.Locations[:i]) {
				continue
			}
			targets = append(targets, s)
		}
	}
	m.mu.RUnlock()
	m.metrics.published.Inc()
	for _, s := range targets {
		switch s.feed.send(p) {
		case sent:
			m.metrics.delivered.Inc()
		case dropped:
			m.metrics.dropped.Inc()
		}
	}
	return nil
}

// NotifyCallbacks queues a to-call-back notice for every subscription of orgID, whatever its
// locations; a subscription with a notice pending already keeps that one. It fails when ctx has
// ended, when orgID is empty, or when the broker is closed. It never waits.
func (m *Memory) NotifyCallbacks(ctx context.Context, orgID string) error {
	if err := ctx.Err(); err != nil {
		m.metrics.noticesFailed.Inc()
		return fmt.Errorf("popup: notify: %w", err)
	}
	if orgID == "" {
		m.metrics.noticesFailed.Inc()
		return errors.New("popup: notify: organization is required")
	}
	m.mu.RLock()
	if m.closed {
		m.mu.RUnlock()
		m.metrics.noticesFailed.Inc()
		return ErrClosed
	}
	targets := make([]*memorySub, 0, len(m.byOrg[orgID]))
	for s := range m.byOrg[orgID] {
		targets = append(targets, s)
	}
	m.mu.RUnlock()
	m.metrics.noticesPublished.Inc()
	for _, s := range targets {
		s.feed.notify()
	}
	return nil
}

// Subscribe starts a subscription to orgID's popups for locations. It fails when ctx has ended,
// when orgID or locations are empty, or when the broker is closed. The subscription ends when it
// is closed (Err nil), when ctx ends (Err is ctx's error), or when the broker is closed (Err is
// ErrClosed).
func (m *Memory) Subscribe(ctx context.Context, orgID string, locations []string) (Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("popup: subscribe: %w", err)
	}
	locs, err := subscribedLocations(orgID, locations)
	if err != nil {
		return nil, err
	}
	s := &memorySub{m: m, org: orgID, locations: locs, feed: newFeed(m.buffer)}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	for _, l := range locs {
		r := route{orgID, l}
		if m.subs[r] == nil {
			m.subs[r] = map[*memorySub]struct{}{}
		}
		m.subs[r][s] = struct{}{}
	}
	if m.byOrg[orgID] == nil {
		m.byOrg[orgID] = map[*memorySub]struct{}{}
	}
	m.byOrg[orgID][s] = struct{}{}
	m.mu.Unlock()
	m.metrics.subscriptions.Inc()
	s.watch(ctx, s.finish)
	return s, nil
}

// Close ends every subscription (their Err is ErrClosed); later Publish and Subscribe calls fail
// with ErrClosed. It is safe to call more than once.
func (m *Memory) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	var all []*memorySub
	seen := map[*memorySub]bool{}
	for _, set := range m.subs {
		for s := range set {
			if !seen[s] {
				seen[s] = true
				all = append(all, s)
			}
		}
	}
	m.subs = map[route]map[*memorySub]struct{}{}
	m.byOrg = map[string]map[*memorySub]struct{}{}
	m.mu.Unlock()
	for _, s := range all {
		s.finish(ErrClosed)
	}
	return nil
}

// remove takes s out of the routing table.
func (m *Memory) remove(s *memorySub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range s.locations {
		r := route{s.org, l}
		delete(m.subs[r], s)
		if len(m.subs[r]) == 0 {
			delete(m.subs, r)
		}
	}
	delete(m.byOrg[s.org], s)
	if len(m.byOrg[s.org]) == 0 {
		delete(m.byOrg, s.org)
	}
}

// memorySub is one subscription on a Memory broker.
type memorySub struct {
	m         *Memory
	org       string
	locations []string
	feed      *feed

	ctxWatch
}

func (s *memorySub) coversAny(locations []string) bool {
	for _, l := range locations {
		for _, mine := range s.locations {
			if l == mine {
				return true
			}
		}
	}
	return false
}

// finish ends the subscription with err as its reason; only the first call counts.
func (s *memorySub) finish(err error) {
	if !s.feed.end(err) {
		return
	}
	s.markFinished()
	s.m.remove(s)
	s.m.metrics.subscriptions.Dec()
}

// Popups implements Subscription.
func (s *memorySub) Popups() <-chan Popup { return s.feed.ch }

// Callbacks implements Subscription.
func (s *memorySub) Callbacks() <-chan struct{} { return s.feed.notices }

// Err implements Subscription.
func (s *memorySub) Err() error { return s.feed.reason() }

// Close implements Subscription.
func (s *memorySub) Close() error {
	s.finish(nil)
	return nil
}
