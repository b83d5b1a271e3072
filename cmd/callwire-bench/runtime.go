package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
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

// parseRuntime reads the bytes allocated and the collections from a Prometheus text exposition.
func parseRuntime(body []byte) runtimeSample {
	var s runtimeSample
	var haveAlloc, haveGCs bool
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case "go_memstats_alloc_bytes_total":
			dst, haveAlloc = &s.allocated, true
		case "go_gc_duration_seconds_count":
			dst, haveGCs = &s.gcs, true
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return runtimeSample{}
		}
		*dst = v
	}
	s.ok = haveAlloc && haveGCs && sc.Err() == nil
	return s
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
