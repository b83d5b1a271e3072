package event

// FieldInfo describes one member of an event's JSON as the schema lists it, the schema that the
// package's reader, decoder, encoder and validator are generated from.
type FieldInfo struct {
	// Path is the member's path from the event object, as problems name it, with [] standing for
	// any element of an array: "call.from.number", "call.diversion[].reason".
	Path string
	// Object is the object the member belongs to: "event", "call", "party" or "diversion" (a
	// diversion hop's own members; a hop has a party's members too, listed under "party").
	Object string
	// Key is the member's JSON key in its object.
	Key string
	// Types are the event types whose events may carry the member; nil means every type.
	Types []Type
	// Required is true for a member its object must give, not null.
	Required bool
	// RequiredFor is the event type that must give the member, or "".
	RequiredFor Type
}
