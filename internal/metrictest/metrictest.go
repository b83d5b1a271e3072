// Package metrictest reads what a Prometheus registry holds, for tests of the metrics a package
// registers.
package metrictest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Sum returns the sum, over the series of the metric name in reg whose labels include every
// name/value pair in labels (given as name, value, name, value...; every series when none), of
// a counter's or a gauge's value or a histogram's count of observations. It is 0 when no series
// matches, as for a counter that has not counted yet. It fails t when reg cannot be gathered or
// labels are not in pairs.
func Sum(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	if len(labels)%2 != 0 {
		t.Fatalf("metrictest: labels %q are not name/value pairs", labels)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("metrictest: gather: %v", err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := make(map[string]string, len(m.GetLabel()))
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i < len(labels); i += 2 {
				if v, ok := have[labels[i]]; !ok || v != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}
