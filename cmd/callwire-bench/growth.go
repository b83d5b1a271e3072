package main

import (
	"fmt"
	"io"
	"strings"
)

// minGrowth is the least a full store may deliver of an empty one's rate: the service's events
// per second with 10 million events on file ÷ on an empty store (issue 11).
const minGrowth = 0.95

// growthReport is, for one mix of a growth run (-growth), what each kind of phase delivered on
// the preloaded store as a share of what it delivered on the empty one.
type growthReport struct {
	Mix string `json:"mix"`
	// Kinds holds, per kind of phase (service, ceiling, raw), the ratios full ÷ empty.
	Kinds map[string]growthKind `json:"kinds"`
}

// growthKind is one kind's full ÷ empty.
type growthKind struct {
	// Rounds holds each round's ratio: the full store's phase ÷ the empty store's phase of the
	// same round, which ran next to each other, so that the machine drifting between rounds
	// weighs on both alike.
	Rounds []float64 `json:"rounds"`
	// Ratio is the median of Rounds: the figure held to the target.
	Ratio float64 `json:"ratio"`
	// OfMedians is the full store's median events per second over the rounds ÷ the empty store's.
	OfMedians float64 `json:"ofMedians"`
}

// growthOf pairs the mixes of a growth run's empty store with its full store's, which ran the
// same mixes, rounds and kinds of phase in the same order.
func growthOf(empty, full []mixReport) []growthReport {
	var out []growthReport
	for i := range min(len(empty), len(full)) {
		e, f := empty[i], full[i]
		g := growthReport{Mix: f.Mix, Kinds: map[string]growthKind{}}
		for _, kind := range phaseKinds() {
			var k growthKind
			for _, fp := range f.Phases {
				if fp.Kind != kind {
					continue
				}
				for _, ep := range e.Phases {
					if ep.Kind == kind && ep.Round == fp.Round {
						k.Rounds = append(k.Rounds, ratio(fp.EventsPerSec, ep.EventsPerSec))
					}
				}
			}
			if len(k.Rounds) == 0 {
				continue
			}
			k.Ratio = median(k.Rounds)
			k.OfMedians = ratio(f.medianOf(kind), e.medianOf(kind))
			g.Kinds[kind] = k
		}
		out = append(out, g)
	}
	return out
}

// printGrowth writes a growth run's ratios.
func printGrowth(w io.Writer, preloaded int64, gs []growthReport) {
	if len(gs) == 0 {
		return
	}
	fmt.Fprintf(w, "\ncost as the store grows (-growth): each round's phase on the store preloaded with %d events ÷ the same\n"+
		"round's phase on the empty store beside it, median over the rounds (and the ratio of the two stores' medians):\n", preloaded)
	for _, g := range gs {
		for _, kind := range phaseKinds() {
			k, ok := g.Kinds[kind]
			if !ok {
				continue
			}
			rounds := make([]string, len(k.Rounds))
			for i, r := range k.Rounds {
				rounds[i] = fmt.Sprintf("%.3f", r)
			}
			verdict := ""
			if kind == "service" {
				verdict = "; target at least 0.95: met"
				if k.Ratio < minGrowth {
					verdict = "; target at least 0.95: NOT met"
				}
			}
			fmt.Fprintf(w, "  %s mix, %-7s %.3f (rounds %s; of medians %.3f%s)\n", g.Mix, kind, k.Ratio, strings.Join(rounds, " "), k.OfMedians, verdict)
		}
	}
}

// medianOf is the mix's median events per second over the rounds of kind.
func (r mixReport) medianOf(kind string) float64 {
	switch kind {
	case "service":
		return r.ServiceEventsPerSec
	case "ceiling":
		return r.CeilingEventsPerSec
	case "raw":
		return r.RawEventsPerSec
	}
	return 0
}
