package ingest

import (
	"testing"

	"github.com/callwire/callwire/sdk/event"
)

// BenchmarkCountEvents counts the events of a batch of ten calls of five events each, as a
// request stored in full does (one per event), two ways: through the counters resolved at start
// (countEvent) and through the vector's WithLabelValues. An op is one batch, as in
// BenchmarkIngest's "batch of 10 calls", whose op is the whole request.
func BenchmarkCountEvents(b *testing.B) {
	m, err := newMetrics(nil)
	if err != nil {
		b.Fatal(err)
	}
	var types []event.Type
	for range 10 {
		types = append(types, event.CallReceived, event.CallAnswered, event.CallEnded, event.CallRecorded, event.CallTranscribed)
	}
	b.Run("resolved", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, t := range types {
				m.countEvent(t, false)
			}
		}
	})
	b.Run("WithLabelValues", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, t := range types {
				m.events.WithLabelValues(string(t), "stored").Inc()
			}
		}
	})
}
