package event

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestValid: ParseOne keeps the bytes it was given and the event they decode to; Check encodes
// an event canonically; both refuse what the endpoint refuses, ParseOne a batch too.
func TestValid(t *testing.T) {
	e := Event{Type: CallReceived, ProviderCallID: "c-1", OccurredAt: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC),
		Call: Call{Direction: Inbound, From: &Party{Kind: KindE164, Number: "+442071234567"}}}
	checked, err := Check(e)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	want, _ := e.MarshalJSON()
	if !bytes.Equal(checked.JSON(), want) {
		t.Errorf("Check's JSON %s, want the canonical %s", checked.JSON(), want)
	}
	spaced := []byte(" " + strings.ReplaceAll(string(want), ",", ", ") + "\n")
	parsed, err := ParseOne(spaced)
	if err != nil {
		t.Fatalf("ParseOne: %v", err)
	}
	if !bytes.Equal(parsed.JSON(), spaced) {
		t.Errorf("ParseOne's JSON %q, want the bytes given", parsed.JSON())
	}
	if parsed.Event().ProviderCallID != "c-1" || parsed.Event().Call.From.Number != "+442071234567" {
		t.Errorf("ParseOne's event %+v", parsed.Event())
	}

	bad := e
	bad.ProviderCallID = ""
	if _, err := Check(bad); err == nil {
		t.Error("Check took an event without providerCallId")
	} else if _, ok := AsValidationError(err); !ok {
		t.Errorf("Check's error %T, want a *ValidationError", err)
	}
	if _, err := ParseOne([]byte(`{"type":"call_received"}`)); err == nil {
		t.Error("ParseOne took an incomplete event")
	} else if _, ok := AsValidationError(err); !ok {
		t.Errorf("ParseOne's error %T, want a *ValidationError", err)
	}
	if _, err := ParseOne([]byte(`{"events":[` + string(want) + `]}`)); err == nil {
		t.Error("ParseOne took a batch")
	}
}
