package main

import (
	"context"
	"time"
)

// stallThreshold is how late a timer probe's wakeup must be to count as a stall: the popup
// latency target at light load, so that each stall could by itself put a popup past it.
const stallThreshold = time.Duration(maxLightPopupP99ms * float64(time.Millisecond))

// stallPeriod is how long the timer probe sleeps between wakeups.
const stallPeriod = time.Millisecond

// stallReport is what a timer probe saw: a goroutine of the bench sleeping stallPeriod at a time,
// and how late its wakeups came. On a machine that has its CPUs, none comes stallThreshold late
// at light load. On a virtual machine whose host stops its CPUs for milliseconds at a time, the
// stops show here, and every latency measured meanwhile may include one.
type stallReport struct {
	Wakeups int `json:"wakeups"`
	// Stalls counts the wakeups that came over stallThreshold late.
	Stalls int `json:"stalls"`
	// LatestMs is how late the latest wakeup came, in milliseconds.
	LatestMs float64 `json:"latestMs"`
}

// add counts one wakeup that came late by over.
func (r *stallReport) add(over time.Duration) {
	r.Wakeups++
	if over > stallThreshold {
		r.Stalls++
	}
	if ms := float64(over) / float64(time.Millisecond); ms > r.LatestMs {
		r.LatestMs = ms
	}
}

// startStallProbe runs a timer probe until the returned function is called, which returns what
// it saw. The probe costs about a thousand wakeups a second; it is meant for a light load.
func startStallProbe(ctx context.Context) (stop func() stallReport) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan stallReport, 1)
	go func() {
		var r stallReport
		t := time.NewTimer(stallPeriod)
		defer t.Stop()
		for {
			start := time.Now()
			t.Reset(stallPeriod)
			select {
			case <-ctx.Done():
				done <- r
				return
			case <-t.C:
				// The time the channel carries is when the timer fired, not when this goroutine
				// got to run: a stall falls between the two.
				r.add(time.Since(start) - stallPeriod)
			}
		}
	}()
	return func() stallReport {
		cancel()
		return <-done
	}
}
