package main

import (
	"io"
	"slices"
	"testing"
)

func TestParseFlagsGrowth(t *testing.T) {
	for _, c := range []struct {
		args      []string
		growth    bool
		popupLeft bool // the popup phases still run
		ok        bool
	}{
		{[]string{"-store=sqlite"}, false, true, true},
		{[]string{"-store=sqlite", "-preload=1000"}, false, true, true},
		{[]string{"-store=sqlite", "-preload=1000", "-growth"}, true, false, true},
		{[]string{"-store=sqlite", "-growth"}, false, false, false}, // nothing to preload
		{[]string{"-store=sqlite", "-preload=1000", "-growth", "-cpuprofile=/tmp/p"}, false, false, false},
	} {
		o, err := parseFlags(c.args, io.Discard)
		if (err == nil) != c.ok {
			t.Errorf("%q: error %v, want ok %v", c.args, err, c.ok)
			continue
		}
		if c.ok && (o.growth != c.growth || (o.popupPhase > 0) != c.popupLeft) {
			t.Errorf("%q: growth %v, popup phase %v; want growth %v, popup phases %v", c.args, o.growth, o.popupPhase, c.growth, c.popupLeft)
		}
	}
}

// growthOf pairs each round's phase on the full store with the same round's on the empty one.
func TestGrowthOf(t *testing.T) {
	phases := func(rates map[string][]float64) []phaseReport {
		var ps []phaseReport
		for round := 1; round <= 3; round++ {
			for _, kind := range phaseKinds() {
				if r := rates[kind]; len(r) >= round {
					ps = append(ps, phaseReport{Kind: kind, Round: round, EventsPerSec: r[round-1]})
				}
			}
		}
		return ps
	}
	// The medians are what mixAcc.finish sets: service 100 and 90, raw 100 and 95.
	empty := []mixReport{{Mix: mixBulk, ServiceEventsPerSec: 100, RawEventsPerSec: 100, Phases: phases(map[string][]float64{
		"service": {100, 200, 100},
		"raw":     {100, 100, 100},
	})}}
	full := []mixReport{{Mix: mixBulk, ServiceEventsPerSec: 90, RawEventsPerSec: 95, Phases: phases(map[string][]float64{
		"service": {90, 190, 80},
		"raw":     {100, 50, 95},
	})}}
	gs := growthOf(empty, full)
	if len(gs) != 1 || gs[0].Mix != mixBulk {
		t.Fatalf("growthOf = %+v, want one bulk mix", gs)
	}
	sv, ok := gs[0].Kinds["service"]
	if !ok || !slices.Equal(sv.Rounds, []float64{0.9, 0.95, 0.8}) || sv.Ratio != 0.9 || sv.OfMedians != 0.9 {
		t.Errorf("service: %+v, want rounds [0.9 0.95 0.8], ratio 0.9, of medians 0.9", sv)
	}
	raw := gs[0].Kinds["raw"]
	if !slices.Equal(raw.Rounds, []float64{1, 0.5, 0.95}) || raw.Ratio != 0.95 || raw.OfMedians != 0.95 {
		t.Errorf("raw: %+v, want rounds [1 0.5 0.95], ratio 0.95, of medians 0.95", raw)
	}
	if _, ok := gs[0].Kinds["ceiling"]; ok {
		t.Errorf("ceiling: a kind with no phases has ratios: %+v", gs[0].Kinds["ceiling"])
	}
}
