package ingest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/sdk/event"
)

// The pipeline's metrics, made and registered once per Service.

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
	// a hash and a lock each time. BenchmarkCountEvents measures what this saves a request
	// against WithLabelValues (docs/decisions.md, "Metric counters are resolved once").
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

// newMetrics makes the pipeline's metrics and registers them with reg, unless reg is nil.
func newMetrics(reg prometheus.Registerer) (metrics, error) {
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
	if reg != nil {
		for _, c := range []prometheus.Collector{m.events, m.duplicates, m.callsCreated, m.popups, m.lookups, m.unavailable, m.writeDuration, m.notices} {
			if err := reg.Register(c); err != nil {
				return metrics{}, fmt.Errorf("ingest: register metrics: %w", err)
			}
		}
	}
	return m, nil
}
