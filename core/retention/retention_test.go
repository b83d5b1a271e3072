package retention

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/metrictest"
)

// fakeStore keeps a backlog of due calls per organization, each with two events.
type fakeStore struct {
	mu      sync.Mutex
	orgs    []store.Org
	backlog map[string]int
	fail    map[string]error
	purges  []purge
}

type purge struct {
	org    string
	cutoff time.Time
	limit  int
}

func (f *fakeStore) ListOrgs(context.Context) ([]store.Org, error) { return f.orgs, nil }

func (f *fakeStore) PurgeCalls(_ context.Context, org string, cutoff time.Time, limit int) (store.Purged, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.purges = append(f.purges, purge{org, cutoff, limit})
	if err := f.fail[org]; err != nil {
		return store.Purged{}, err
	}
	n := min(limit, f.backlog[org])
	f.backlog[org] -= n
	return store.Purged{Calls: n, Events: 2 * n}, nil
}

var t0 = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

// newSweeper returns a sweeper over f whose clock reads t0 and whose waits return at once,
// recorded in waits.
func newSweeper(t *testing.T, f *fakeStore, batch, maxBatches int, reg prometheus.Registerer) (*Sweeper, *[]time.Duration) {
	t.Helper()
	var waits []time.Duration
	s, err := New(Options{
		Store: f, Interval: time.Hour, BatchSize: batch, BatchPause: 50 * time.Millisecond, MaxBatches: maxBatches,
		Registerer: reg, Now: func() time.Time { return t0 },
		Wait: func(ctx context.Context, d time.Duration) error {
			waits = append(waits, d)
			return ctx.Err()
		},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, &waits
}

func TestSweepTakesEachOrganizationsRetention(t *testing.T) {
	f := &fakeStore{
		orgs:    []store.Org{{ID: "month", RetentionDays: 30}, {ID: "forever"}, {ID: "day", RetentionDays: 1}},
		backlog: map[string]int{"month": 5, "forever": 9, "day": 3},
	}
	reg := prometheus.NewRegistry()
	s, waits := newSweeper(t, f, 2, 100, reg)
	got, err := s.Sweep(t.Context())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if got != (store.Purged{Calls: 8, Events: 16}) {
		t.Errorf("Sweep = %+v, want 8 calls and 16 events", got)
	}
	month, day := t0.Add(-30*24*time.Hour), t0.Add(-24*time.Hour)
	want := []purge{{"month", month, 2}, {"day", day, 2}, {"month", month, 2}, {"day", day, 2}, {"month", month, 2}}
	if len(f.purges) != len(want) {
		t.Fatalf("purges = %+v, want %+v", f.purges, want)
	}
	for i := range want {
		if f.purges[i] != want[i] {
			t.Errorf("purge %d = %+v, want %+v", i, f.purges[i], want[i])
		}
	}
	if f.backlog["forever"] != 9 {
		t.Errorf("an organization keeping calls forever lost %d", 9-f.backlog["forever"])
	}
	if len(*waits) != len(want)-1 {
		t.Errorf("waited %d times, want a pause between each of %d batches", len(*waits), len(want))
	}
	for _, d := range *waits {
		if d != 50*time.Millisecond {
			t.Errorf("paused %s, want the batch pause", d)
		}
	}
	if n := metrictest.Sum(t, reg, "callwire_retention_calls_removed_total"); n != 8 {
		t.Errorf("callwire_retention_calls_removed_total = %v, want 8", n)
	}
	if n := metrictest.Sum(t, reg, "callwire_retention_events_removed_total"); n != 16 {
		t.Errorf("callwire_retention_events_removed_total = %v, want 16", n)
	}
	if n := metrictest.Sum(t, reg, "callwire_retention_last_sweep_timestamp_seconds"); n != float64(t0.Unix()) {
		t.Errorf("callwire_retention_last_sweep_timestamp_seconds = %v, want %d", n, t0.Unix())
	}
	if n := metrictest.Sum(t, reg, "callwire_retention_batch_seconds"); n != 5 {
		t.Errorf("callwire_retention_batch_seconds counted %v batches, want 5", n)
	}
}

func TestSweepStopsAtMaxBatches(t *testing.T) {
	f := &fakeStore{
		orgs:    []store.Org{{ID: "a", RetentionDays: 7}, {ID: "b", RetentionDays: 7}},
		backlog: map[string]int{"a": 100, "b": 100},
	}
	s, _ := newSweeper(t, f, 10, 3, nil)
	got, err := s.Sweep(t.Context())
	if err != nil || got.Calls != 30 || len(f.purges) != 3 {
		t.Fatalf("Sweep = %+v, %v after %d batches; want 30 calls in 3", got, err, len(f.purges))
	}
	if f.backlog["a"] != 80 || f.backlog["b"] != 90 {
		t.Errorf("backlog = %v, want the batches shared in turn", f.backlog)
	}
	if got, _ := s.Sweep(t.Context()); got.Calls != 30 {
		t.Errorf("next sweep removed %d, want 30 more", got.Calls)
	}
}

func TestSweepGoesOnPastAFailingOrganization(t *testing.T) {
	broken := errors.New("disk on fire")
	f := &fakeStore{
		orgs:    []store.Org{{ID: "a", RetentionDays: 7}, {ID: "b", RetentionDays: 7}},
		backlog: map[string]int{"a": 4, "b": 4},
		fail:    map[string]error{"a": broken},
	}
	reg := prometheus.NewRegistry()
	s, _ := newSweeper(t, f, 2, 100, reg)
	got, err := s.Sweep(t.Context())
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "organization a") {
		t.Errorf("Sweep error = %v, want a's failure named", err)
	}
	if got.Calls != 4 || f.backlog["b"] != 0 {
		t.Errorf("Sweep = %+v, b's backlog %d; want b swept", got, f.backlog["b"])
	}
	if n := len(f.purges); n != 4 {
		t.Errorf("%d batches, want a tried once and b three times", n)
	}
	if n := metrictest.Sum(t, reg, "callwire_retention_failures_total"); n != 1 {
		t.Errorf("callwire_retention_failures_total = %v, want 1", n)
	}
}

func TestRunSweepsEachIntervalUntilCancelled(t *testing.T) {
	f := &fakeStore{orgs: []store.Org{{ID: "a", RetentionDays: 1}}, backlog: map[string]int{"a": 0}}
	ctx, cancel := context.WithCancel(t.Context())
	var intervals int
	s, err := New(Options{
		Store: f, Interval: time.Hour, BatchSize: 10, BatchPause: time.Second, MaxBatches: 10,
		Now: func() time.Time { return t0 },
		Wait: func(ctx context.Context, d time.Duration) error {
			if d == time.Hour {
				intervals++
				if intervals == 3 {
					cancel()
				}
			}
			return ctx.Err()
		},
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.Run(ctx)
	if len(f.purges) != 3 || intervals != 3 {
		t.Errorf("Run swept %d times over %d intervals, want 3 and 3", len(f.purges), intervals)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	_, err := New(Options{BatchPause: -time.Second})
	for _, want := range []string{"store", "interval", "batch size", "batch pause", "max batches"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New error = %v, want it to name %s", err, want)
		}
	}
}

func TestCutoff(t *testing.T) {
	if got, want := Cutoff(t0, 90), time.Date(2025, time.December, 1, 12, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("Cutoff(90 days) = %s, want %s", got, want)
	}
}
