package sip

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/translators/sip/internal/siptest"
)

// collector is an Emitter that keeps what it is given, or refuses everything.
type collector struct {
	mu      sync.Mutex
	events  []event.Event
	refuse  bool
	refused int
}

func (c *collector) Emit(_ context.Context, e event.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refuse {
		c.refused++
		return &translator.RefusedError{Reason: "outbox full"}
	}
	if err := e.Validate(); err != nil {
		return fmt.Errorf("event refused as invalid: %w", err)
	}
	c.events = append(c.events, e)
	return nil
}

func (c *collector) byCall() map[string][]event.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]event.Event{}
	for _, e := range c.events {
		out[e.ProviderCallID] = append(out[e.ProviderCallID], e)
	}
	return out
}

func scenario(t *testing.T, flow, side string) string {
	p, err := filepath.Abs(filepath.Join("testdata", "sipp", flow+"_"+side+".xml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runProxy runs the translator in proxy mode between pair's two sides and returns the pair with
// its target set to the proxy, and a function that stops the translator and waits for it. The
// proxy and the two sides take their ports from [first, first+99], out of the kernel's ephemeral
// range, so that no other test's outgoing connection can hold one of them.
func runProxy(t *testing.T, first int, pair siptest.Pair, out translator.Emitter) (siptest.Pair, func()) {
	t.Helper()
	ports, err := siptest.NewPorts(first, first+99)
	if err != nil {
		t.Fatal(err)
	}
	pair.Ports = ports
	pair = siptest.Prepare(t, pair)
	port := ports.Take(t)
	cfg, _ := json.Marshal(map[string]any{
		"mode":            "proxy",
		"listen":          []string{fmt.Sprintf("udp://127.0.0.1:%d", port), fmt.Sprintf("tcp://127.0.0.1:%d", port)},
		"pbx":             fmt.Sprintf("127.0.0.1:%d", pair.UASPort),
		"trunk":           fmt.Sprintf("127.0.0.1:%d", pair.UACPort),
		"numbers":         []string{"+15551230100"},
		"default_country": "US",
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- New().Run(ctx, cfg, out) }()
	testwait.Until(t, 10*time.Second, fmt.Sprintf("the translator to listen on %d", port), func() bool {
		return siptest.Listening(siptest.UDP, port) && siptest.Listening(siptest.TCP, port)
	})
	pair.Target = fmt.Sprintf("127.0.0.1:%d", port)
	return pair, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("translator: %v", err)
		}
	}
}

// TestProxyModeTranslatesRealCalls runs the basic sipp pair through the translator in proxy mode,
// over UDP and TCP: every call completes, and each yields call_received, call_answered and
// call_ended.
func TestProxyModeTranslatesRealCalls(t *testing.T) {
	sipp, _ := siptest.Programs(t)
	for i, tr := range []siptest.Transport{siptest.UDP, siptest.TCP} {
		t.Run(tr.Name(), func(t *testing.T) {
			out := &collector{}
			pair, stop := runProxy(t, 31600+100*i, siptest.Pair{UAC: scenario(t, "basic", "uac"), UAS: scenario(t, "basic", "uas"), Calls: 5, Transport: tr, Timeout: 15 * time.Second}, out)
			r := siptest.Run(t.Context(), t, sipp, pair)
			// sipp is done once the calls' last messages passed; the translator may still be
			// handing over their last events. The checks below say what is missing.
			testwait.Poll(10*time.Second, func() bool {
				calls := out.byCall()
				return len(calls) == 5 && !slices.ContainsFunc(slices.Collect(maps.Values(calls)), func(evs []event.Event) bool { return len(evs) < 3 })
			})
			stop()
			if !r.OK(5) {
				t.Fatalf("calls failed through the proxy: %+v", r)
			}
			calls := out.byCall()
			if len(calls) != 5 {
				t.Fatalf("%d calls reported, want 5: %v", len(calls), calls)
			}
			for id, evs := range calls {
				var types []event.Type
				for _, e := range evs {
					types = append(types, e.Type)
				}
				want := []event.Type{event.CallReceived, event.CallAnswered, event.CallEnded}
				if fmt.Sprint(types) != fmt.Sprint(want) {
					t.Errorf("call %s: %v, want %v", id, types, want)
				}
			}
		})
	}
}

// TestProxyKeepsCallsWorkingWhenDeliveryFails: the agent refuses every event (its outbox is
// full, or the core is down and it filled up); every call through the proxy still completes.
func TestProxyKeepsCallsWorkingWhenDeliveryFails(t *testing.T) {
	sipp, _ := siptest.Programs(t)
	out := &collector{refuse: true}
	pair, stop := runProxy(t, 31800, siptest.Pair{UAC: scenario(t, "basic", "uac"), UAS: scenario(t, "basic", "uas"), Calls: 20, Rate: 50, Timeout: 15 * time.Second}, out)
	r := siptest.Run(t.Context(), t, sipp, pair)
	stop()
	if !r.OK(20) {
		t.Fatalf("calls failed through the proxy while delivery failed: %+v", r)
	}
	if out.refused == 0 {
		t.Error("no event was offered to the failing agent")
	}
}
