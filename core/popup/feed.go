package popup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrClosed is the error of an operation on a closed broker, and the Err of a subscription that
// ended because its broker was closed.
var ErrClosed = errors.New("popup: broker closed")

// ErrRepeat is what Publish returns for a popup whose ringing was published already: another
// popup of the same organization and id was published through the broker, or through any broker
// sharing its claims, less than the claim TTL ago. Nothing was delivered, and nothing failed.
var ErrRepeat = errors.New("popup: repeat of a ringing published already")

// DefaultBuffer is how many popups a subscription holds for a reader that has not taken them yet,
// when the broker's options name no size. Past it, new popups for that subscription are dropped.
const DefaultBuffer = 64

// feed is the delivery end every subscription shares: a bounded channel that is closed once, with
// the reason it ended.
type feed struct {
	ch chan Popup
	// notices holds at most one pending to-call-back notice.
	notices chan struct{}
	mu      sync.Mutex
	done    bool
	err     error
}

func newFeed(buffer int) *feed {
	return &feed{ch: make(chan Popup, buffer), notices: make(chan struct{}, 1)}
}

// sendResult is what became of one popup offered to a feed.
type sendResult int

const (
	sent    sendResult = iota // queued for the reader
	dropped                   // the buffer was full
	ended                     // the feed had ended
)

// send queues p without waiting.
func (f *feed) send(p Popup) sendResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return ended
	}
	select {
	case f.ch <- p:
		return sent
	default:
		return dropped
	}
}

// notify queues a to-call-back notice without waiting; one already pending covers it. It
// reports whether the feed still runs.
func (f *feed) notify() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	select {
	case f.notices <- struct{}{}:
	default: // a notice is pending: the reader will read the list after this write anyway
	}
	return true
}

// end closes the channel with err as the reason; only the first call counts. It reports whether
// this call ended the feed.
func (f *feed) end(err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	f.done, f.err = true, err
	close(f.ch)
	close(f.notices)
	return true
}

func (f *feed) reason() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// validate checks what every broker needs of a popup to route it.
func validate(p Popup) error {
	if p.OrgID == "" {
		return errors.New("popup: publish: organization is required")
	}
	if p.ID == "" {
		return errors.New("popup: publish: id is required")
	}
	if len(p.Locations) == 0 {
		return errors.New("popup: publish: at least one location is required")
	}
	for _, l := range p.Locations {
		if l == "" {
			return errors.New("popup: publish: empty location")
		}
	}
	return nil
}

// subscribedLocations checks a Subscribe request and returns its locations without repeats.
func subscribedLocations(orgID string, locations []string) ([]string, error) {
	if orgID == "" {
		return nil, errors.New("popup: subscribe: organization is required")
	}
	if len(locations) == 0 {
		return nil, errors.New("popup: subscribe: at least one location is required")
	}
	out := make([]string, 0, len(locations))
	for _, l := range locations {
		if l == "" {
			return nil, errors.New("popup: subscribe: empty location")
		}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out, nil
}

// clonePopup copies what p points to, so that a publisher reusing its popup cannot change what
// subscribers read.
func clonePopup(p Popup) Popup {
	p.Locations = slices.Clone(p.Locations)
	p.Clients = slices.Clone(p.Clients)
	if p.From != nil {
		from := *p.From
		p.From = &from
	}
	if p.To != nil {
		to := *p.To
		p.To = &to
	}
	return p
}

// brokerMetrics are the counters every broker keeps, each outcome's resolved once: every popup
// counts one or two, and resolving a label value takes a hash and a lock each time (core/ingest's
// BenchmarkCountEvents measures what resolving once saves).
type brokerMetrics struct {
	published     prometheus.Counter // popups taken by the broker
	failed        prometheus.Counter // publishes that failed
	repeat        prometheus.Counter // publishes of a ringing claimed already, delivered to nobody
	delivered     prometheus.Counter // popups queued for a subscription
	dropped       prometheus.Counter // popups lost because a subscription's buffer was full
	malformed     prometheus.Counter // messages on a popup channel that were not a popup
	subscriptions prometheus.Gauge   // subscriptions running
	// To-call-back notices: taken by the broker, and failed.
	noticesPublished, noticesFailed prometheus.Counter
}

// newBrokerMetrics makes the broker's metrics, labelled broker=kind, and registers them with reg
// (nil registers nothing). Metrics already registered by another broker of the same kind are
// shared.
func newBrokerMetrics(kind string, reg prometheus.Registerer) (brokerMetrics, error) {
	labels := prometheus.Labels{"broker": kind}
	popups := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "callwire_broker_popups_total",
		Help:        "Popups handled by the popup broker, by outcome: published, failed (publish failed), repeat (the ringing was published already, so not again), delivered (queued for a subscription), dropped (a subscription's buffer was full), malformed (a message that was not a popup).",
		ConstLabels: labels,
	}, []string{"outcome"})
	notices := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "callwire_broker_callback_notices_total",
		Help:        "To-call-back notices (an organization's list may have changed) handled by the popup broker, by outcome: published, failed.",
		ConstLabels: labels,
	}, []string{"outcome"})
	subs := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "callwire_broker_subscriptions",
		Help:        "Popup subscriptions running on this process.",
		ConstLabels: labels,
	})
	if reg != nil {
		var err error
		if popups, err = registerCounterVec(reg, popups); err != nil {
			return brokerMetrics{}, err
		}
		if notices, err = registerCounterVec(reg, notices); err != nil {
			return brokerMetrics{}, err
		}
		if err := reg.Register(subs); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return brokerMetrics{}, fmt.Errorf("popup: register metrics: %w", err)
			}
			existing, ok := are.ExistingCollector.(prometheus.Gauge)
			if !ok {
				return brokerMetrics{}, fmt.Errorf("popup: register metrics: %w", err)
			}
			subs = existing
		}
	}
	return brokerMetrics{
		published:     popups.WithLabelValues("published"),
		failed:        popups.WithLabelValues("failed"),
		repeat:        popups.WithLabelValues("repeat"),
		delivered:     popups.WithLabelValues("delivered"),
		dropped:       popups.WithLabelValues("dropped"),
		malformed:     popups.WithLabelValues("malformed"),
		subscriptions: subs,

		noticesPublished: notices.WithLabelValues("published"),
		noticesFailed:    notices.WithLabelValues("failed"),
	}, nil
}

// registerCounterVec registers c with reg and returns it, or the vector registered already under
// its name by another broker of the same kind.
func registerCounterVec(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		return nil, fmt.Errorf("popup: register metrics: %w", err)
	}
	existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
	if !ok {
		return nil, fmt.Errorf("popup: register metrics: %w", err)
	}
	return existing, nil
}

// ctxWatch ends a subscription when its Subscribe context ends, and stops watching once the
// subscription has ended for any reason. Both brokers' subscriptions embed it.
type ctxWatch struct {
	mu       sync.Mutex
	finished bool
	stop     func() bool
}

// watch runs finish with ctx's error when ctx ends, unless the subscription has already
// finished (then there is nothing to watch).
func (w *ctxWatch) watch(ctx context.Context, finish func(error)) {
	stop := context.AfterFunc(ctx, func() { finish(ctx.Err()) })
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		stop()
		return
	}
	w.stop = stop
	w.mu.Unlock()
}

// markFinished records that the subscription has ended and stops watching its context. It
// reports false when the subscription had ended already.
func (w *ctxWatch) markFinished() bool {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return false
	}
	w.finished = true
	stop := w.stop
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	return true
}

// UniqueLocations returns ls without repeats, in the order first seen.
func UniqueLocations(ls []string) []string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}
