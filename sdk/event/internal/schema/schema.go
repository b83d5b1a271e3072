// Package schema is the one description of an event's JSON: every member of an event, of its
// call block, of a party and of a diversion hop, in the canonical order on the wire, with the Go
// field that holds it, the kind of its value, the event types that carry it and whether it is
// required. Generate writes from it the code of package event that must agree with it: the member
// numbers and key switches, the one-pass reader's and the tree decoder's dispatch on a member,
// the encoder's sequence of members, the check that a member belongs to its event's type, the
// checks of members required for a type, and Fields. Value checks that are more than the kind of
// a value (lengths, ranges, URLs, media types, language tags) stay hand-written in package event.
//
// Package event runs it with go generate (internal/gen), and its tests hold the files it wrote
// to what Generate writes now.
package schema

// Kind is the kind of a member's value: how it is read, decoded and written.
type Kind int

// The kinds of value. Every kind but Whole, Time, CallBlock and the required members takes null
// for absent.
const (
	// String is a string, null read as "".
	String Kind = iota
	// NonEmpty is a string that may be null but not "" (Member.EmptyProblem says why).
	NonEmpty
	// Enum is a string of a named string type (Member.Enum).
	Enum
	// Time is an RFC 3339 timestamp in UTC, held in a time.Time.
	Time
	// Float is a number held in a *float64.
	Float
	// Whole is a whole number held in an int64, zero for absent.
	Whole
	// Int is a whole number held in a *int64.
	Int
	// SmallInt is a whole number that fits an int32, held in a *int.
	SmallInt
	// Bool is true or false, held in a *bool.
	Bool
	// PartyRef is a party object, held in a *Party.
	PartyRef
	// Strings is an array of strings.
	Strings
	// Raw is a JSON object held verbatim in a json.RawMessage.
	Raw
	// CallBlock is the event's call block.
	CallBlock
	// Hops is the call's array of diversion hops.
	Hops
)

// Member is one member of an object.
type Member struct {
	// Key is the member's JSON key.
	Key string
	// Const is the name of the member's number in package event.
	Const string
	// Field is the name of the Go field that holds the member, in its object's struct.
	Field string
	// Kind is the kind of the member's value.
	Kind Kind
	// Enum is the Go type of an Enum member.
	Enum string
	// Types are the event types (their Go constants) that carry the member; none means every
	// type. Only an event's members may name types.
	Types []string
	// Required is true for a member its object must give (not null); it is always written.
	Required bool
	// RequiredFor is the event type (its Go constant) that must give the member, if any.
	RequiredFor string
	// EmptyProblem is the problem the tree decoder lists for a NonEmpty member given as "".
	EmptyProblem string
	// Check is the validator's check of the member's value.
	Check Check
}

// Check is the validator's check of a member's value beyond its kind. A member checks at most
// one of these; the zero Check checks nothing.
type Check struct {
	// RequiredProblem is the problem of a required Enum member that is absent.
	RequiredProblem string
	// EnumProblem is how the problem of an Enum member that is not one of its type's values
	// (its Valid method) starts; the value, quoted, ends it.
	EnumProblem string
	// ID checks a String member as an id: at most MaxIDLength bytes, no control characters
	// (checkID), required when the member is.
	ID bool
	// MaxChars is the most characters a String member may hold: a constant of package event,
	// or a number.
	MaxChars string
	// Seconds checks a Float member as a number of seconds, zero or more (checkSeconds).
	Seconds bool
	// Min and Max, either of them empty for no bound, bound a number member; Problem is the
	// problem of a number outside them (or, for a Float, not a number).
	Min, Max, Problem string
	// MaxItems is the constant of package event that bounds a Hops member's length.
	MaxItems string
	// Func is the hand-written method of the member's object in package event that checks the
	// member, called with the problems and the object's path (and, for a Raw member, whether
	// the raw is known to be a JSON object).
	Func string
}

