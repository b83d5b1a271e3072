// Package event is callwire's canonical vocabulary: the call events every phone system reports in,
// their fields, defaults and validation. It is the one definition of the wire format; the core
// decodes requests with it and translators build events with it. It imports only the standard
// library.
//
// An Event marshals to the canonical JSON the ingest endpoint takes, and ParseBody decodes a
// request body exactly as the endpoint does, reporting every problem at once.
//
// The members of an event, its call block, a party and a diversion hop are described once, in
// internal/schema; the files named *_gen.go are generated from that description (go generate).
package event

//go:generate go run ./internal/gen

import (
	"encoding/json"
	"strconv"
	"time"
)

// Type is an event type: one of the nine moments of a call.
type Type string

// The nine event types.
const (
	CallReceived    Type = "call_received"
	CallPlaced      Type = "call_placed"
	CallMissed      Type = "call_missed"
	CallAnswered    Type = "call_answered"
	CallEnded       Type = "call_ended"
	CallHold        Type = "call_hold"
	CallTransferred Type = "call_transferred"
	CallRecorded    Type = "call_recorded"
	CallTranscribed Type = "call_transcribed"
)

// Types returns the nine event types in the order the spec lists them. The slice is new on every
// call.
func Types() []Type {
	return []Type{CallReceived, CallPlaced, CallMissed, CallAnswered, CallEnded, CallHold,
		CallTransferred, CallRecorded, CallTranscribed}
}

// Valid reports whether t is one of the nine event types.
func (t Type) Valid() bool {
	switch t {
	case CallReceived, CallPlaced, CallMissed, CallAnswered, CallEnded, CallHold,
		CallTransferred, CallRecorded, CallTranscribed:
		return true
	}
	return false
}

// Observer says how much of a call the reporter can see.
type Observer string

// Observers.
const (
	// ObserverEndpoint is a phone or softphone: it sees its own leg of the call.
	ObserverEndpoint Observer = "endpoint"
	// ObserverProxy is a SIP proxy or session border controller: it sees signalling for every leg.
	ObserverProxy Observer = "proxy"
	// ObserverPBXAPI is a PBX or cloud provider reporting through its API.
	ObserverPBXAPI Observer = "pbx_api"
)

// Valid reports whether o is a known observer.
func (o Observer) Valid() bool {
	return o == ObserverEndpoint || o == ObserverProxy || o == ObserverPBXAPI
}

// Direction is which way a call goes.
type Direction string

// Directions.
const (
	Inbound  Direction = "inbound"
	Outbound Direction = "outbound"
	Internal Direction = "internal"
)

// Valid reports whether d is a known direction.
func (d Direction) Valid() bool { return d == Inbound || d == Outbound || d == Internal }

// PartyKind says how a party is identified.
type PartyKind string

// Party kinds.
const (
	// KindE164 is a party identified by an E.164 number (Number, when the reporter saw it).
	KindE164 PartyKind = "e164"
	// KindExtension is a party inside the phone system (Extension, when the reporter saw it).
	KindExtension PartyKind = "extension"
	// KindAnonymous is a caller who withheld the number (Number must be empty). It still produces
	// a popup, without a name.
	KindAnonymous PartyKind = "anonymous"
	// KindUnknown is a party the reporter could not identify, for example a number it could not
	// parse (Number must be empty; keep what was seen in URI or Name).
	KindUnknown PartyKind = "unknown"
)

// Valid reports whether k is a known party kind.
func (k PartyKind) Valid() bool {
	return k == KindE164 || k == KindExtension || k == KindAnonymous || k == KindUnknown
}

// Disposition is how a call ended.
type Disposition string

// Dispositions.
const (
	DispositionAnswered  Disposition = "answered"  // someone talked
	DispositionNoAnswer  Disposition = "no_answer" // rang out unanswered
	DispositionBusy      Disposition = "busy"      // the callee was busy
	DispositionCancelled Disposition = "cancelled" // the caller hung up before an answer
	DispositionRejected  Disposition = "rejected"  // the callee declined
	DispositionFailed    Disposition = "failed"    // the call could not be set up
	DispositionVoicemail Disposition = "voicemail" // the caller reached voicemail
)

