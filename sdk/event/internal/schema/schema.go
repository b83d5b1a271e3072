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
	ended := []string{"CallEnded"}
	recorded := []string{"CallRecorded"}
	transcribed := []string{"CallTranscribed"}
	transferred := []string{"CallTransferred"}
	return []Member{
		{Key: "type", Const: "mType", Field: "Type", Kind: Enum, Enum: "Type", Required: true},
		{Key: "providerCallId", Const: "mProviderCallID", Field: "ProviderCallID", Kind: String, Required: true},
		{Key: "occurredAt", Const: "mOccurredAt", Field: "OccurredAt", Kind: Time, Required: true},
		{Key: "call", Const: "mCall", Field: "Call", Kind: CallBlock, Required: true},
		{Key: "provider", Const: "mProvider", Field: "Provider", Kind: NonEmpty,
			EmptyProblem: `must not be empty; leave it out for "sip"`},
		{Key: "sequence", Const: "mSequence", Field: "Sequence", Kind: Whole},
		{Key: "providerEventId", Const: "mProviderEventID", Field: "ProviderEventID", Kind: NonEmpty,
			EmptyProblem: "must not be empty; use null when there is none"},
		{Key: "observer", Const: "mObserver", Field: "Observer", Kind: Enum, Enum: "Observer"},
		{Key: "locations", Const: "mLocations", Field: "Locations", Kind: Strings},
		{Key: "raw", Const: "mRaw", Field: "Raw", Kind: Raw},
		{Key: "answeredBy", Const: "mAnsweredBy", Field: "AnsweredBy", Kind: String, Types: []string{"CallAnswered"}},
		{Key: "disposition", Const: "mDisposition", Field: "Disposition", Kind: Enum, Enum: "Disposition", Types: ended},
		{Key: "duration", Const: "mDuration", Field: "Duration", Kind: Float, Types: []string{"CallEnded", "CallRecorded"}},
		{Key: "talkTime", Const: "mTalkTime", Field: "TalkTime", Kind: Float, Types: ended},
		{Key: "answeredElsewhere", Const: "mAnsweredElsewhere", Field: "AnsweredElsewhere", Kind: Bool, Types: ended},
		{Key: "sipCode", Const: "mSIPCode", Field: "SIPCode", Kind: SmallInt, Types: ended},
		{Key: "sipReason", Const: "mSIPReason", Field: "SIPReason", Kind: String, Types: ended},
		{Key: "released", Const: "mReleased", Field: "Released", Kind: Bool, Types: []string{"CallHold"}},
		{Key: "to", Const: "mTo", Field: "TransferTo", Kind: PartyRef, Types: transferred},
		{Key: "mode", Const: "mMode", Field: "Mode", Kind: Enum, Enum: "TransferMode", Types: transferred},
		{Key: "url", Const: "mURL", Field: "URL", Kind: String, Types: recorded, RequiredFor: "CallRecorded"},
		{Key: "mimeType", Const: "mMIMEType", Field: "MIMEType", Kind: String, Types: recorded},
		{Key: "bytes", Const: "mBytes", Field: "Bytes", Kind: Int, Types: recorded},
		{Key: "text", Const: "mText", Field: "Text", Kind: String, Types: transcribed, RequiredFor: "CallTranscribed"},
		{Key: "language", Const: "mLanguage", Field: "Language", Kind: String, Types: transcribed},
		{Key: "confidence", Const: "mConfidence", Field: "Confidence", Kind: Float, Types: transcribed},
	}
}

// Call returns the members of a call block.
func Call() []Member {
	return []Member{
		{Key: "direction", Const: "mDirection", Field: "Direction", Kind: Enum, Enum: "Direction", Required: true},
		{Key: "from", Const: "mFrom", Field: "From", Kind: PartyRef},
		{Key: "to", Const: "mCallTo", Field: "To", Kind: PartyRef},
		{Key: "trunk", Const: "mTrunk", Field: "Trunk", Kind: String},
		{Key: "diversion", Const: "mDiversion", Field: "Diversion", Kind: Hops},
	}
}

// Party returns the members of a party. Every one is a String or an Enum.
func Party() []Member {
	return []Member{
		{Key: "kind", Const: "mKind", Field: "Kind", Kind: Enum, Enum: "PartyKind"},
		{Key: "number", Const: "mNumber", Field: "Number", Kind: String},
		{Key: "name", Const: "mName", Field: "Name", Kind: String},
		{Key: "extension", Const: "mExtension", Field: "Extension", Kind: String},
		{Key: "uri", Const: "mURI", Field: "URI", Kind: String},
	}
}

// Hop returns the members a diversion hop adds to those of a party, which it has first.
func Hop() []Member {
	return []Member{
		{Key: "reason", Const: "mReason", Field: "Reason", Kind: String},
		{Key: "counter", Const: "mCounter", Field: "Counter", Kind: SmallInt},
	}
}
