// Package store defines what callwire keeps on disk: organizations, their API keys, calls and the
// events reported about them. Implementations live in subpackages (postgres, sqlite); every one of
// them must pass the contract suite in storetest.
//
// Every record carries its organization, and every lookup takes one: nothing written under one
// organization is ever visible through another.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nyaruka/phonenumbers"
)

// ErrNotFound reports that the record asked for does not exist (within the organization asked).
var ErrNotFound = errors.New("not found")

// ErrConflict reports that a record with the same unique key already exists.
var ErrConflict = errors.New("already exists")

// ErrInvalid reports that a value was refused before anything was written: the error wrapping it
// says which and why.
var ErrInvalid = errors.New("invalid")

// ErrUnavailable marks a failure that is expected to pass: the database is unreachable, the
// connection pool stayed exhausted past its wait, the server is shutting down, or a transaction
// lost a serialization or deadlock race. Nothing was written. Callers answer 503 and the reporter
// retries. Test with errors.Is(err, ErrUnavailable).
var ErrUnavailable = errors.New("store unavailable")

// ErrKeyRejected reports that a KeyCheck failed: no key has that client ID and secret hash, or
// it is revoked, or it has expired. The operation it guarded did nothing.
var ErrKeyRejected = errors.New("key rejected")

// KeyCheck asks the store to confirm, in the same transaction as the work it guards, that a key
// is live: that ClientID names a key whose secret hashes to SecretHash, not revoked, and not
// expired at At. It lets a caller that knows a key's immutable facts (its organization and
// scopes, fixed at creation) skip a separate lookup while revocation, rotation and expiry still
// take effect for the very next operation.
type KeyCheck struct {
	ClientID   string
	SecretHash []byte
	At         time.Time
}

// State is a call's position on the ladder unknown < ringing < answered < ended. It only climbs:
// a write never lowers a stored state.
type State int16

// The ladder, in order.
const (
	StateUnknown  State = 0
	StateRinging  State = 1
	StateAnswered State = 2
	StateEnded    State = 3
)

// String returns the state's name as used in the API and the docs.
func (s State) String() string {
	switch s {
	case StateUnknown:
		return "unknown"
	case StateRinging:
		return "ringing"
	case StateAnswered:
		return "answered"
	case StateEnded:
		return "ended"
	}
	return "invalid"
}

// Org is a clinic: the tenant every call and key belongs to.
type Org struct {
	ID        string
	Name      string
	CreatedAt time.Time
	// Lookup is where the organization's client system answers who owns a phone number; its
	// zero value means the organization has none.
	Lookup Lookup
	// Region is the organization's time zone and country; its zero value means UTC and no
	// country.
	Region Region
	// RetentionDays is how many days the organization's calls are kept after their last
	// activity (see PurgeCalls); 0 means forever. Otherwise 1 to MaxRetentionDays.
	RetentionDays int
}

// MaxRetentionDays is the longest retention an organization may set: a hundred years.
const MaxRetentionDays = 36500

// ValidateRetentionDays reports whether days is a retention an organization may have: 0
// (forever) or a whole number of days from 1 to MaxRetentionDays.
func ValidateRetentionDays(days int) error {
	if days < 0 || days > MaxRetentionDays {
		return fmt.Errorf("retention of %d days: must be a whole number of days from 1 to %d, or 0 to keep calls forever", days, MaxRetentionDays)
	}
	return nil
}

// Purged counts what one PurgeCalls removed.
type Purged struct {
	Calls  int
	Events int
}

// Region is where an organization's people are: the time zone they read times in and the
// country whose national numbering they write phone numbers in. The API speaks UTC; a date in a
// filter, a time in a CSV export and a time on the desk are read in TimeZone.
type Region struct {
	// TimeZone is an IANA time zone name such as "Europe/London"; "" means UTC.
	TimeZone string
	// Country is an ISO 3166-1 alpha-2 code in upper case such as "GB", the region a number
	// written in national form is read in; "" means none, and then only E.164 numbers and
	// trailing digits match.
	Country string
}

// Validate reports every problem with r at once, or nil: TimeZone must be "" or a name
// time.LoadLocation knows, and Country "" or an upper-case ISO 3166-1 alpha-2 code the
// phone-number metadata (github.com/nyaruka/phonenumbers) has a numbering plan for.
func (r Region) Validate() error {
	var errs []error
	if r.TimeZone != "" {
		if _, err := r.Location(); err != nil {
			errs = append(errs, err)
		}
	}
	if r.Country != "" && (len(r.Country) != 2 || strings.ToUpper(r.Country) != r.Country ||
		!phonenumbers.GetSupportedRegions()[r.Country]) {
		errs = append(errs, fmt.Errorf("country %q is not an ISO 3166-1 alpha-2 code with a numbering plan, such as US, GB or DE", r.Country))
	}
	return errors.Join(errs...)
}

