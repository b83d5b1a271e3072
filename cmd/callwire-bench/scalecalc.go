package main

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// serverGauges is what the server's /metrics told at one moment of the figures a held stream
// costs.
type serverGauges struct {
	Goroutines float64 `json:"goroutines"`      // go_goroutines
	HeapAlloc  float64 `json:"heapAllocBytes"`  // go_memstats_heap_alloc_bytes
	StackInuse float64 `json:"stackInuseBytes"` // go_memstats_stack_inuse_bytes
	Sys        float64 `json:"sysBytes"`        // go_memstats_sys_bytes
	RSS        float64 `json:"rssBytes"`        // process_resident_memory_bytes
	OpenFDs    float64 `json:"openFds"`         // process_open_fds
	Streams    float64 `json:"streamsOpen"`     // callwire_popup_streams_open
}

// gaugeNames are the metrics parseGauges reads, each a gauge with one sample.
var gaugeNames = []string{
	"go_goroutines", "go_memstats_heap_alloc_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes",
	"process_resident_memory_bytes", "process_open_fds", "callwire_popup_streams_open",
}

// parseGauges reads the gauges of serverGauges from a Prometheus text exposition, as the server's
// client_golang registry writes it. It fails unless the exposition parses and holds every one of
// them as a gauge with one sample.
func parseGauges(body []byte) (serverGauges, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return serverGauges{}, fmt.Errorf("parse metrics: %w", err)
	}
	v := make(map[string]float64, len(gaugeNames))
	for _, name := range gaugeNames {
		f := families[name]
		if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
			return serverGauges{}, fmt.Errorf("metrics: no gauge %s with one sample", name)
		}
		v[name] = f.GetMetric()[0].GetGauge().GetValue()
	}
	return serverGauges{
		Goroutines: v["go_goroutines"], HeapAlloc: v["go_memstats_heap_alloc_bytes"],
		StackInuse: v["go_memstats_stack_inuse_bytes"], Sys: v["go_memstats_sys_bytes"],
		RSS: v["process_resident_memory_bytes"], OpenFDs: v["process_open_fds"], Streams: v["callwire_popup_streams_open"],
	}, nil
}

// settled folds the samples taken while a level of streams was held into one: the least heap
// allocated (the heap just after a collection, the closest /metrics comes to the live heap,
// since an idle server's heap saws between its live size and the next collection's goal) and
// the last of every other figure. It fails on no samples.
func settled(samples []serverGauges) (serverGauges, error) {
	if len(samples) == 0 {
		return serverGauges{}, errors.New("no samples of the server's metrics")
	}
	out := samples[len(samples)-1]
	for _, s := range samples {
		out.HeapAlloc = min(out.HeapAlloc, s.HeapAlloc)
	}
	return out, nil
}

// streamLevel is the server holding a number of open streams: its settled gauges, the resident
// memory of the Redis server behind it (0 with the in-process broker), and the CPU it spent
// per second while holding them (heartbeats and the key's re-check at each).
type streamLevel struct {
	Streams       int          `json:"streams"` // held, by the server's own count
	Opened        int          `json:"opened"`  // opened by the bench, some of which may have ended`
	Server        serverGauges `json:"server"`
	RedisRSS      float64      `json:"redisRssBytes,omitempty"`
	ServerCores   float64      `json:"serverCores"`
	PostgresCores float64      `json:"postgresCores"`
}

// streamSlope is what each stream added between two levels: the difference of each figure over
// the difference of streams.
type streamSlope struct {
	From, To         int     `json:"-"`
	Span             string  `json:"span"` // "1000→5000"
	RSSBytes         float64 `json:"rssBytesPerStream"`
	HeapBytes        float64 `json:"heapBytesPerStream"`
	StackBytes       float64 `json:"stackBytesPerStream"`
	Goroutines       float64 `json:"goroutinesPerStream"`
	FDs              float64 `json:"fdsPerStream"`
	RedisRSSBytes    float64 `json:"redisRssBytesPerStream,omitempty"`
	ServerCoresPer1k float64 `json:"serverCoresPer1000Streams"`
}

// slopes returns the slope between each level and the next, levels taken in order of streams.
// A pair with the same number of streams has no slope and is skipped.
func slopes(levels []streamLevel) []streamSlope {
	ls := slices.Clone(levels)
	slices.SortStableFunc(ls, func(a, b streamLevel) int { return a.Streams - b.Streams })
	var out []streamSlope
	for i := 1; i < len(ls); i++ {
		a, b := ls[i-1], ls[i]
		n := float64(b.Streams - a.Streams)
		if n == 0 {
			continue
		}
		out = append(out, streamSlope{
			From: a.Streams, To: b.Streams, Span: strconv.Itoa(a.Streams) + "→" + strconv.Itoa(b.Streams),
			RSSBytes:         (b.Server.RSS - a.Server.RSS) / n,
			HeapBytes:        (b.Server.HeapAlloc - a.Server.HeapAlloc) / n,
			StackBytes:       (b.Server.StackInuse - a.Server.StackInuse) / n,
			Goroutines:       (b.Server.Goroutines - a.Server.Goroutines) / n,
			FDs:              (b.Server.OpenFDs - a.Server.OpenFDs) / n,
			RedisRSSBytes:    (b.RedisRSS - a.RedisRSS) / n,
			ServerCoresPer1k: (b.ServerCores - a.ServerCores) / n * 1000,
		})
	}
	return out
}

// parseLevels reads a comma-separated list of positive stream counts, strictly increasing, each
// at most limit.
func parseLevels(s string, limit int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > limit {
			return nil, fmt.Errorf("%q is not a number from 1 to %d", strings.TrimSpace(f), limit)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("%d does not exceed %d: list the levels in increasing order", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}

// perEvent is the CPU time a process spent per event, in microseconds; 0 when no event was
// stored.
func perEvent(cpuSeconds float64, events int64) float64 {
	if events <= 0 {
		return 0
	}
	return cpuSeconds / float64(events) * 1e6
}

// eventsPerCore is how many events a second one core carries when each event costs usPerEvent
// microseconds of CPU; 0 when the cost is not positive.
func eventsPerCore(usPerEvent float64) float64 {
	if usPerEvent <= 0 {
		return 0
	}
	return 1e6 / usPerEvent
}
