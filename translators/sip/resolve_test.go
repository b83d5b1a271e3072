package sip

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
)

// TestRunWaitsForANameToResolve: a pbx whose name does not resolve (a PBX container not started
// yet, a resolver not up at boot) keeps the run going, reported unhealthy with the key named,
// instead of ending it: an ended run counts as a failure, and a translator that keeps failing
// stops the whole agent. The run ends only with its context, without an error. ".invalid" never
// resolves (RFC 6761 section 6.4).
func TestRunWaitsForANameToResolve(t *testing.T) {
	cfg, _ := json.Marshal(map[string]any{
		"mode":            "proxy",
		"listen":          []string{"udp://127.0.0.1:0"},
		"pbx":             "pbx.invalid:5060",
		"trunk":           "127.0.0.1:5070",
		"default_country": "US",
	})
	tr := New()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, cfg, &collector{}) }()

	testwait.Until(t, 20*time.Second, "health to report the unresolved pbx", func() bool {
		err := tr.Health(t.Context())
		if err != nil {
			if !strings.Contains(err.Error(), "pbx") || !strings.Contains(err.Error(), "pbx.invalid") {
				t.Fatalf("health = %v; want the pbx key and its name", err)
			}
			return true
		}
		select {
		case err := <-done:
			t.Fatalf("Run ended while the pbx did not resolve: %v", err)
		default:
		}
		return false
	})
	select {
	case err := <-done:
		t.Fatalf("Run ended while the pbx did not resolve: %v", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after its context ended = %v, want nil", err)
	}
}
