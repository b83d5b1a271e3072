package auth

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/callwire/callwire/sdk/event"
)

func TestEventScope(t *testing.T) {
	if got := EventScope("call_received"); got != "org.calls.events.call_received" {
		t.Errorf("EventScope = %q", got)
	}
}

func TestAllows(t *testing.T) {
	wild := Principal{Scopes: []string{ScopeCallsEvents}}
	perEvent := Principal{Scopes: []string{EventScope("call_ended"), EventScope("call_recorded")}}
	popups := Principal{Scopes: []string{ScopePopupsRead}}
	tests := []struct {
		name  string
		p     Principal
		scope string
		want  bool
	}{
		{"wildcard covers an event type", wild, EventScope("call_received"), true},
		{"wildcard covers another event type", wild, EventScope("call_transcribed"), true},
		{"wildcard covers itself", wild, ScopeCallsEvents, true},
		{"wildcard needs a type after the dot", wild, ScopeCallsEvents + ".", false},
		{"wildcard does not cover a look-alike", wild, ScopeCallsEvents + "x.call_received", false},
		{"wildcard does not cover a sibling", wild, ScopePopupsRead, false},
		{"wildcard does not cover its parent", wild, "org.calls", false},
		{"per-event scope held", perEvent, EventScope("call_ended"), true},
		{"per-event scope not held", perEvent, EventScope("call_received"), false},
		{"per-event scopes do not add up to the wildcard", perEvent, ScopeCallsEvents, false},
		{"popups scope", popups, ScopePopupsRead, true},
		{"popups scope grants no events", popups, EventScope("call_received"), false},
		{"no scopes", Principal{}, EventScope("call_received"), false},
		{"empty scope asked", wild, "", false},
		{"matching is case-sensitive", wild, strings.ToUpper(EventScope("call_received")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Allows(tt.scope); got != tt.want {
				t.Errorf("%v.Allows(%q) = %v, want %v", tt.p.Scopes, tt.scope, got, tt.want)
			}
		})
	}
}

func TestRequireEventScopes(t *testing.T) {
	perEvent := Principal{Scopes: []string{EventScope("call_ended")}}
	tests := []struct {
		name    string
		p       Principal
		types   []string
		missing []string // nil when allowed
	}{
		{"empty batch", Principal{}, nil, nil},
		{"wildcard allows a mixed batch", Principal{Scopes: []string{ScopeCallsEvents}},
			[]string{"call_received", "call_ended", "call_transcribed"}, nil},
		{"per-event scope allows its type repeated", perEvent, []string{"call_ended", "call_ended"}, nil},
		{"one missing type refuses the batch", perEvent, []string{"call_ended", "call_recorded"},
			[]string{"org.calls.events.call_recorded"}},
		{"every missing scope named, sorted and deduplicated", perEvent,
			[]string{"call_transcribed", "call_recorded", "call_ended", "call_transcribed", "call_hold"},
			[]string{"org.calls.events.call_hold", "org.calls.events.call_recorded",
				"org.calls.events.call_transcribed"}},
		{"no scopes at all", Principal{}, []string{"call_received"}, []string{"org.calls.events.call_received"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			types := slices.Clone(tt.types)
			err := RequireEventScopes(tt.p, tt.types)
			if !slices.Equal(types, tt.types) {
				t.Error("the argument was modified")
			}
			if tt.missing == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindForbidden {
				t.Fatalf("err = %v, want a forbidden *Error", err)
			}
			if !slices.Equal(e.Scopes, tt.missing) {
				t.Errorf("missing scopes %v, want %v", e.Scopes, tt.missing)
			}
			for _, s := range tt.missing {
				if !strings.Contains(e.Error(), s) {
					t.Errorf("message %q does not name %s", e.Error(), s)
				}
			}
			if strings.Count(e.Error(), "call_transcribed") > 1 {
				t.Errorf("message %q repeats a scope", e.Error())
			}
		})
	}
}

func TestRequireScopes(t *testing.T) {
	p := Principal{Scopes: []string{ScopeCallsEvents}}
	if err := RequireScopes(p, EventScope("call_received"), ScopeCallsEvents); err != nil {
		t.Errorf("held scopes refused: %v", err)
	}
	err := RequireScopes(p, ScopePopupsRead)
	if KindOf(err) != KindForbidden || err.Error() != "key lacks scope org.popups.read" {
		t.Errorf("err = %v", err)
	}
}

func TestRequireFederated(t *testing.T) {
	if err := RequireFederated(Principal{ClientID: "cwid_x", OrgID: "org_1"}); err != nil {
		t.Errorf("federated key refused: %v", err)
	}
	err := RequireFederated(Principal{ClientID: "cwid_x"})
	if KindOf(err) != KindNotFederated {
		t.Fatalf("operator key: err = %v, want not federated", err)
	}
	if !strings.Contains(err.Error(), "federated") {
		t.Errorf("message %q does not mention federation", err)
	}
}

func TestValidScope(t *testing.T) {
	valid := []string{ScopeCallsEvents, ScopePopupsRead}
	for _, ty := range event.Types() {
		valid = append(valid, EventScope(string(ty)))
	}
	if len(valid) != 11 {
		t.Fatalf("%d valid scopes, want 11 (two plus nine event types)", len(valid))
	}
	for _, s := range valid {
		if err := ValidScope(s); err != nil {
			t.Errorf("ValidScope(%q) = %v", s, err)
		}
	}
	for _, s := range []string{"", "org", "org.calls", ScopeCallsEvents + ".", EventScope("call_exploded"),
		EventScope("Call_Received"), EventScope("call_received") + ".x", "org.popups", "org.keys.create",
		" " + ScopeCallsEvents, ScopeCallsEvents + "*"} {
		err := ValidScope(s)
		if err == nil {
			t.Errorf("ValidScope(%q) accepted", s)
			continue
		}
		if !strings.Contains(err.Error(), "unknown scope") {
			t.Errorf("ValidScope(%q) = %v", s, err)
		}
	}
}
