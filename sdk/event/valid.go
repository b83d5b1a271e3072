package event

import "errors"

// Valid is an event that passed the ingest endpoint's validation, with its JSON: what the agent
// takes from a translator, stores in its outbox and sends, so that nothing between a translator
// and the core decodes, validates or encodes an event twice. The zero Valid holds no event; make
// one with ParseOne or Check.
type Valid struct {
	e    Event
	json []byte
}

// ParseOne decodes data as one event object, the way the ingest endpoint decodes a body of one
// event, and returns it with data as its JSON (not copied: data must not change afterwards). A
// batch, or anything the endpoint would refuse, is an error; a refused event's error is a
// *ValidationError listing every problem.
func ParseOne(data []byte) (Valid, error) {
	parsed, batch, err := ParseBody(data)
	if err != nil {
		return Valid{}, err
	}
	if batch || len(parsed) != 1 {
		return Valid{}, errors.New("one event object is wanted, not a batch")
	}
	return Valid{e: parsed[0].Event, json: data}, nil
}

// Check validates e and returns it with its canonical JSON (MarshalJSON). An event the endpoint
// would refuse is a *ValidationError.
func Check(e Event) (Valid, error) {
	if err := e.Validate(); err != nil {
		return Valid{}, err
	}
	b, err := e.MarshalJSON()
	if err != nil {
		return Valid{}, err
	}
	return Valid{e: e, json: b}, nil
}

// Event returns the event.
func (v *Valid) Event() *Event { return &v.e }

// JSON returns the event's JSON, which the ingest endpoint accepts as it is. It must not be
// changed.
func (v *Valid) JSON() []byte { return v.json }