// EventType is one event type: its Go constant in package event and its name on the wire.
type EventType struct {
	Const, Wire string
}

// Types returns the nine event types in the order the spec lists them.
func Types() []EventType {
	return []EventType{
		{"CallReceived", "call_received"},
		{"CallPlaced", "call_placed"},
		{"CallMissed", "call_missed"},
		{"CallAnswered", "call_answered"},
		{"CallEnded", "call_ended"},
		{"CallHold", "call_hold"},
		{"CallTransferred", "call_transferred"},
		{"CallRecorded", "call_recorded"},
		{"CallTranscribed", "call_transcribed"},
	}
}

// Event returns the members of an event object.
func Event() []Member {
	typeProblem := "must be one of "
	for i, t := range Types() {
		if i > 0 {
			typeProblem += ", "
		}
		typeProblem += t.Wire
	}
	typeProblem += ", got "
	ended := []string{"CallEnded"}
	recorded := []string{"CallRecorded"}
	transcribed := []string{"CallTranscribed"}
	transferred := []string{"CallTransferred"}
	return []Member{
		{Key: "type", Const: "mType", Field: "Type", Kind: Enum, Enum: "Type", Required: true,
			Check: Check{RequiredProblem: "is required", EnumProblem: typeProblem}},
		{Key: "providerCallId", Const: "mProviderCallID", Field: "ProviderCallID", Kind: String, Required: true,
			Check: Check{ID: true}},
		{Key: "occurredAt", Const: "mOccurredAt", Field: "OccurredAt", Kind: Time, Required: true,
			Check: Check{Func: "checkOccurredAt"}},
		{Key: "call", Const: "mCall", Field: "Call", Kind: CallBlock, Required: true},
		{Key: "provider", Const: "mProvider", Field: "Provider", Kind: NonEmpty,
			EmptyProblem: `must not be empty; leave it out for "sip"`, Check: Check{Func: "checkProvider"}},
		{Key: "sequence", Const: "mSequence", Field: "Sequence", Kind: Whole,
			Check: Check{Min: "0", Problem: "must be zero or more"}},
		{Key: "providerEventId", Const: "mProviderEventID", Field: "ProviderEventID", Kind: NonEmpty,
			EmptyProblem: "must not be empty; use null when there is none", Check: Check{Func: "checkProviderEventID"}},
		{Key: "observer", Const: "mObserver", Field: "Observer", Kind: Enum, Enum: "Observer",
			Check: Check{EnumProblem: "must be one of endpoint, proxy, pbx_api, got "}},
		{Key: "locations", Const: "mLocations", Field: "Locations", Kind: Strings, Check: Check{Func: "checkLocations"}},
		{Key: "raw", Const: "mRaw", Field: "Raw", Kind: Raw, Check: Check{Func: "checkRaw"}},
		{Key: "answeredBy", Const: "mAnsweredBy", Field: "AnsweredBy", Kind: String, Types: []string{"CallAnswered"},
			Check: Check{MaxChars: "MaxExtensionLength"}},
		{Key: "disposition", Const: "mDisposition", Field: "Disposition", Kind: Enum, Enum: "Disposition", Types: ended,
			Check: Check{EnumProblem: "must be one of answered, no_answer, busy, cancelled, rejected, failed, voicemail, got "}},
		{Key: "duration", Const: "mDuration", Field: "Duration", Kind: Float, Types: []string{"CallEnded", "CallRecorded"},
			Check: Check{Seconds: true}},
		{Key: "talkTime", Const: "mTalkTime", Field: "TalkTime", Kind: Float, Types: ended, Check: Check{Seconds: true}},
		{Key: "answeredElsewhere", Const: "mAnsweredElsewhere", Field: "AnsweredElsewhere", Kind: Bool, Types: ended},
		{Key: "sipCode", Const: "mSIPCode", Field: "SIPCode", Kind: SmallInt, Types: ended,
			Check: Check{Min: "100", Max: "699", Problem: "must be a SIP status code from 100 to 699"}},
		{Key: "sipReason", Const: "mSIPReason", Field: "SIPReason", Kind: String, Types: ended,
			Check: Check{MaxChars: "MaxNameLength"}},
		{Key: "released", Const: "mReleased", Field: "Released", Kind: Bool, Types: []string{"CallHold"}},
		{Key: "to", Const: "mTo", Field: "TransferTo", Kind: PartyRef, Types: transferred},
		{Key: "mode", Const: "mMode", Field: "Mode", Kind: Enum, Enum: "TransferMode", Types: transferred,
			Check: Check{EnumProblem: "must be blind or attended, got "}},
		{Key: "url", Const: "mURL", Field: "URL", Kind: String, Types: recorded, RequiredFor: "CallRecorded",
			Check: Check{Func: "checkURL"}},
		{Key: "mimeType", Const: "mMIMEType", Field: "MIMEType", Kind: String, Types: recorded,
			Check: Check{Func: "checkMIMEType"}},
		{Key: "bytes", Const: "mBytes", Field: "Bytes", Kind: Int, Types: recorded,
			Check: Check{Min: "0", Problem: "must be zero or more"}},
		{Key: "text", Const: "mText", Field: "Text", Kind: String, Types: transcribed, RequiredFor: "CallTranscribed"},
		{Key: "language", Const: "mLanguage", Field: "Language", Kind: String, Types: transcribed,
			Check: Check{Func: "checkLanguage"}},
		{Key: "confidence", Const: "mConfidence", Field: "Confidence", Kind: Float, Types: transcribed,
			Check: Check{Min: "0", Max: "1", Problem: "must be a number from 0 to 1"}},
	}
}

