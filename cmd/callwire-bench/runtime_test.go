package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// typedExposition is a Prometheus text exposition of the two figures as client_golang writes
// them, with the types that tell a summary's count from a counter.
const typedExposition = `# HELP go_gc_duration_seconds x
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 1e-05
go_gc_duration_seconds_sum 0.0002
go_gc_duration_seconds_count 3
# TYPE go_memstats_alloc_bytes counter
go_memstats_alloc_bytes 9
# TYPE go_memstats_alloc_bytes_total counter
go_memstats_alloc_bytes_total 2.1426368e+07
`

func TestParseRuntime(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		ok         bool
		alloc, gcs float64
	}{
		{"both, a similar name beside them", typedExposition, true, 2.1426368e+07, 3},
		{"allocations only", "# TYPE go_memstats_alloc_bytes_total counter\ngo_memstats_alloc_bytes_total 5\n", false, 0, 0},
		{"collections only", "# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds_count 5\n", false, 0, 0},
		{"untyped: the count is not a summary's", "go_memstats_alloc_bytes_total 7\ngo_gc_duration_seconds_count 1\n", false, 0, 0},
		{"not a number", strings.Replace(typedExposition, "_total 2.1426368e+07", "_total x", 1), false, 0, 0},
		{"two samples of the counter", typedExposition + "go_memstats_alloc_bytes_total{a=\"b\"} 1\n", false, 0, 0},
		{"empty", "", false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := parseRuntime([]byte(tt.body))
			if s.ok != tt.ok || (tt.ok && (s.allocated != tt.alloc || s.gcs != tt.gcs)) {
				t.Errorf("parseRuntime = %+v, want ok %v, %v bytes, %v collections", s, tt.ok, tt.alloc, tt.gcs)
			}
		})
	}
}

// TestParseRuntimeReadsTheGoCollector reads what a registry with the Go collector exposes, as the
// server's /metrics does.
func TestParseRuntimeReadsTheGoCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	enc := expfmt.NewEncoder(&body, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	if s := parseRuntime(body.Bytes()); !s.ok || s.allocated <= 0 {
		t.Errorf("parseRuntime of the Go collector's exposition = %+v, want both figures, bytes allocated above 0", s)
	}
}

func TestRuntimeDelta(t *testing.T) {
	a := runtimeSample{allocated: 1000, gcs: 1, ok: true}
	b := runtimeSample{allocated: 21000, gcs: 3, ok: true}
	bpe, gcs := runtimeDelta(a, b, 10)
	if bpe == nil || *bpe != 2000 || gcs == nil || *gcs != 2000 {
		t.Errorf("delta = %v, %v; want 2000 bytes an event and 2000 collections per 10,000", bpe, gcs)
	}
	for _, c := range []struct {
		a, b   runtimeSample
		events int64
	}{{runtimeSample{}, b, 10}, {a, runtimeSample{}, 10}, {a, b, 0}, {b, a, 10}} {
		if x, y := runtimeDelta(c.a, c.b, c.events); x != nil || y != nil {
			t.Errorf("delta of %+v to %+v over %d events = %v, %v; want none", c.a, c.b, c.events, x, y)
		}
	}
}

func FuzzParseRuntime(f *testing.F) {
	f.Add([]byte(typedExposition))
	f.Add([]byte("go_memstats_alloc_bytes_total 1\ngo_gc_duration_seconds_count 2\n"))
	f.Add([]byte("# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds_count NaN\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := parseRuntime(body)
		if s.ok && (!bytes.Contains(body, []byte("go_memstats_alloc_bytes_total")) || !bytes.Contains(body, []byte("go_gc_duration_seconds"))) {
			t.Fatalf("read %+v from a body without both figures: %q", s, body)
		}
	})
}
