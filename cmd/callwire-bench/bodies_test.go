package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// TestBodies checks that every body of each mix is what the endpoint accepts, carries the events
// and calls the bench counts, names the unit's calls, and has the size the mix promises.
func TestBodies(t *testing.T) {
	now := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
	for _, name := range []string{mixRealistic, mixBulk} {
		t.Run(name, func(t *testing.T) {
			mix, err := newMix(name)
			if err != nil {
				t.Fatal(err)
			}
			reqs := mix.render("r1-service", 7, 42, now, "")
			wantID := unitID("r1-service", 7, 42)
			if !strings.HasSuffix(wantID, "-r1-service-w7-42@pbx.clinic.example") || wantID == unitID("r1-service", 7, 43) {
				t.Fatalf("unit id %q", wantID)
			}
			calls := map[string]bool{}
			var events int64
			var bytes int
			for k, req := range reqs {
				if req.kind != k || req.raw != nil {
					t.Fatalf("%s: kind %d (want %d), raw %v (want none)", mix.reqs[k].name, req.kind, k, req.raw)
				}
				parsed, batch, err := event.ParseBody(req.body)
				if err != nil {
					t.Fatalf("%s: %v\n%s", mix.reqs[k].name, err, req.body)
				}
				if int64(len(parsed)) != mix.reqs[k].events || batch != (mix.reqs[k].events > 1) {
					t.Errorf("%s: %d events (batch %v), want %d", mix.reqs[k].name, len(parsed), batch, mix.reqs[k].events)
				}
				for _, e := range parsed {
					if !strings.HasPrefix(e.Event.ProviderCallID, wantID) {
						t.Errorf("%s: providerCallId %q, want it to start with %q", mix.reqs[k].name, e.Event.ProviderCallID, wantID)
					}
					if e.Event.OccurredAt.After(now) {
						t.Errorf("%s: occurredAt %v is after %v", mix.reqs[k].name, e.Event.OccurredAt, now)
					}
					calls[e.Event.ProviderCallID] = true
					bytes += len(e.Body)
				}
				events += int64(len(parsed))
				t.Logf("%s: %d bytes", mix.reqs[k].name, len(req.body))
			}
			if int64(len(calls)) != mix.calls || events != mix.eventsPerUnit() {
				t.Errorf("a unit reports %d calls and %d events, want %d and %d", len(calls), events, mix.calls, mix.eventsPerUnit())
			}
			t.Logf("%.0f bytes per event", float64(bytes)/float64(events))
			switch name {
			case mixRealistic:
				if n := len(reqs[reqReceived].body); n < 600 || n > 900 {
					t.Errorf("call_received body is %d bytes, want 600 to 900", n)
				}
			case mixBulk:
				if avg := bytes / int(events); avg < 350 || avg > 450 {
					t.Errorf("bulk events are %d bytes on average, want about 400", avg)
				}
			}
		})
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

// parseFlag parses the bench's flags with a database named and flag, when not empty, beside it.
func parseFlag(flag string) (options, error) {
	args := []string{"-database-url", "postgres://x@127.0.0.1/db"}
	if flag != "" {
		args = append(args, flag)
	}
	return parseFlags(args, io.Discard)
}

func TestParseFlagsMix(t *testing.T) {
	for _, c := range []struct {
		flag string
		want []string
		ok   bool
	}{
		{"", []string{mixRealistic, mixBulk}, true},
		{"-mix=both", []string{mixRealistic, mixBulk}, true},
		{"-mix=realistic", []string{mixRealistic}, true},
		{"-mix=bulk", []string{mixBulk}, true},
		{"-mix=huge", nil, false},
	} {
		o, err := parseFlag(c.flag)
		if (err == nil) != c.ok {
			t.Errorf("%q: error %v, want ok %v", c.flag, err, c.ok)
			continue
		}
		if c.ok && !slices.Equal(o.mixes, c.want) {
			t.Errorf("%q: mixes %v, want %v", c.flag, o.mixes, c.want)
		}
	}
}

func TestParseFlagsStore(t *testing.T) {
	t.Setenv(envBenchURL, "")
	t.Setenv(envTestURL, "")
	for _, c := range []struct {
		args []string
		want []string
		ok   bool
	}{
		{[]string{"-database-url", "postgres://x@127.0.0.1/db"}, []string{storePostgres, storeSQLite}, true},
		{[]string{"-database-url", "postgres://x@127.0.0.1/db", "-store=postgres"}, []string{storePostgres}, true},
		{[]string{"-store=sqlite"}, []string{storeSQLite}, true}, // the embedded store needs no PostgreSQL
		{[]string{"-store=postgres"}, nil, false},
		{[]string{"-store=sqlite", "-preload=1000"}, []string{storeSQLite}, true},
		{[]string{"-store=mysql", "-database-url", "postgres://x@127.0.0.1/db"}, nil, false},
	} {
		o, err := parseFlags(c.args, io.Discard)
		if (err == nil) != c.ok {
			t.Errorf("%q: error %v, want ok %v", c.args, err, c.ok)
			continue
		}
		if c.ok && !slices.Equal(o.stores, c.want) {
			t.Errorf("%q: stores %v, want %v", c.args, o.stores, c.want)
		}
	}
}

func TestParseFlagsPopup(t *testing.T) {
	for _, c := range []struct {
		flag  string
		light int64
		ok    bool
	}{
		{"", 600, true},
		{"-popup-light-calls=200", 200, true},
		{"-popup-light-calls=0", 0, false},
		{"-popup-rate=0", 600, true}, // no light-load phase
		{"-popup-rate=-1", 0, false},
		{"-popup-rate=NaN", 0, false},
		{"-popup-phase=0", 600, true}, // no popup phases
		{"-popup-phase=-1s", 0, false},
	} {
		o, err := parseFlag(c.flag)
		if (err == nil) != c.ok {
			t.Errorf("%q: error %v, want ok %v", c.flag, err, c.ok)
			continue
		}
		if c.ok && o.popupLight != c.light {
			t.Errorf("%q: light-load calls %d, want %d", c.flag, o.popupLight, c.light)
		}
	}
}

// The popup phases' pass through Redis takes its Redis from the flag, else the environment, and
// is skipped with -redis-url none or when no popup phase runs.
func TestParseFlagsRedis(t *testing.T) {
	for _, c := range []struct {
		bench, test string // the environment
		args        []string
		want        string
	}{
		{"", "", []string{"-store=sqlite"}, ""},
		{"", "redis://t:6379/0", []string{"-store=sqlite"}, "redis://t:6379/0"},
		{"redis://b:6379/1", "redis://t:6379/0", []string{"-store=sqlite"}, "redis://b:6379/1"},
		{"", "redis://t:6379/0", []string{"-store=sqlite", "-redis-url=redis://f:6379/2"}, "redis://f:6379/2"},
		{"", "redis://t:6379/0", []string{"-store=sqlite", "-redis-url=" + noRedis}, ""},
		{"", "redis://t:6379/0", []string{"-store=sqlite", "-popup-phase=0"}, ""},
		{"", "redis://t:6379/0", []string{"-store=sqlite", "-preload=1000", "-growth"}, ""},
	} {
		t.Setenv(envBenchRedisURL, c.bench)
		t.Setenv(envTestRedisURL, c.test)
		o, err := parseFlags(c.args, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if o.redisURL != c.want {
			t.Errorf("%q with %s=%q, %s=%q: redis %q, want %q", c.args, envBenchRedisURL, c.bench, envTestRedisURL, c.test, o.redisURL, c.want)
		}
	}
}

// An open loop stops at its count of calls, before its deadline.
func TestOpenLoopStopsAtItsCount(t *testing.T) {
	mix, err := newMix(mixRealistic)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	do := func(ctx context.Context, r request) error {
		if r.kind == 0 {
			calls.Add(1)
		}
		return nil
	}
	spec := phaseSpec{label: "count", workers: 1, duration: time.Minute, maxCalls: 7}
	start := time.Now()
	pr, err := runOpenLoop(t.Context(), spec, mix, do, 200)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Calls != 7 || calls.Load() != 7 {
		t.Errorf("%d calls reported, %d started; want 7", pr.Calls, calls.Load())
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("the loop ran %v, to its deadline", time.Since(start))
	}
}