// Location returns r's time zone: time.UTC for "", or an error naming TimeZone when it is not an
// IANA time zone name.
func (r Region) Location() (*time.Location, error) {
	if r.TimeZone == "" {
		return time.UTC, nil
	}
	// LoadLocation also accepts "Local", the zone of whatever machine runs the server: not a
	// zone a clinic can name.
	if r.TimeZone == "Local" {
		return nil, fmt.Errorf("time zone %q is not an IANA time zone name such as Europe/London", r.TimeZone)
	}
	loc, err := time.LoadLocation(r.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("time zone %q is not an IANA time zone name such as Europe/London: %w", r.TimeZone, err)
	}
	return loc, nil
}

// Lookup is an organization's caller lookup endpoint (see docs/caller-lookup.md).
type Lookup struct {
	// URL is the absolute http or https URL callwire sends GET <URL>?number=<E.164> to; "" means
	// the organization has no lookup.
	URL string
	// Token, when not "", is sent as "Authorization: Bearer <Token>". It is a secret: stored as
	// given (callwire must present it), never logged or printed in full.
	Token string
	// Timeout bounds one request to URL; 0 means the server's default (lookup.timeout). Kept to
	// the nanosecond.
	Timeout time.Duration
}

// Key is an API credential. Only a hash of its secret and the secret's last eight characters are
// kept; the secret itself is never stored.
type Key struct {
	// ClientID names the key. Unique across all organizations.
	ClientID string
	// OrgID is the organization the key is federated to, or "" for an operator key that is not
	// locked to any organization.
	OrgID string
	// Scopes the key holds, for example "org.calls.events".
	Scopes []string
	// SecretHash is the SHA-256 of the secret. Unique across all keys.
	SecretHash []byte
	// SecretLast8 is the last eight characters of the secret, for display.
	SecretLast8 string
	CreatedAt   time.Time
	// ExpiresAt is when the key stops working; nil means never.
	ExpiresAt *time.Time
	// RevokedAt is when the key was revoked; nil means it was not.
	RevokedAt *time.Time
	// RotatedAt is when the secret was last replaced; nil means never.
	RotatedAt *time.Time
}

// EventWrite is one event to append to a call.
type EventWrite struct {
	// ID is the identifier the event gets if this write stores it. Ignored for a duplicate.
	ID string
	// Type is the event type, for example "call_received".
	Type string
	// DedupeKey identifies the event within its call: the provider's event id when it gave one,
	// otherwise "<type>:<sequence>".
	DedupeKey string
	Sequence  int64
	// ProviderEventID is the provider's own id for the event, or "" when it gave none.
	ProviderEventID string
	// OccurredAt is the reporter's own timestamp, as sent.
	OccurredAt time.Time
	// OrderAt is OccurredAt clamped to the server's clock: what the event is ordered by.
	OrderAt time.Time
	// Body is the event's JSON exactly as the reporter sent it. Stored and returned byte for byte.
	Body json.RawMessage
}

// CallWrite is everything one request says about one call: an upsert of the call and an append of
// its events. The events of one CallWrite have distinct dedupe keys.
type CallWrite struct {
	Provider       string
	ProviderCallID string
	// Direction is "inbound", "outbound" or "internal".
	Direction string
	// State is the highest state the write's events imply. The stored state becomes the greater
	// of the stored and this.
	State State
	// Block is the call block (JSON object) of the write's latest event in order, BlockSequence
	// and BlockAt its position. The stored block (and Direction) is replaced only when this
	// position is not before the stored one, comparing sequence first, then time.
	Block         json.RawMessage
	BlockSequence int64
	BlockAt       time.Time
	// FirstAt and LastAt are the smallest and greatest OrderAt of the write's events. The stored
	// values widen to cover them.
	FirstAt time.Time
	LastAt  time.Time
	// Clients is the JSON array of client-system matches found for this call, or nil when no
	// lookup was made. A nil never erases stored matches; a non-nil value replaces them.
	Clients json.RawMessage
	// Summary is what the write's events say toward the call's history row; it merges into the
	// stored one (see Summary).
	Summary Summary
	Events  []EventWrite
}

// Write is one request's worth of changes for one organization. It is applied atomically: all of
// it or none of it. Its Calls name distinct calls (no two with one provider and provider call
// ID), as the ingest planner makes them; a store may refuse a Write that repeats one, without
// writing.
type Write struct {
	OrgID string
	// ReceivedAt is the server time the request arrived; stored on each new event.
	ReceivedAt time.Time
	Calls      []CallWrite
	// Check, when not nil, must pass in the same transaction, or the write fails with
	// ErrKeyRejected and nothing is written.
	Check *KeyCheck
}

