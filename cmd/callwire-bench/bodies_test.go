package main

import (
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// TestBodies checks that every body of a call is what the endpoint accepts, carries the events
// the bench counts, names one call, and has the size of a realistic report.
func TestBodies(t *testing.T) {
	mix := newCallMix()
	now := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
	bodies := mix.bodies("r1-service", 7, 42, now)
	wantID := "r1-service-w7-42@pbx.clinic.example"
	for k, b := range bodies {
		events, batch, err := event.ParseBody(b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", reqName(k), err, b)
		}
		if int64(len(events)) != reqEvents(k) || batch != (k == reqTail) {
			t.Errorf("%s: %d events (batch %v), want %d", reqName(k), len(events), batch, reqEvents(k))
		}
		for _, e := range events {
			if e.Event.ProviderCallID != wantID {
				t.Errorf("%s: providerCallId %q, want %q", reqName(k), e.Event.ProviderCallID, wantID)
			}
			if e.Event.OccurredAt.After(now) {
				t.Errorf("%s: occurredAt %v is after %v", reqName(k), e.Event.OccurredAt, now)
			}
		}
		t.Logf("%s: %d bytes", reqName(k), len(b))
	}
	if n := len(bodies[reqReceived]); n < 600 || n > 900 {
		t.Errorf("call_received body is %d bytes, want 600 to 900", n)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50 * time.Millisecond}, {99, 99 * time.Millisecond}, {100, 100 * time.Millisecond}, {1, time.Millisecond}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median = %v, want 2", got)
	}
	if got := median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("median = %v, want 2.5", got)
	}
}
