// Package retention removes calls that organizations no longer keep. A Sweeper wakes at an
// interval and, for each organization with a retention (store.Org.RetentionDays), removes the
// calls whose last activity is older than that many days, with their events, through
// store.PurgeCalls: in batches of a bounded number of calls, one transaction each, with a pause
// between batches and a bounded number of batches per sweep, so that the writes of the calls
// being reported now are never held up for long.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/store"
)

// Store is what a Sweeper needs of the store.
type Store interface {
	// ListOrgs returns every organization with its RetentionDays.
	ListOrgs(ctx context.Context) ([]store.Org, error)
	// PurgeCalls removes up to limit of the organization's calls whose last activity is before
	// cutoff, with their events (see store.Store).
	PurgeCalls(ctx context.Context, orgID string, cutoff time.Time, limit int) (store.Purged, error)
}

// Options configure a Sweeper. Store, Interval, BatchSize, BatchPause and MaxBatches are
// required.
type Options struct {
	Store Store
	// Interval is the time from the end of one sweep to the start of the next.
	Interval time.Duration
	// BatchSize is the most calls one transaction removes.
	BatchSize int
	// BatchPause is the wait between two batches, which leaves the store to the writes.
	BatchPause time.Duration
	// MaxBatches is the most batches one sweep runs, over all organizations.
	MaxBatches int
	// Logger receives a line per sweep that removed something and a warning per failure; nil
	// logs nothing.
	Logger *slog.Logger
	// Registerer collects the sweeper's metrics; nil registers none.
	Registerer prometheus.Registerer
	// Now is the clock cutoffs are computed from; nil means time.Now.
	Now func() time.Time
	// Wait blocks for d or until ctx ends, whichever is first, and returns ctx.Err() in the
	// second case; nil means a timer.
	Wait func(ctx context.Context, d time.Duration) error
}

// Sweeper removes the calls organizations no longer keep. Its methods are not meant to be
// called concurrently; several Sweepers (one per replica) may share one store.
type Sweeper struct {
	o       Options
	log     *slog.Logger
	calls   prometheus.Counter
	events  prometheus.Counter
	batches prometheus.Histogram
	failed  prometheus.Counter
	last    prometheus.Gauge
}

// New validates o and returns a Sweeper, its metrics registered with o.Registerer.
func New(o Options) (*Sweeper, error) {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("a store is required"))
	}
	if o.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval must be positive, got %s", o.Interval))
	}
	if o.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("batch size must be at least 1, got %d", o.BatchSize))
	}
	if o.BatchPause < 0 {
		errs = append(errs, fmt.Errorf("batch pause must not be negative, got %s", o.BatchPause))
	}
	if o.MaxBatches < 1 {
		errs = append(errs, fmt.Errorf("max batches must be at least 1, got %d", o.MaxBatches))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Wait == nil {
		o.Wait = wait
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sweeper{o: o, log: log,
		calls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callwire_retention_calls_removed_total", Help: "Calls removed because their organization's retention had passed.",
		}),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callwire_retention_events_removed_total", Help: "Events removed with the calls of callwire_retention_calls_removed_total.",
		}),
		batches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "callwire_retention_batch_seconds", Help: "Time of one retention batch: one store transaction removing up to retention.batch_size calls.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callwire_retention_failures_total", Help: "Retention batches or organization listings that failed; the next sweep tries again.",
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "callwire_retention_last_sweep_timestamp_seconds", Help: "Unix time at which the last retention sweep ended; 0 before the first.",
		}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{s.calls, s.events, s.batches, s.failed, s.last} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("retention: register metrics: %w", err)
			}
		}
	}
	return s, nil
}

// wait is the default Options.Wait.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run sweeps once, then again Interval after each sweep ends, until ctx ends; it returns then.
// A failed sweep is logged and counted, and the next one tries again.
func (s *Sweeper) Run(ctx context.Context) {
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("retention sweep failed; the next one tries again", "error", err)
		}
		if s.o.Wait(ctx, s.o.Interval) != nil {
			return
		}
	}
}

// Cutoff is the instant before which a call's last activity must fall for an organization
// keeping calls for days (at least 1) to have it removed at now: days whole 24-hour periods
// before now.
func Cutoff(now time.Time, days int) time.Time {
	return now.Add(-time.Duration(days) * 24 * time.Hour)
}

// Sweep runs one sweep and returns what it removed. The organizations with a retention take
// one batch each in turn, each with its own cutoff taken from the clock as its batch starts,
// until every one has had a batch that removed fewer than BatchSize calls or MaxBatches
// batches have run; what is left waits for the next sweep. It waits BatchPause between
// batches. An organization whose batch fails is left out of the rest of the sweep; the error
// returned joins every failure. It returns early, with ctx's error, when ctx ends.
func (s *Sweeper) Sweep(ctx context.Context) (store.Purged, error) {
	var total store.Purged
	orgs, err := s.o.Store.ListOrgs(ctx)
	if err != nil {
		s.failed.Inc()
		return total, fmt.Errorf("retention: list organizations: %w", err)
	}
	var due []store.Org
	for _, o := range orgs {
		if o.RetentionDays > 0 {
			due = append(due, o)
		}
	}
	var errs []error
	batches := 0
	for len(due) > 0 && batches < s.o.MaxBatches {
		next := due[:0]
		for _, o := range due {
			if batches == s.o.MaxBatches {
				next = append(next, o)
				continue
			}
			if batches > 0 {
				if err := s.o.Wait(ctx, s.o.BatchPause); err != nil {
					return total, err
				}
			}
			batches++
			start := time.Now()
			p, err := s.o.Store.PurgeCalls(ctx, o.ID, Cutoff(s.o.Now(), o.RetentionDays), s.o.BatchSize)
			s.batches.Observe(time.Since(start).Seconds())
			if err != nil {
				if ctx.Err() != nil {
					return total, ctx.Err()
				}
				s.failed.Inc()
				errs = append(errs, fmt.Errorf("retention: organization %s: %w", o.ID, err))
				continue
			}
			s.calls.Add(float64(p.Calls))
			s.events.Add(float64(p.Events))
			total.Calls += p.Calls
			total.Events += p.Events
			if p.Calls == s.o.BatchSize {
				next = append(next, o)
			}
		}
		due = next
	}
	s.last.Set(float64(s.o.Now().UnixNano()) / 1e9)
	if total.Calls > 0 || len(due) > 0 {
		s.log.Info("retention sweep", "calls_removed", total.Calls, "events_removed", total.Events,
			"batches", batches, "organizations_left_for_next_sweep", len(due))
	}
	return total, errors.Join(errs...)
}
