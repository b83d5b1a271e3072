package auth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/callwire/callwire/sdk/event"
)

// Scopes a key may hold.
const (
	// ScopeCallsEvents allows reporting call events of every type. It covers every
	// EventScope(t).
	ScopeCallsEvents = "org.calls.events"
	// ScopePopupsRead allows reading the front-desk popup stream.
	ScopePopupsRead = "org.popups.read"
	// ScopeCallsRead allows reading the organization's call history: the list, a call with its
	// events, and the CSV export.
	ScopeCallsRead = "org.calls.read"
	// ScopeCallbacksWrite allows closing an item of the organization's to-call-back list by
	// hand (reading the list takes ScopeCallsRead).
	ScopeCallbacksWrite = "org.callbacks.write"
)

// EventScope returns the scope that allows reporting events of one type:
// "org.calls.events.<eventType>". It does not check the type.
func EventScope(eventType string) string {
	return ScopeCallsEvents + "." + eventType
}

// ValidScope reports whether s is a scope a key may be given: ScopeCallsEvents, EventScope of one
// of the nine event types of sdk/event, ScopePopupsRead, ScopeCallsRead or ScopeCallbacksWrite.
func ValidScope(s string) error {
	switch s {
	case ScopeCallsEvents, ScopePopupsRead, ScopeCallsRead, ScopeCallbacksWrite:
		return nil
	}
	if t, ok := strings.CutPrefix(s, ScopeCallsEvents+"."); ok && event.Type(t).Valid() {
		return nil
	}
	return fmt.Errorf("unknown scope %q: want %s, %s.<event type>, %s, %s or %s",
		s, ScopeCallsEvents, ScopeCallsEvents, ScopePopupsRead, ScopeCallsRead, ScopeCallbacksWrite)
}

// Allows reports whether the principal holds scope, directly or through a wildcard:
// ScopeCallsEvents covers every "org.calls.events.<type>" (with a non-empty type).
func (p Principal) Allows(scope string) bool {
	wild := false
	if t, ok := strings.CutPrefix(scope, ScopeCallsEvents+"."); ok && t != "" {
		wild = true
	}
	for _, held := range p.Scopes {
		if held == scope || wild && held == ScopeCallsEvents {
			return true
		}
	}
	return false
}

// allowsEventType is Allows(EventScope(t)), without building the scope.
func (p Principal) allowsEventType(t string) bool {
	for _, held := range p.Scopes {
		if held == ScopeCallsEvents && t != "" {
			return true
		}
		if rest, ok := strings.CutPrefix(held, ScopeCallsEvents+"."); ok && rest == t {
			return true
		}
	}
	return false
}

// RequireScopes returns nil when the principal is allowed every scope given, and otherwise a
// KindForbidden *Error naming every missing scope (sorted, without duplicates).
func RequireScopes(p Principal, scopes ...string) error {
	missing := missingScopes(p, scopes)
	if missing == nil {
		return nil
	}
	return &Error{Kind: KindForbidden, Message: lacksMessage(missing), Scopes: missing}
}

// RequireEventScopes checks a whole batch at once: it returns nil when the principal may report
// every one of eventTypes, and otherwise a KindForbidden *Error naming every missing per-event
// scope (sorted, without duplicates), so that a batch is refused whole. An empty batch needs no
// scope.
func RequireEventScopes(p Principal, eventTypes []string) error {
	var missing []string
	for _, t := range eventTypes {
		if !p.allowsEventType(t) {
			missing = append(missing, EventScope(t))
		}
	}
	if missing == nil {
		return nil
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	return &Error{Kind: KindForbidden, Scopes: missing,
		Message: lacksMessage(missing) + " (" + ScopeCallsEvents + " grants every event type)"}
}

// missingScopes returns the scopes p is not allowed, sorted and deduplicated, or nil.
func missingScopes(p Principal, scopes []string) []string {
	var missing []string
	for _, s := range scopes {
		if !p.Allows(s) {
			missing = append(missing, s)
		}
	}
	slices.Sort(missing)
	return slices.Compact(missing)
}

// RequireFederated returns nil when the principal's key is federated to an organization, and
// otherwise a KindNotFederated *Error whose message mentions federation.
func RequireFederated(p Principal) error {
	if p.Federated() {
		return nil
	}
	return &Error{Kind: KindNotFederated, Message: msgNotFederated}
}

func lacksMessage(missing []string) string {
	if len(missing) == 1 {
		return "key lacks scope " + missing[0]
	}
	return "key lacks scopes " + strings.Join(missing, ", ")
}
