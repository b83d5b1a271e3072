package main

import (
	"testing"
	"testing/synctest"
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

// TestStallProbe: the probe wakes once a stallPeriod and reports when stopped. On the bubble's
// clock every wakeup is on time, so there is no stall to count.
func TestStallProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop := startStallProbe(t.Context())
		time.Sleep(50*stallPeriod + stallPeriod/2)
		r := stop()
		if r != (stallReport{Wakeups: 50}) {
			t.Errorf("report = %+v, want 50 wakeups and no stall", r)
		}
	})
}
