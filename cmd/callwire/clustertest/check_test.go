package clustertest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a verdict that keeps the failures.
type recorder struct{ errs []string }

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestCheckEvents(t *testing.T) {
	acked := []post{{call: "a", seqs: []int{1}}, {call: "a", seqs: []int{3, 4, 5}}}
	failed := post{call: "b", seqs: []int{1}, err: fmt.Errorf("HTTP 503")}
	for _, tc := range []struct {
		name   string
		posts  []post
		stored map[eventKey]int
		want   []string // substrings of the failures, in order; none for a pass
	}{
		{name: "all stored once", posts: acked, stored: map[eventKey]int{{"a", 1}: 1, {"a", 3}: 1, {"a", 4}: 1, {"a", 5}: 1}},
		{name: "a failed request stored or not", posts: append(acked[:1:1], failed), stored: map[eventKey]int{{"a", 1}: 1, {"b", 1}: 1}},
		{name: "acknowledged, not stored", posts: acked, stored: map[eventKey]int{{"a", 1}: 1, {"a", 3}: 1, {"a", 5}: 1},
			want: []string{"1 acknowledged events are not stored: a#4"}},
		{name: "stored twice", posts: acked[:1], stored: map[eventKey]int{{"a", 1}: 2},
			want: []string{"1 events are stored more than once: a#1 ×2"}},
		{name: "invented", posts: acked[:1], stored: map[eventKey]int{{"a", 1}: 1, {"a", 2}: 1, {"c", 1}: 1},
			want: []string{"2 stored events were never sent: a#2, c#1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{}
			checkEvents(r, tc.posts, tc.stored)
			if len(r.errs) != len(tc.want) {
				t.Fatalf("failures %q, want %q", r.errs, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(r.errs[i], w) {
					t.Errorf("failure %q, want it to contain %q", r.errs[i], w)
				}
			}
		})
	}
}

func TestCheckPopups(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	fault := window{name: "fault", from: at(10), until: at(15)}
	// lossless is a fault that must cost the desks nothing.
	lossless := window{name: "lossless", from: at(20), until: at(25), lossless: true}
	ring := func(call string, start float64, locs ...string) post {
		return post{call: call, locations: locs, seqs: []int{1}, rings: true, start: at(start), end: at(start + 0.05)}
	}
	answer := func(call string, start float64) post {
		return post{call: call, seqs: []int{2}, start: at(start), end: at(start + 0.05)}
	}
	// newDeskWith is a desk of location whose streams were open over spans and that got the
	// popups of calls (repeated for a popup received twice).
	newDeskWith := func(location string, spans []span, calls ...string) *desk {
		d := newDesk("desk "+location, location, "", "", "", "")
		d.spans = spans
		for _, c := range calls {
			d.got[c]++
		}
		return d
	}
	always := []span{{from: at(0)}}
	for _, tc := range []struct {
		name    string
		posts   []post
		desks   []*desk
		want    []string
		lost    map[string]int
		unowed  map[string]int
		twice   int
		repeats int
		owedN   int
	}{
		{name: "every desk of the call's locations got it once",
			posts: []post{ring("c1", 1, "front-desk", "lab"), ring("c2", 2, "lab")},
			desks: []*desk{newDeskWith("front-desk", always, "c1"), newDeskWith("lab", always, "c1", "c2")},
			owedN: 3},
		{name: "lost outside a fault fails",
			posts: []post{ring("c1", 1, "lab")},
			desks: []*desk{newDeskWith("lab", always)},
			want:  []string{"desk lab lost the popup of c1"},
			lost:  map[string]int{outside: 1},
			owedN: 1},
		{name: "lost inside a fault is counted, not failed",
			posts: []post{ring("c1", 11, "lab")},
			desks: []*desk{newDeskWith("lab", always)},
			lost:  map[string]int{"fault": 1},
			owedN: 1},
		{name: "lost inside a fault that must lose none fails",
			posts: []post{ring("c1", 21, "lab"), ring("c2", 11, "lab")},
			desks: []*desk{newDeskWith("lab", always)},
			want:  []string{"desk lab lost the popup of c1"},
			lost:  map[string]int{"lossless": 1, "fault": 1},
			owedN: 2},
		{name: "a ring whose popup may still travel as a fault begins counts in the fault",
			posts: []post{ring("c1", 9.5, "lab")},
			desks: []*desk{newDeskWith("lab", always)},
			lost:  map[string]int{"fault": 1},
			owedN: 1},
		{name: "a ring while the desk had no stream is not owed",
			posts:  []post{ring("c1", 11, "lab")},
			desks:  []*desk{newDeskWith("lab", []span{{from: at(0), until: at(11.02)}, {from: at(11.4)}})},
			unowed: map[string]int{"fault": 1},
			owedN:  0},
		{name: "twice on one stream fails anywhere",
			posts: []post{ring("c1", 11, "lab")},
			desks: []*desk{func() *desk { d := newDeskWith("lab", always, "c1"); d.twice = []string{"c1"}; return d }()},
			want:  []string{"desk lab received the popup of c1 twice on one stream"},
			twice: 1,
			owedN: 1},
		{name: "a repeat from a later stream's replay is dropped by id and counted",
			posts:   []post{ring("c1", 11, "lab")},
			desks:   []*desk{newDeskWith("lab", []span{{from: at(0), until: at(12.5)}, {from: at(12.8)}}, "c1", "c1")},
			repeats: 1,
			owedN:   1},
		{name: "a call still ringing as a stream opens is owed by its replay",
			posts:  []post{ring("c1", 1, "lab"), answer("c1", 8), ring("c2", 2, "lab"), answer("c2", 4)},
			desks:  []*desk{newDeskWith("lab", []span{{from: at(0), until: at(1.02)}, {from: at(5)}}, "c1")},
			unowed: map[string]int{outside: 1}, // c2 was answered before the stream opened
			owedN:  1},
		{name: "a replay owed and lost outside a fault fails",
			posts: []post{ring("c1", 1, "lab"), answer("c1", 8)},
			desks: []*desk{newDeskWith("lab", []span{{from: at(0), until: at(1.02)}, {from: at(5)}})},
			want:  []string{"desk lab lost the popup of c1 (owed from the replay of its next stream)"},
			lost:  map[string]int{outside: 1},
			owedN: 1},
		{name: "an unacknowledged ring is owed by nobody",
			posts: []post{{call: "c1", locations: []string{"lab"}, seqs: []int{1}, rings: true, start: at(1), end: at(2), err: fmt.Errorf("HTTP 503")}},
			desks: []*desk{newDeskWith("lab", always)},
			owedN: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{}
			f := checkPopups(r, tc.posts, tc.desks, []window{fault, lossless})
			if len(r.errs) != len(tc.want) {
				t.Fatalf("failures %q, want %q", r.errs, tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(r.errs[i], w) {
					t.Errorf("failure %q, want it to contain %q", r.errs[i], w)
				}
			}
			owed := 0
			for _, n := range f.owed {
				owed += n
			}
			if owed != tc.owedN || f.twice != tc.twice || f.repeats != tc.repeats || fmt.Sprint(f.lost) != fmt.Sprint(nonNil(tc.lost)) ||
				fmt.Sprint(f.unowed) != fmt.Sprint(nonNil(tc.unowed)) {
				t.Errorf("owed %d, twice %d, repeats %d, lost %v, unowed %v; want %d, %d, %d, %v, %v",
					owed, f.twice, f.repeats, f.lost, f.unowed, tc.owedN, tc.twice, tc.repeats, tc.lost, tc.unowed)
			}
		})
	}
}

// nonNil returns m, or an empty map for nil.
func nonNil(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return m
}

func TestP99(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want time.Duration
	}{
		{"none", nil, 0},
		{"one", ms(7), 7 * time.Millisecond},
		{"a hundred, unsorted", ms(hundred...), 99 * time.Millisecond},
		{"ten: the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 10 * time.Millisecond},
	} {
		if got := p99(tc.in); got != tc.want {
			t.Errorf("%s: p99 = %v, want %v", tc.name, got, tc.want)
		}
	}
}
