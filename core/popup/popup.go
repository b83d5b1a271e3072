// Package popup is the message that tells a clinic's front desk who is calling while the phone
// rings, and the brokers that carry it from the ingest pipeline to the workstations: an
// in-process broker (the embedded default) and Redis pub/sub, so that a popup published through
// one replica reaches a workstation connected to any other.
package popup

import (
	"context"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// Client is a record of the clinic's client system matched by the caller lookup.
type Client struct {
	ExternalID string `json:"externalId"`
	Name       string `json:"name"`
}

// LookupOutcome says how the caller lookup went, so that a desk can tell "no match" from "the
// client system did not answer".
type LookupOutcome string

// Lookup outcomes.
const (
	LookupMatched LookupOutcome = "matched"        // one or more clients matched
	LookupNoMatch LookupOutcome = "no_match"       // the client system knows no one with the number
	LookupSkipped LookupOutcome = "skipped"        // no number to look up (anonymous or unknown caller)
	LookupFailed  LookupOutcome = "failed"         // the lookup refused, failed, timed out, or its breaker is open
	LookupNotSet  LookupOutcome = "not_configured" // the organization has no lookup endpoint
	// LookupUnknown is the outcome of a popup rebuilt from the store (a popup stream's replay
	// of a call still ringing, see docs/popup.md) whose lookup matched no one for a reason the
	// store does not keep: it failed, or the organization had no lookup endpoint.
	LookupUnknown LookupOutcome = "unknown"
)

// Popup is one ringing, for the workstations of one organization. Its JSON form is the message
// on the broker and on the desk's event stream (see docs/popup.md).
type Popup struct {
	// ID identifies the ringing: the same for every report of a call_received of the same call,
	// so that brokers publish it once and consumers can drop repeats. Required.
	ID             string `json:"id"`
	OrgID          string `json:"orgId"`
	CallID         string `json:"callId"`
	Provider       string `json:"provider"`
	ProviderCallID string `json:"providerCallId"`
	// Locations are the workstation groups the popup is for, without repeats.
	Locations  []string      `json:"locations"`
	Direction  string        `json:"direction"`
	From       *event.Party  `json:"from,omitempty"`
	To         *event.Party  `json:"to,omitempty"`
	Trunk      string        `json:"trunk,omitempty"`
	Clients    []Client      `json:"clients"`
	Lookup     LookupOutcome `json:"lookup"`
	OccurredAt time.Time     `json:"occurredAt"`
	// PublishedAt is the server time the popup was handed to the broker.
	PublishedAt time.Time `json:"publishedAt"`
	TraceID     string    `json:"traceId"`
}

// Broker carries popups from the pipeline to subscribed workstations. Implementations are safe for
// concurrent use and run the same contract tests (popuptest).
type Broker interface {
	// Publish delivers p to every current subscriber of p.OrgID whose locations include one of
	// p.Locations, once per ringing: it claims (p.OrgID, p.ID) for the broker's claim TTL as it
	// publishes, atomically with the publish, and a popup whose claim is held already (a copy
	// published through this broker, or one sharing its claims, within the TTL) is delivered to
	// nobody and answered ErrRepeat. It returns once the broker has taken the popup, or ctx's
	// error, or the broker's failure; it never waits for subscribers to read. A publish that
	// fails before the broker took the popup claims nothing.
	Publish(ctx context.Context, p Popup) error
	// Subscribe starts delivery of the organization's popups for the given locations (one or
	// more) to the returned subscription. Popups published after Subscribe returns are delivered;
	// earlier ones are not. It fails when the broker cannot be reached.
	Subscribe(ctx context.Context, orgID string, locations []string) (Subscription, error)
	// NotifyCallbacks tells every current subscription of orgID, whatever its locations, that
	// the organization's to-call-back list may have changed and is worth reading again. The
	// notice carries nothing but that; it is not claimed, so every call delivers. It returns
	// once the broker has taken the notice, or ctx's error, or the broker's failure; it never
	// waits for subscribers to read.
	NotifyCallbacks(ctx context.Context, orgID string) error
	// Close releases the broker; subscriptions end.
	Close() error
}

// Subscription is one workstation's feed.
type Subscription interface {
	// Popups delivers the subscribed popups in the order each location's were published, each
	// popup at most once even when it names several subscribed locations. A subscriber too slow
	// to keep up loses popups rather than holding up the broker. The channel is closed when the
	// subscription ends: after Close, after the Subscribe context ends, or when the broker loses
	// its connection (then Err says why).
	Popups() <-chan Popup
	// Callbacks receives a value after NotifyCallbacks for the subscription's organization, for
	// notices published after Subscribe returned. Notices coalesce: the channel holds one
	// pending notice and a notice arriving while one is pending merges into it, so a reader
	// that falls behind still learns, once, to read the list again, and a burst of writes never
	// fills a buffer. It is closed when the subscription ends, as Popups is.
	Callbacks() <-chan struct{}
	// Err is why the subscription ended, or nil while it runs or after Close.
	Err() error
	// Close ends the subscription. It is safe to call more than once.
	Close() error
}

// CallbacksChannel is the broker channel carrying an organization's to-call-back notices, to
// every location's subscriptions.
func CallbacksChannel(orgID string) string {
	return "callwire:callbacks:" + orgID
}

// Channel is the broker channel carrying an organization's popups for one location.
func Channel(orgID, location string) string {
	return "callwire:popups:" + orgID + ":" + location
}
