package server_test

import (
	"testing"
	"time"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/internal/testclock"
	"github.com/callwire/callwire/internal/testwait"
)

// TestRetentionSweepsAsTheServerRuns: a running server removes an organization's calls once its
// retention has passed on the server's clock, with their events, and leaves the calls of an
// organization that keeps them forever; the metrics say so.
func TestRetentionSweepsAsTheServerRuns(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clk := testclock.New(time.Now())
		e := start(t, b.db(t), func(c *config.Config, o *server.Options) {
			o.Now = clk.Now
			c.Retention.Interval = 10 * time.Millisecond
			c.Retention.BatchPause = time.Millisecond
			c.Retention.BatchSize = 1
		})
		forever := e.newOrg("Hillside Clinic")
		fClient, fSecret := e.newKey(forever, nil, "org.calls.events")
		for _, id := range []string{"r1", "r2"} {
			if r := e.post(batch(ev("call_received", id, 0, ""), ev("call_ended", id, 1, ""))); r.status != 201 {
				t.Fatalf("post %s: %d %s", id, r.status, r.raw)
			}
		}
		if r := e.postAs(fClient, fSecret, ev("call_received", "f1", 0, "")); r.status != 201 {
			t.Fatalf("post f1: %d %s", r.status, r.raw)
		}
		for _, org := range []string{e.org, forever} {
			if err := e.st.UpdateOrgRetention(t.Context(), org, 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.st.UpdateOrgRetention(t.Context(), forever, 0); err != nil {
			t.Fatal(err)
		}
		// Not due yet: a day has not passed.
		clk.Advance(23 * time.Hour)
		// Two batches start after the clock moved: the second ran wholly on it.
		batches := e.metric("callwire_retention_batch_seconds_count")
		testwait.Until(t, 10*time.Second, "two more batches", func() bool { return e.metric("callwire_retention_batch_seconds_count") >= batches+2 })
		if ts := e.metric("callwire_retention_last_sweep_timestamp_seconds"); ts != float64(clk.Now().UnixNano())/1e9 {
			t.Errorf("callwire_retention_last_sweep_timestamp_seconds = %v, want the clock's %v", ts, clk.Now())
		}
		e.call(e.org, "sip", "r1")
		clk.Advance(2 * time.Hour)
		testwait.Until(t, 10*time.Second, "both calls removed", func() bool { return e.metric("callwire_retention_calls_removed_total") == 2 })
		e.absent(e.org, "sip", "r1")
		e.absent(e.org, "sip", "r2")
		if n := e.metric("callwire_retention_events_removed_total"); n != 4 {
			t.Errorf("callwire_retention_events_removed_total = %v, want 4", n)
		}
		if _, evs := e.call(forever, "sip", "f1"); len(evs) != 1 {
			t.Errorf("an organization keeping calls forever has %d events, want 1", len(evs))
		}
	})
}
