package store

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// CallFilter selects an organization's calls for ListCalls. Its zero value selects every call;
// each field that is set narrows the selection, and all of them must hold.
type CallFilter struct {
	// From and Until bound the call's start (Call.FirstAt): From <= start < Until. A zero time
	// leaves that side open.
	From, Until time.Time
	// Directions, when not empty, are the directions a call may have.
	Directions []string
	// Outcomes, when not empty, are the outcomes (see Outcome) a call may have.
	Outcomes []string
	// Number, when not nil, must match the call's from or to number.
	Number *NumberMatch
	// Extension, when not "", must be the call's from or to extension, or the extension that
	// answered it first.
	Extension string
	// Location, when not "", must be one of the call's locations.
	Location string
	// Provider, when not "", must be the call's provider.
	Provider string
	// Recorded, when true, selects only calls with a recording.
	Recorded bool
}

// NumberMatch matches a number by its key (NumberKey): the whole key, or, when Trailing, any key
// that begins with Key, that is any number that ends with the digits Key reverses.
type NumberMatch struct {
	Key      string
	Trailing bool
}

// Validate reports every problem with f, or nil.
func (f CallFilter) Validate() error {
	var errs []error
	for _, d := range f.Directions {
		if d != "inbound" && d != "outbound" && d != "internal" {
			errs = append(errs, fmt.Errorf("direction %q is not inbound, outbound or internal", d))
		}
	}
	for _, o := range f.Outcomes {
		if !slices.Contains(Outcomes(), o) {
			errs = append(errs, fmt.Errorf("outcome %q is not one of %v", o, Outcomes()))
		}
	}
	if m := f.Number; m != nil {
		if m.Key == "" || NumberKey(m.Key) == "" || len(NumberKey(m.Key)) != len(m.Key) {
			errs = append(errs, fmt.Errorf("number key %q is not a string of digits", m.Key))
		}
	}
	if !f.From.IsZero() && !f.Until.IsZero() && f.Until.Before(f.From) {
		errs = append(errs, errors.New("until is before from"))
	}
	return errors.Join(errs...)
}

// CallPosition is a call's place in the history's order, newest first: by start (Call.FirstAt),
// then by No. ListCalls continues after one.
type CallPosition struct {
	StartedAt time.Time
	No        int64
}

// Position returns c's place in the history's order.
func (c *Call) Position() CallPosition { return CallPosition{StartedAt: c.FirstAt, No: c.No} }

// CallRecord is a call with its events, ordered as GetCall orders them.
type CallRecord struct {
	Call   Call
	Events []Event
}

// MaxListLimit is the most calls one ListCalls returns.
const MaxListLimit = 1000

// CheckList reports why a ListCalls of f and limit is refused, wrapping ErrInvalid, or nil: every
// implementation refuses the same arguments.
func CheckList(f CallFilter, limit int) error {
	if err := f.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if limit < 1 || limit > MaxListLimit {
		return fmt.Errorf("%w: limit %d is not 1 to %d", ErrInvalid, limit, MaxListLimit)
	}
	return nil
}

// MaxRingingLimit is the most calls one RingingCalls returns.
const MaxRingingLimit = 100

// CheckRinging reports why a RingingCalls of locations and limit is refused, wrapping
// ErrInvalid, or nil: every implementation refuses the same arguments.
func CheckRinging(locations []string, limit int) error {
	if len(locations) == 0 || len(locations) > event.MaxLocations {
		return fmt.Errorf("%w: %d locations, not 1 to %d", ErrInvalid, len(locations), event.MaxLocations)
	}
	if limit < 1 || limit > MaxRingingLimit {
		return fmt.Errorf("%w: limit %d is not 1 to %d", ErrInvalid, limit, MaxRingingLimit)
	}
	return nil
}