// CallResult reports what a Write did to one call. Results come in the order of Write.Calls.
type CallResult struct {
	// ID is the call's identifier as stored: CallID(Write.OrgID, Provider, ProviderCallID) for
	// every call created through WriteCalls.
	ID string
	// Created is true only for the one write that created the call, even when several writes
	// race to create it.
	Created bool
	// Clients is the stored JSON array of client-system matches after the write, or nil.
	Clients json.RawMessage
	// Events come in the order of CallWrite.Events.
	Events []EventResult
	// CallbacksChanged is true when the write may have changed an item of the organization's
	// to-call-back list through this call (see CallbackStore); false only when it cannot have.
	// A store without the list leaves it false.
	CallbacksChanged bool
}

// EventResult reports what a Write did with one event.
type EventResult struct {
	// ID is the event's identifier: the new one if stored now, the stored one if a duplicate.
	ID string
	// Duplicate is true when an event with the same dedupe key was already on file for the call.
	Duplicate bool
}

// EventRef names one event of one call, for asking whether it is on file.
type EventRef struct {
	Provider       string
	ProviderCallID string
	DedupeKey      string
}

// Ringing is what the store knows, before a popup, of one call_received.
type Ringing struct {
	// Known is true when the event is on file.
	Known bool
	// State is the state the event's call has reached; StateUnknown when there is no call.
	State State
}

