package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/sdk/event"
)

// doer performs one request's worth of work.
type doer func(ctx context.Context, req request) error

// phaseSpec says how long and how hard a phase runs.
type phaseSpec struct {
	label    string        // unique per phase; goes into every providerCallId
	workers  int           // concurrent calls
	duration time.Duration // no call is started after this
	maxCalls int64         // no more calls than this in the phase
	// rawOrg, when set, has every request carry the raw-SQL ceiling's parameters for that
	// organization.
	rawOrg string
}

// phaseRun is what one phase measured.
type phaseRun struct {
	Calls    int64
	Requests int64
	Events   int64
	Elapsed  time.Duration
	// Lat holds the latency of every request, by kind (the index of the request in the mix).
	Lat [][]time.Duration
}

// EventsPerSec is the phase's throughput.
func (r phaseRun) EventsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Events) / r.Elapsed.Seconds()
}

// runPhase runs spec.workers workers, each reporting the mix's units of work (whole calls, their
// requests in order) with do until the duration has passed or maxCalls calls were started, and
// waits for them. The first error stops every worker and is returned.
func runPhase(ctx context.Context, spec phaseSpec, mix callMix, do doer) (phaseRun, error) {
	// A phase that hangs still ends: nothing below waits past this.
	ctx, cancel := context.WithTimeout(ctx, spec.duration+2*time.Minute)
	defer cancel()
	var (
		started  atomic.Int64
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	runs := make([]phaseRun, spec.workers)
	for w := range runs {
		runs[w].Lat = make([][]time.Duration, len(mix.reqs))
	}
	start := time.Now()
	deadline := start.Add(spec.duration)
	for w := range spec.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &runs[w]
			for n := 0; ; n++ {
				if ctx.Err() != nil || !time.Now().Before(deadline) || started.Add(mix.calls) > spec.maxCalls {
					return
				}
				if k, err := r.unit(ctx, mix, mix.render(spec.label, w, n, time.Now(), spec.rawOrg), do); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s: worker %d, unit %d, %s: %w", spec.label, w, n, mix.reqs[k].name, err)
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	total := phaseRun{Elapsed: time.Since(start), Lat: make([][]time.Duration, len(mix.reqs))}
	if firstErr != nil {
		return total, firstErr
	}
	if err := ctx.Err(); err != nil {
		return total, fmt.Errorf("%s: %w", spec.label, err)
	}
	for _, r := range runs {
		total.add(r)
	}
	return total, nil
}

// unit sends one unit's requests in order, counting them into r. On an error it returns the
// index of the request that failed.
func (r *phaseRun) unit(ctx context.Context, mix callMix, reqs []request, do doer) (int, error) {
	for k, req := range reqs {
		t0 := time.Now()
		if err := do(ctx, req); err != nil {
			return k, err
		}
		r.Lat[k] = append(r.Lat[k], time.Since(t0))
		r.Requests++
		r.Events += mix.reqs[k].events
	}
	r.Calls += mix.calls
	return 0, nil
}

// add counts o into r.
func (r *phaseRun) add(o phaseRun) {
	r.Calls += o.Calls
	r.Requests += o.Requests
	r.Events += o.Events
	for k := range o.Lat {
		r.Lat[k] = append(r.Lat[k], o.Lat[k]...)
	}
}

// runOpenLoop runs the mix open loop: a call starts every 1/rate seconds for spec.duration,
// whether or not the calls before it have finished, as rings arrive at a clinic; each call sends
// its requests in order. A light load measured this way shows the latency a request meets
// alone, which a closed loop at full load hides behind its queues.
func runOpenLoop(ctx context.Context, spec phaseSpec, mix callMix, do doer, rate float64) (phaseRun, error) {
	ctx, cancel := context.WithTimeout(ctx, spec.duration+2*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	total := phaseRun{Lat: make([][]time.Duration, len(mix.reqs))}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	start := time.Now()
	deadline := start.Add(spec.duration)
	for n := 0; time.Now().Before(deadline) && int64(n) < spec.maxCalls && ctx.Err() == nil; n++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := phaseRun{Lat: make([][]time.Duration, len(mix.reqs))}
			k, err := r.unit(ctx, mix, mix.render(spec.label, 0, n, time.Now(), spec.rawOrg), do)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: call %d, %s: %w", spec.label, n, mix.reqs[k].name, err)
				}
				cancel()
				return
			}
			total.add(r)
		}()
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	wg.Wait()
	total.Elapsed = time.Since(start)
	if firstErr != nil {
		return total, firstErr
	}
	if err := ctx.Err(); err != nil {
		return total, fmt.Errorf("%s: %w", spec.label, err)
	}
	return total, nil
}

// httpDoer posts bodies to the events endpoint of a running server with one key. Every answer
// must be 200 or 201 with "success":true; anything else is an error naming the status, the
// trace id and the start of the body.
func httpDoer(client *http.Client, endpoint, clientID, secret string) doer {
	return func(ctx context.Context, r request) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(r.body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Client-ID", clientID)
		req.Header.Set("Client-Secret", secret)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var buf [2048]byte
		n, rerr := io.ReadFull(resp.Body, buf[:])
		got := buf[:n]
		if rerr != nil && !errors.Is(rerr, io.ErrUnexpectedEOF) && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("read response: %w", rerr)
		}
		if rerr == nil {
			// A longer body than expected; drain it so the connection is reused.
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		return checkAnswer(resp.StatusCode, resp.Header.Get("X-Trace-ID"), got)
	}
}

// checkAnswer is nil for a 200 or 201 whose body starts with "success":true, and otherwise an
// error naming the status, the trace id and the start of the body.
func checkAnswer(status int, traceID string, body []byte) error {
	if status/100 == 2 && bytes.HasPrefix(body, []byte(`{"success":true`)) {
		return nil
	}
	if len(body) > 400 {
		body = body[:400]
	}
	return fmt.Errorf("HTTP %d (trace %s): %s", status, traceID, body)
}

// wireDoer posts bodies to the events endpoint of a running server through wc, which carries the
// key's headers. Every answer is held to checkAnswer, as httpDoer's are.
func wireDoer(wc *wireClient) doer {
	return func(ctx context.Context, req request) error {
		resp, err := wc.Post(ctx, req.body)
		if err != nil {
			return err
		}
		return checkAnswer(resp.Status, resp.TraceID, resp.Body)
	}
}

// storeDoer does, for each body, what the service does with it once authenticated: decode and
// validate it with event.ParseBody, then run the write pipeline (plan, the check for events on
// file before a popup, one atomic store write) through ingest.Service.Ingest.
func storeDoer(svc *ingest.Service, orgID string) doer {
	return func(ctx context.Context, req request) error {
		events, _, err := event.ParseBody(req.body)
		if err != nil {
			return fmt.Errorf("body refused: %w", err)
		}
		if _, err := svc.Ingest(ctx, orgID, "bench", events, nil); err != nil {
			return err
		}
		return nil
	}
}

// percentile returns the p-th percentile (0 < p <= 100, nearest rank) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// latencySummary is the distribution of a set of request latencies.
type latencySummary struct {
	Count int     `json:"count"`
	P50ms float64 `json:"p50Ms"`
	P99ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
}

func summarize(ds []time.Duration) latencySummary {
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var maxD time.Duration
	if len(s) > 0 {
		maxD = s[len(s)-1]
	}
	return latencySummary{Count: len(s), P50ms: ms(percentile(s, 50)), P99ms: ms(percentile(s, 99)), MaxMs: ms(maxD)}
}

// median returns the median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
