package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_total", Help: "h"}, []string{"route", "status"})
	open := prometheus.NewGauge(prometheus.GaugeOpts{Name: "open", Help: "h"})
	seconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "seconds", Help: "h"}, []string{"route"})
	reg.MustRegister(requests, open, seconds)
	requests.WithLabelValues("/a", "200").Add(3)
	requests.WithLabelValues("/a", "500").Add(1)
	requests.WithLabelValues("/b", "200").Add(5)
	open.Set(2)
	seconds.WithLabelValues("/a").Observe(0.1)
	seconds.WithLabelValues("/b").Observe(0.2)
	seconds.WithLabelValues("/b").Observe(0.3)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"requests_total", []string{"route", "/a", "status", "200"}, 3},
		{"requests_total", []string{"route", "/a"}, 4},
		{"requests_total", nil, 9},
		{"requests_total", []string{"status", "404"}, 0},
		{"open", nil, 2},
		{"seconds", nil, 3},
		{"seconds", []string{"route", "/b"}, 2},
		{"absent", nil, 0},
	} {
		if got := Sum(t, reg, tc.name, tc.labels...); got != tc.want {
			t.Errorf("Sum(%s, %q) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
