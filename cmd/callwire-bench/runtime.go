package main

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// runtimeSample is what the server's /metrics told of its Go runtime at one moment.
type runtimeSample struct {
	allocated float64 // bytes allocated since the server started (go_memstats_alloc_bytes_total)
	gcs       float64 // collections since the server started (go_gc_duration_seconds_count)
	ok        bool    // both figures were read
}

// sampleRuntime reads the server's /metrics at base (http://host:port). It reports ok false when
// the server does not answer in time or does not give both figures.
func sampleRuntime(ctx context.Context, client *http.Client, base string) runtimeSample {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return runtimeSample{}
	}
	resp, err := client.Do(req)
	if err != nil {
		return runtimeSample{}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return runtimeSample{}
	}
	return parseRuntime(body)
}

// parseRuntime reads the bytes allocated (the counter go_memstats_alloc_bytes_total) and the
// collections (the count of the summary go_gc_duration_seconds) from a Prometheus text
// exposition, as the server's client_golang registry writes it. It reports ok false unless the
// exposition parses and holds both, each with one sample.
func parseRuntime(body []byte) runtimeSample {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return runtimeSample{}
	}
	alloc, gcs := families["go_memstats_alloc_bytes_total"], families["go_gc_duration_seconds"]
	if alloc == nil || gcs == nil || len(alloc.GetMetric()) != 1 || len(gcs.GetMetric()) != 1 {
		return runtimeSample{}
	}
	counter, summary := alloc.GetMetric()[0].GetCounter(), gcs.GetMetric()[0].GetSummary()
	if counter == nil || summary == nil {
		return runtimeSample{}
	}
	return runtimeSample{allocated: counter.GetValue(), gcs: float64(summary.GetSampleCount()), ok: true}
}

// runtimeDelta returns the bytes the server allocated per event and its collections per 10,000
// events between a and b, over events events; nil when either sample failed or no event was
// stored.
func runtimeDelta(a, b runtimeSample, events int64) (bytesPerEvent, gcsPer10k *float64) {
	if !a.ok || !b.ok || events <= 0 || b.allocated < a.allocated || b.gcs < a.gcs {
		return nil, nil
	}
	bpe := (b.allocated - a.allocated) / float64(events)
	gcs := (b.gcs - a.gcs) / float64(events) * 10_000
	return &bpe, &gcs
}