// Valid reports whether d is a known disposition.
func (d Disposition) Valid() bool {
	switch d {
	case DispositionAnswered, DispositionNoAnswer, DispositionBusy, DispositionCancelled,
		DispositionRejected, DispositionFailed, DispositionVoicemail:
		return true
	}
	return false
}

// TransferMode is how a call was transferred.
type TransferMode string

// Transfer modes.
const (
	TransferBlind    TransferMode = "blind"
	TransferAttended TransferMode = "attended"
)

// Valid reports whether m is a known transfer mode.
func (m TransferMode) Valid() bool { return m == TransferBlind || m == TransferAttended }

// Defaults the endpoint applies to an omitted field.
const (
	DefaultProvider = "sip"
	DefaultObserver = ObserverEndpoint
	DefaultLocation = "main"
	DefaultKind     = KindE164
)

// MaxBatch is the most events one request may carry.
const MaxBatch = 50

// Party is one end of a call. Empty strings mean absent (null on the wire).
type Party struct {
	// Kind defaults to e164 when empty.
	Kind      PartyKind `json:"kind,omitempty"`
	Number    string    `json:"number,omitempty"`
	Name      string    `json:"name,omitempty"`
	Extension string    `json:"extension,omitempty"`
	URI       string    `json:"uri,omitempty"`
}

// EffectiveKind returns the party's kind with the default applied.
func (p Party) EffectiveKind() PartyKind {
	if p.Kind == "" {
		return DefaultKind
	}
	return p.Kind
}

// Diversion is one hop of the forwarded-from chain: the party the call was forwarded from, why,
// and how many times it had been forwarded at that point (RFC 5806 / RFC 7044 style).
type Diversion struct {
	Party
	// Reason is why the call was forwarded, for example "no-answer", "user-busy",
	// "unconditional"; free text in lower case.
	Reason string `json:"reason,omitempty"`
	// Counter is the diversion counter when the reporter saw one; nil when not.
	Counter *int `json:"counter,omitempty"`
}

// Call is the call block every event carries in full, so that any event can create the call.
type Call struct {
	Direction Direction   `json:"direction"`
	From      *Party      `json:"from,omitempty"`
	To        *Party      `json:"to,omitempty"`
	Trunk     string      `json:"trunk,omitempty"`
	Diversion []Diversion `json:"diversion,omitempty"`
}

// Clone returns a copy of c that shares no memory with it: its parties, diversion hops and
// their counters are copied, so that changing one event's call block changes no other's.
func (c Call) Clone() Call {
	if c.From != nil {
		f := *c.From
		c.From = &f
	}
	if c.To != nil {
		t := *c.To
		c.To = &t
	}
	if c.Diversion != nil {
		ds := make([]Diversion, len(c.Diversion))
		for i, d := range c.Diversion {
			if d.Counter != nil {
				n := *d.Counter
				d.Counter = &n
			}
			ds[i] = d
		}
		c.Diversion = ds
	}
	return c
}

