package main

import (
	"bytes"
	"testing"
)

func TestParseRuntime(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		ok         bool
		alloc, gcs float64
	}{
		{"both", "# HELP go_gc_duration_seconds x\ngo_gc_duration_seconds{quantile=\"0\"} 1e-05\ngo_gc_duration_seconds_sum 0.0002\ngo_gc_duration_seconds_count 3\ngo_memstats_alloc_bytes_total 2.1426368e+07\n", true, 2.1426368e+07, 3},
		{"allocations only", "go_memstats_alloc_bytes_total 5\n", false, 0, 0},
		{"collections only", "go_gc_duration_seconds_count 5\n", false, 0, 0},
		{"not a number", "go_memstats_alloc_bytes_total x\ngo_gc_duration_seconds_count 1\n", false, 0, 0},
		{"empty", "", false, 0, 0},
		{"a similar name is not taken", "go_memstats_alloc_bytes 9\ngo_memstats_alloc_bytes_total 7\ngo_gc_duration_seconds_count 1\n", true, 7, 1},
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
	f.Add([]byte("go_memstats_alloc_bytes_total 1\ngo_gc_duration_seconds_count 2\n"))
	f.Add([]byte("go_gc_duration_seconds_count NaN\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s := parseRuntime(body)
		if s.ok && (!bytes.Contains(body, []byte("go_memstats_alloc_bytes_total ")) || !bytes.Contains(body, []byte("go_gc_duration_seconds_count "))) {
			t.Fatalf("read %+v from a body without both figures: %q", s, body)
		}
	})
}