// Call is a stored call record.
type Call struct {
	ID string
	// No numbers the organization's calls in the order the store created them; it means nothing
	// outside the store, and breaks ties between calls that started at the same instant.
	No             int64
	OrgID          string
	Provider       string
	ProviderCallID string
	Direction      string
	State          State
	Block          json.RawMessage
	BlockSequence  int64
	BlockAt        time.Time
	FirstAt        time.Time
	LastAt         time.Time
	Clients        json.RawMessage
	// Summary is the call's history row as merged from every write (see Summary).
	Summary   Summary
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Event is a stored event.
type Event struct {
	ID              string
	CallID          string
	Type            string
	DedupeKey       string
	Sequence        int64
	ProviderEventID string
	OccurredAt      time.Time
	OrderAt         time.Time
	ReceivedAt      time.Time
	Body            json.RawMessage
}

// Store is the whole persistence contract. Implementations are safe for concurrent use, by many
// goroutines and by several processes (or replicas) sharing one database.
//
// Errors: ErrNotFound and ErrConflict as documented per method; anything transient wraps
// ErrUnavailable; anything else is permanent.
type Store interface {
	// WriteCalls applies w atomically and returns one result per call, in order. Calls are
	// locked in a fixed order (provider, then providerCallId) so that concurrent writes touching
	// the same calls cannot deadlock. An event whose dedupe key is already on file for its call is
	// not written again and comes back Duplicate with the stored ID. A call is filed under
	// CallID of its key. It keeps nothing of w once it returns, so that its caller may reuse w's
	// memory.
	WriteCalls(ctx context.Context, w Write) ([]CallResult, error)
	// KnownEvents reports, for each ref in order, whether that event is on file for the
	// organization. A non-nil check must pass first, or it fails with ErrKeyRejected.
	KnownEvents(ctx context.Context, orgID string, refs []EventRef, check *KeyCheck) ([]bool, error)
	// Ringing reports, for each ref in order, whether that event is on file and the state its
	// call has reached (StateUnknown when there is no such call): what decides whether a
	// call_received still rings. A non-nil check must pass first, or it fails with
	// ErrKeyRejected.
	Ringing(ctx context.Context, orgID string, refs []EventRef, check *KeyCheck) ([]Ringing, error)
	// GetCall returns the call and its events ordered by (sequence, OrderAt, ReceivedAt, ID), or
	// ErrNotFound.
	GetCall(ctx context.Context, orgID, provider, providerCallID string) (Call, []Event, error)
	// GetCallByID is GetCall for the call whose ID is id: ErrNotFound when the organization has
	// no such call, whether or not another organization has.
	GetCallByID(ctx context.Context, orgID, id string) (Call, []Event, error)
	// ListCalls returns up to limit (1 to MaxListLimit) of the organization's calls that f
	// selects, each with its events, newest first: by start (FirstAt) descending, then by No
	// descending. With after not nil it returns only calls strictly after that position in this
	// order, so that walking the pages with the last call's Position sees every selected call
	// once, however many calls are created meanwhile (they start later, or have a greater No).
	// An f that fails Validate, or a limit out of range, is an error wrapping ErrInvalid.
	ListCalls(ctx context.Context, orgID string, f CallFilter, after *CallPosition, limit int) ([]CallRecord, error)
	// RingingCalls returns up to limit (1 to MaxRingingLimit) of the organization's calls that
	// ring now (State is StateRinging: neither answered nor ended yet), started (FirstAt) at or
	// after since, and whose Summary.Locations name one of locations (1 to event.MaxLocations
	// names), newest first as ListCalls orders them, without their events. It is what a popup
	// stream replays to a desk that connects while calls ring (see docs/popup.md). A call with
	// no locations on file is not returned. A limit out of range, or no locations, is an error
	// wrapping ErrInvalid.
	RingingCalls(ctx context.Context, orgID string, locations []string, since time.Time, limit int) ([]Call, error)

	// CreateOrg stores a new organization, its Lookup, Region and RetentionDays included;
	// ErrConflict if the ID exists, an error wrapping ErrInvalid if o.Region.Validate or
	// ValidateRetentionDays(o.RetentionDays) fails.
	CreateOrg(ctx context.Context, o Org) error
	// GetOrg returns the organization, its Lookup and Region included, or ErrNotFound.
	GetOrg(ctx context.Context, id string) (Org, error)
	// ListOrgs returns every organization, their Lookups and Regions included, oldest first.
	ListOrgs(ctx context.Context) ([]Org, error)
	// UpdateOrgLookup replaces the organization's Lookup with l (a zero l removes it); ErrNotFound
	// if there is no such organization. The next GetOrg or ListOrgs returns l.
	UpdateOrgLookup(ctx context.Context, orgID string, l Lookup) error
	// UpdateOrgRegion replaces the organization's Region with r (a zero r means UTC and no
	// country); ErrNotFound if there is no such organization, and an error wrapping
	// ErrInvalid, writing nothing, when r.Validate fails. The next GetOrg or ListOrgs returns r.
	UpdateOrgRegion(ctx context.Context, orgID string, r Region) error
	// UpdateOrgRetention sets the organization's RetentionDays (0 keeps its calls forever);
	// ErrNotFound if there is no such organization, and an error wrapping ErrInvalid, writing
	// nothing, when ValidateRetentionDays fails. The next GetOrg or ListOrgs returns days.
	UpdateOrgRetention(ctx context.Context, orgID string, days int) error
	// PurgeCalls removes, in one transaction, up to limit (at least 1) of the organization's
	// calls whose last activity is before cutoff, each with all its events, oldest start first.
	// A call's last activity is the later of its LastAt (its latest event) and UpdatedAt (the
	// last write to it), whatever its state. It removes nothing of another organization and
	// nothing whose last activity is at or after cutoff; a call being written meanwhile is
	// either left whole or removed whole, and an event written to a removed call afterwards
	// creates the call anew, as any first event does. Calling it again with the same arguments
	// removes what is left; Purged is zero when nothing is due. It ignores the organization's
	// RetentionDays: the caller computes cutoff from it.
	PurgeCalls(ctx context.Context, orgID string, cutoff time.Time, limit int) (Purged, error)

	// CreateKey stores a new key; ErrConflict if the client ID or secret hash exists, ErrNotFound
	// if k.OrgID names no organization.
	CreateKey(ctx context.Context, k Key) error
	// KeyByClientID returns the key, revoked and expired ones included, or ErrNotFound.
	KeyByClientID(ctx context.Context, clientID string) (Key, error)
	// KeyBySecretHash returns the key whose secret hashes to hash, or ErrNotFound.
	KeyBySecretHash(ctx context.Context, hash []byte) (Key, error)
	// A key's client ID, organization and scopes never change after CreateKey; callers may cache
	// them. Its secret hash, revocation and expiry may change at any time (see KeyCheck).

	// ListKeys returns the organization's keys, oldest first; orgID "" lists operator keys.
	ListKeys(ctx context.Context, orgID string) ([]Key, error)
	// RevokeKey marks the key revoked at the given time; ErrNotFound if there is no such key.
	// Revoking a revoked key keeps the first revocation time.
	RevokeKey(ctx context.Context, clientID string, at time.Time) error
	// RotateKey replaces the key's secret hash and last eight characters; the old secret stops
	// working at once. ErrNotFound if there is no such key, ErrConflict if the hash is taken.
	RotateKey(ctx context.Context, clientID string, hash []byte, last8 string, at time.Time) error

	// Ping reports whether the store can serve requests now.
	Ping(ctx context.Context) error
	// Close releases the store's resources.
	Close() error
}
