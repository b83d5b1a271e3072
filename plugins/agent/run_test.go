package agent_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/plugins/agent"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/outbox"
	"github.com/callwire/callwire/sdk/sdktest"
)

// TestRunDrainsAndServesMetrics runs a whole agent without translators over an outbox that
// already holds events: it drains them, reports them at /metrics, and stops cleanly.
func TestRunDrainsAndServesMetrics(t *testing.T) {
	fake := sdktest.NewServer(t)
	dir := t.TempDir()
	c := agent.Defaults()
	c.Core.URL = fake.URL
	c.Core.ClientID = fake.Credential().ClientID
	c.Core.Secret = fake.Credential().Secret
	c.Outbox.Path = filepath.Join(dir, "outbox.db")
	c.Outbox.DeadLetter = filepath.Join(dir, "dead.jsonl")
	c.Metrics.Listen = "127.0.0.1:0"
	c.Delivery.MinBackoff = 10 * time.Millisecond

	ob, err := outbox.Open(t.Context(), c.Outbox.Path, outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []event.Event{ev("m", event.CallReceived, 1), ev("m", event.CallEnded, 2)} {
		if err := ob.Add(t.Context(), "sip", e); err != nil {
			t.Fatal(err)
		}
	}
	ob.Close()

	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, c, agent.RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			OnReady: func(a net.Addr) { ready <- a }})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	testwait.Until(t, 10*time.Second, "the events at the server", func() bool { return len(fake.Events()) == 2 })
	var body string
	testwait.Until(t, 5*time.Second, "the metrics", func() bool {
		resp, err := http.Get("http://" + addr.String() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return strings.Contains(body, `callwire_agent_events_sent_total{translator="sip"} 2`) &&
			strings.Contains(body, `callwire_agent_events_queued{translator="sip"} 0`)
	})
	for _, want := range []string{"callwire_agent_outbox_max_events 100000",
		"callwire_agent_dead_letters 0", "callwire_agent_requests_total{outcome=\"sent\"}", "go_goroutines"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not stop")
	}
	// Stopped: the outbox is closed and can be opened again, empty.
	ob, err = outbox.Open(t.Context(), c.Outbox.Path, outbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	if st, _ := ob.Stats(t.Context()); st.Queued != 0 {
		t.Fatalf("queued %d after run", st.Queued)
	}
}
