package payloads_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/callwire/callwire/sdk/event"
)

// TestPayloadsParse parses every example body exactly as the ingest endpoint does. Any problem
// fails the test, so the examples stay acceptable as the vocabulary changes.
func TestPayloadsParse(t *testing.T) {
	files, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no example payloads found")
	}
	seen := map[event.Type]bool{}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			events, batch, err := event.ParseBody(data)
			if err != nil {
				if v, ok := event.AsValidationError(err); ok {
					for _, p := range v.Problems {
						t.Errorf("%s: %s", p.Field, p.Message)
					}
					return
				}
				t.Fatal(err)
			}
			if want := strings.HasPrefix(f, "tail-batch"); batch != want {
				t.Errorf("batch = %v, want %v", batch, want)
			}
			for _, p := range events {
				seen[p.Event.Type] = true
			}
		})
	}
	for _, ty := range event.Types() {
		if !seen[ty] {
			t.Errorf("no example payload holds a %s event", ty)
		}
		if !slices.Contains(files, string(ty)+".json") {
			t.Errorf("missing %s.json", ty)
		}
	}
}

// TestTailBatch checks that the tail batch holds call_ended, call_recorded and
// call_transcribed of one call, in that order.
func TestTailBatch(t *testing.T) {
	data, err := os.ReadFile("tail-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	events, _, err := event.ParseBody(data)
	if err != nil {
		t.Fatal(err)
	}
	var types []event.Type
	for _, p := range events {
		types = append(types, p.Event.Type)
		if p.Event.ProviderCallID != events[0].Event.ProviderCallID {
			t.Errorf("%s names call %q, want %q", p.Event.Type, p.Event.ProviderCallID, events[0].Event.ProviderCallID)
		}
	}
	want := []event.Type{event.CallEnded, event.CallRecorded, event.CallTranscribed}
	if !slices.Equal(types, want) {
		t.Errorf("types %v, want %v", types, want)
	}
}