// Event is one canonical call event: the envelope every event has, the call block, and the extra
// fields of its type. Empty strings, nil pointers and nil slices mean absent (null on the wire),
// and the endpoint applies the documented defaults.
type Event struct {
	Type           Type      `json:"type"`
	ProviderCallID string    `json:"providerCallId"`
	OccurredAt     time.Time `json:"occurredAt"`
	Call           Call      `json:"call"`

	// Provider defaults to "sip". With ProviderCallID it is the key the call is filed under.
	Provider string `json:"provider,omitempty"`
	// Sequence is the reporter's counter for the call; ordering and deduplication use it.
	Sequence int64 `json:"sequence,omitempty"`
	// ProviderEventID identifies the event, not its order. A provider that can emit one type twice
	// in a call without counting (call_hold, say) must set it, or the second is a duplicate.
	ProviderEventID string `json:"providerEventId,omitempty"`
	// Observer defaults to endpoint.
	Observer Observer `json:"observer,omitempty"`
	// Locations are the workstation groups to wake; nil means ["main"].
	Locations []string `json:"locations,omitempty"`
	// Raw is the wire record (a JSON object), stored verbatim and never parsed.
	Raw json.RawMessage `json:"raw,omitempty"`

	// AnsweredBy (call_answered) is the extension that picked up.
	AnsweredBy string `json:"answeredBy,omitempty"`

	// Disposition (call_ended) is how the call ended.
	Disposition Disposition `json:"disposition,omitempty"`
	// Duration is in seconds: for call_ended, from the first moment of the call to its end; for
	// call_recorded, the length of the recording.
	Duration *float64 `json:"duration,omitempty"`
	// TalkTime (call_ended) is the seconds from answer to end.
	TalkTime *float64 `json:"talkTime,omitempty"`
	// AnsweredElsewhere (call_ended) is true when another device took the call.
	AnsweredElsewhere *bool `json:"answeredElsewhere,omitempty"`
	// SIPCode (call_ended) is the final SIP status code, 100 to 699.
	SIPCode *int `json:"sipCode,omitempty"`
	// SIPReason (call_ended) is the SIP reason phrase.
	SIPReason string `json:"sipReason,omitempty"`

	// Released (call_hold): false puts the call on hold, true takes it off. Absent means false.
	Released *bool `json:"released,omitempty"`

	// TransferTo (call_transferred, "to" on the wire) is the party the call was sent to.
	TransferTo *Party `json:"to,omitempty"`
	// Mode (call_transferred) is blind or attended.
	Mode TransferMode `json:"mode,omitempty"`

	// URL (call_recorded) is where the recording can be fetched: an absolute http or https URL.
	URL string `json:"url,omitempty"`
	// MIMEType (call_recorded) is the recording's media type, for example "audio/wav".
	MIMEType string `json:"mimeType,omitempty"`
	// Bytes (call_recorded) is the recording's size.
	Bytes *int64 `json:"bytes,omitempty"`

	// Text (call_transcribed) is the transcript.
	Text string `json:"text,omitempty"`
	// Language (call_transcribed) is the transcript's BCP 47 language tag, for example "en-GB".
	Language string `json:"language,omitempty"`
	// Confidence (call_transcribed) is the transcriber's confidence, 0 to 1.
	Confidence *float64 `json:"confidence,omitempty"`
}

// New returns an event of type t for the call providerCallID, occurring at occurredAt (kept in
// UTC), with the given call block. Set the remaining fields directly.
func New(t Type, providerCallID string, occurredAt time.Time, call Call) Event {
	return Event{Type: t, ProviderCallID: providerCallID, OccurredAt: occurredAt.UTC(), Call: call}
}

// E164 returns a party identified by an E.164 number.
func E164(number string) *Party { return &Party{Kind: KindE164, Number: number} }

// Extension returns a party inside the phone system.
func Extension(ext string) *Party { return &Party{Kind: KindExtension, Extension: ext} }

// Anonymous returns a caller who withheld the number.
func Anonymous() *Party { return &Party{Kind: KindAnonymous} }

// Ptr returns a pointer to v, for the optional numeric and boolean fields.
func Ptr[T any](v T) *T { return &v }

// EffectiveProvider returns the provider with the default applied.
func (e *Event) EffectiveProvider() string {
	if e.Provider == "" {
		return DefaultProvider
	}
	return e.Provider
}

// EffectiveObserver returns the observer with the default applied.
func (e *Event) EffectiveObserver() Observer {
	if e.Observer == "" {
		return DefaultObserver
	}
	return e.Observer
}

// EffectiveLocations returns the locations with the default applied. The result must not be
// modified.
func (e *Event) EffectiveLocations() []string {
	if len(e.Locations) == 0 {
		return []string{DefaultLocation}
	}
	return e.Locations
}

// DedupeKey returns the key the event is deduplicated on within its call: the provider's event id
// when present, otherwise "<type>:<sequence>".
func (e *Event) DedupeKey() string {
	if e.ProviderEventID != "" {
		return e.ProviderEventID
	}
	// One allocation, the key's own.
	var buf [64]byte
	return string(e.AppendDedupeKey(buf[:0]))
}

// AppendDedupeKey appends the event's DedupeKey to b and returns the extended buffer.
func (e *Event) AppendDedupeKey(b []byte) []byte {
	if e.ProviderEventID != "" {
		return append(b, e.ProviderEventID...)
	}
	return strconv.AppendInt(append(append(b, e.Type...), ':'), e.Sequence, 10)
}

// MarshalJSON encodes the event as canonical JSON: fields in a fixed order, absent fields left
// out, occurredAt in UTC.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(make([]byte, 0, e.sizeHint()))
}
