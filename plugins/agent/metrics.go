package agent

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/sdk/outbox"
)

// metrics are the agent's Prometheus metrics. The outbox gauges are refreshed from the outbox
// every second while Run runs; the translators' health is read when the metrics are scraped.
type metrics struct {
	health *healthCollector

	accepted *prometheus.CounterVec
	refused  *prometheus.CounterVec
	sent     *prometheus.CounterVec
	retried  *prometheus.CounterVec
	dead     *prometheus.CounterVec
	requests *prometheus.CounterVec
	latency  prometheus.Histogram

	queued   *prometheus.GaugeVec
	oldest   *prometheus.GaugeVec
	total    prometheus.Gauge
	bytes    prometheus.Gauge
	inFlight prometheus.Gauge
	maxEv    prometheus.Gauge
	maxBytes prometheus.Gauge
	deadAll  prometheus.Gauge
}

func newMetrics(rows func(time.Time) []healthRow) *metrics {
	tr := []string{"translator"}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	return &metrics{
		health: &healthCollector{rows: rows,
			up: prometheus.NewDesc("callwire_translator_up",
				"1 while the translator's process runs and its last health check passed, else 0.", tr, nil),
			restarts: prometheus.NewDesc("callwire_translator_restarts_total",
				"Launches of the translator after its first, since the agent started.", tr, nil),
			since: prometheus.NewDesc("callwire_translator_seconds_since_last_event",
				"Seconds since the translator last handed the agent an event, or since the agent started when it has handed none.", tr, nil),
		},
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "callwire_agent_events_accepted_total",
			Help: "Events stored in the outbox, by translator."}, tr),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "callwire_agent_events_refused_total",
			Help: "Events the agent refused to take (reason: invalid, too_large, full, closed, error), by translator."},
			[]string{"translator", "reason"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "callwire_agent_events_sent_total",
			Help: "Events the core acknowledged with 2xx, by translator."}, tr),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "callwire_agent_events_retried_total",
			Help: "Events kept after a failed attempt to be sent again, once per attempt, by translator."}, tr),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "callwire_agent_events_dead_lettered_total",
			Help: "Events the core refused for good and the agent moved to the dead-letter file, by translator."}, tr),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "callwire_agent_requests_total",
			Help: "Requests to the core by outcome: sent, retry, refused_config, split, dead_letter."},
			[]string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "callwire_agent_request_seconds",
			Help: "Time one request to the core took.", Buckets: prometheus.DefBuckets}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "callwire_agent_events_queued",
			Help: "Events waiting in the outbox (in flight included), by translator."}, tr),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "callwire_agent_oldest_queued_seconds",
			Help: "Age of the oldest event waiting in the outbox, by translator; 0 when none waits."}, tr),
		total:    gauge("callwire_agent_outbox_events", "Events in the outbox."),
		bytes:    gauge("callwire_agent_outbox_bytes", "Bytes of event JSON in the outbox."),
		inFlight: gauge("callwire_agent_outbox_in_flight", "Events being sent now."),
		maxEv:    gauge("callwire_agent_outbox_max_events", "The outbox's limit on events (outbox.max_events)."),
		maxBytes: gauge("callwire_agent_outbox_max_bytes", "The outbox's limit on bytes (outbox.max_bytes)."),
		deadAll:  gauge("callwire_agent_dead_letters", "Dead letters the outbox has kept, ever."),
	}
}

// register adds every metric to r.
func (m *metrics) register(r prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{m.health, m.accepted, m.refused, m.sent, m.retried, m.dead, m.requests,
		m.latency, m.queued, m.oldest, m.total, m.bytes, m.inFlight, m.maxEv, m.maxBytes, m.deadAll} {
		errs = append(errs, r.Register(c))
	}
	return errors.Join(errs...)
}

// refresh sets the outbox gauges from st; every translator in names gets a value, 0 when none
// of its events waits.
func (m *metrics) refresh(st outbox.Stats, names []string, now time.Time) {
	for _, name := range names {
		s := st.Sources[name]
		m.queued.WithLabelValues(name).Set(float64(s.Queued))
		age := 0.0
		if s.Queued > 0 {
			age = now.Sub(s.Oldest).Seconds()
		}
		m.oldest.WithLabelValues(name).Set(age)
	}
	m.total.Set(float64(st.Queued))
	m.bytes.Set(float64(st.Bytes))
	m.inFlight.Set(float64(st.InFlight))
	m.maxEv.Set(float64(st.MaxEvents))
	m.maxBytes.Set(float64(st.MaxBytes))
	m.deadAll.Set(float64(st.DeadLettered))
}

// healthRow is one translator's row of the health metrics.
type healthRow struct {
	name     string
	known    bool // its process is reported (up and restarts have values)
	up       bool
	restarts int
	since    time.Duration
}

// healthCollector serves the translators' health from rows, read at each scrape.
type healthCollector struct {
	rows                func(now time.Time) []healthRow
	up, restarts, since *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.restarts
	ch <- c.since
}

// Collect implements prometheus.Collector.
func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.rows(time.Now()) {
		if r.known {
			up := 0.0
			if r.up {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, r.name)
			ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(r.restarts), r.name)
		}
		ch <- prometheus.MustNewConstMetric(c.since, prometheus.GaugeValue, r.since.Seconds(), r.name)
	}
}