// Call returns the members of a call block.
func Call() []Member {
	return []Member{
		{Key: "direction", Const: "mDirection", Field: "Direction", Kind: Enum, Enum: "Direction", Required: true,
			Check: Check{RequiredProblem: "is required: inbound, outbound or internal",
				EnumProblem: "must be one of inbound, outbound, internal, got "}},
		{Key: "from", Const: "mFrom", Field: "From", Kind: PartyRef},
		{Key: "to", Const: "mCallTo", Field: "To", Kind: PartyRef},
		{Key: "trunk", Const: "mTrunk", Field: "Trunk", Kind: String, Check: Check{MaxChars: "MaxNameLength"}},
		{Key: "diversion", Const: "mDiversion", Field: "Diversion", Kind: Hops, Check: Check{MaxItems: "MaxDiversions"}},
	}
}

// Party returns the members of a party. Every one is a String or an Enum.
func Party() []Member {
	return []Member{
		{Key: "kind", Const: "mKind", Field: "Kind", Kind: Enum, Enum: "PartyKind",
			Check: Check{EnumProblem: "must be one of e164, extension, anonymous, unknown, got "}},
		{Key: "number", Const: "mNumber", Field: "Number", Kind: String, Check: Check{Func: "checkNumber"}},
		{Key: "name", Const: "mName", Field: "Name", Kind: String, Check: Check{MaxChars: "MaxNameLength"}},
		{Key: "extension", Const: "mExtension", Field: "Extension", Kind: String, Check: Check{MaxChars: "MaxExtensionLength"}},
		{Key: "uri", Const: "mURI", Field: "URI", Kind: String, Check: Check{MaxChars: "MaxURILength"}},
	}
}

// Hop returns the members a diversion hop adds to those of a party, which it has first.
func Hop() []Member {
	return []Member{
		{Key: "reason", Const: "mReason", Field: "Reason", Kind: String, Check: Check{MaxChars: "64"}},
		{Key: "counter", Const: "mCounter", Field: "Counter", Kind: SmallInt,
			Check: Check{Min: "0", Max: "100", Problem: "must be from 0 to 100"}},
	}
}
