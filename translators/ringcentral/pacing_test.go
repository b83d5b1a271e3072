package ringcentral

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testclock"
)

// TestCallLogPacing checks how call-log requests are spaced. With X-Rate-Limit-* headers the
// poll paces by what they say; without them it keeps to the published limit of the call log's
// Heavy group, 10 requests in any 60 s, across pages and polls. A 429 waits its Retry-After.
// Each wait's log line names the group. The poller's sleep moves the test's clock: nothing
// waits for real.
func TestCallLogPacing(t *testing.T) {
	t0 := time.Date(2023, 6, 6, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		noHeaders    bool
		remaining    int // X-Rate-Limit-Remaining (of 10 per 60 s) when there are headers
		fail429      int
		pages, polls int
		waits        []time.Duration
		log          string // what the log must hold
	}{
		{name: "no headers: the published Heavy limit", noHeaders: true, pages: 25, polls: 1,
			waits: []time.Duration{time.Minute, time.Minute}, log: `group=Heavy wait=1m0s`},
		{name: "no headers: the limit holds across polls", noHeaders: true, pages: 6, polls: 2,
			waits: []time.Duration{time.Minute}, log: `group=Heavy wait=1m0s`},
		{name: "no headers, few pages: no wait", noHeaders: true, pages: 10, polls: 1},
		{name: "headers: paced by what they say", remaining: 5, pages: 3, polls: 1,
			waits: []time.Duration{10 * time.Second, 10 * time.Second}, log: `group=heavy wait=10s`},
		{name: "headers with room to spare: no wait", remaining: 9, pages: 25, polls: 1},
		{name: "429 without headers: its Retry-After, in the Heavy group", noHeaders: true, fail429: 1, pages: 1, polls: 1,
			waits: []time.Duration{time.Second}, log: `msg="ringcentral: call log rate limited; waiting" group=Heavy retry_after=1s`},
		{name: "429 with headers: its Retry-After, in their group", remaining: 9, fail429: 1, pages: 1, polls: 1,
			waits: []time.Duration{time.Second}, log: `msg="ringcentral: call log rate limited; waiting" group=heavy retry_after=1s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRC(t)
			var pages [][]callLogRecord
			for i := range tt.pages {
				pages = append(pages, []callLogRecord{logRecord(fmt.Sprintf("s-page-%02d", i), "Inbound", "Accepted", t0, 20, t0.Add(time.Minute))})
			}
			f.setPages(pages...)
			clock := testclock.New(t0.Add(5 * time.Minute))
			var mu sync.Mutex
			var asked []time.Time // the clock at each call-log request, as the fake sees it
			f.mu.Lock()
			f.noRateHeaders, f.rateRemaining, f.fail429 = tt.noHeaders, tt.remaining, tt.fail429
			f.onCallLog = func(*http.Request) {
				mu.Lock()
				asked = append(asked, clock.Now())
				mu.Unlock()
			}
			f.mu.Unlock()
			var waits []time.Duration
			sleep := func(_ context.Context, d time.Duration) error {
				waits = append(waits, d)
				clock.Advance(d)
				return nil
			}
			var logged bytes.Buffer
			p := newTestPoller(t, f, t.TempDir(), (&recorder{}).Emit, clock.Now, sleep)
			p.log = slog.New(slog.NewTextHandler(&logged, nil))
			for range tt.polls {
				if _, err := p.pollOnce(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if want := tt.pages*tt.polls + tt.fail429; len(asked) != want {
				t.Fatalf("%d requests, want %d", len(asked), want)
			}
			if !slices.Equal(waits, tt.waits) {
				t.Errorf("waits %v, want %v", waits, tt.waits)
			}
			if tt.noHeaders {
				for i := 0; i+callLogLimit < len(asked); i++ {
					if d := asked[i+callLogLimit].Sub(asked[i]); d < callLogWindow {
						t.Errorf("requests %d to %d came within %s: more than %d in %s", i+1, i+callLogLimit+1, d, callLogLimit, callLogWindow)
					}
				}
			}
			if !strings.Contains(logged.String(), tt.log) {
				t.Errorf("the log does not hold %q:\n%s", tt.log, logged.String())
			}
		})
	}
}
