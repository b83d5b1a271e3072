package main

import (
	"testing"
	"time"
)

// TestStallReport: a wakeup counts as a stall only past the threshold, and the latest is kept.
func TestStallReport(t *testing.T) {
	var r stallReport
	for _, over := range []time.Duration{
		20 * time.Microsecond,
		stallThreshold,                    // exactly at the threshold: not a stall
		stallThreshold + time.Microsecond, // just past it
		12 * time.Millisecond,             // a host's stop
		3 * time.Millisecond,
	} {
		r.add(over)
	}
	want := stallReport{Wakeups: 5, Stalls: 2, LatestMs: 12}
	if r != want {
		t.Errorf("report = %+v, want %+v", r, want)
	}
}

// TestStallProbe: the probe wakes about once a stallPeriod and reports when stopped.
func TestStallProbe(t *testing.T) {
	stop := startStallProbe(t.Context())
	time.Sleep(50 * stallPeriod)
	r := stop()
	if r.Wakeups == 0 {
		t.Fatalf("report = %+v, want some wakeups", r)
	}
	if r.Stalls > r.Wakeups {
		t.Errorf("report = %+v: more stalls than wakeups", r)
	}
}
