package store

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// The reasons a to-call-back item closed.
const (
	// CallbackCalledBack: an outbound or internal call was placed to the number after its
	// latest miss.
	CallbackCalledBack = "called_back"
	// CallbackAnswered: a later inbound call from the number was answered.
	CallbackAnswered = "answered"
	// CallbackDismissed: someone closed the item by hand.
	CallbackDismissed = "dismissed"
	// CallbackExpired: the organization's retention removed the item's misses while it was
	// open (see Store.PurgeCalls).
	CallbackExpired = "expired"
)

// CallbackCall is what the to-call-back list reads of one call of one outside number: a call
// from it (Inbound) or placed to it. Every field comes from the call's row as the store keeps
// it (its summary), so that an item is a pure function of those rows.
type CallbackCall struct {
	// ID is the call's id (see CallID).
	ID string
	// Inbound is true for an inbound call from the number; false for an outbound or internal
	// call to it.
	Inbound bool
	// State is the call's state on the ladder.
	State State
	// StartedAt is the call's start (Call.FirstAt): what "later" is judged by.
	StartedAt time.Time
	// AnsweredAt is the call's earliest answer, zero for none.
	AnsweredAt time.Time
	// AnsweredBy is the extension of that answer, "" for none.
	AnsweredBy string
	// FromExt is the extension that placed an outbound or internal call, "" for none.
	FromExt string
	// Flags are the call's flags (see Flags).
	Flags Flags
	// Locations are the call's locations.
	Locations []string
	// Name is the name the caller lookup gave the number on this call, "" for none.
	Name string
}

// CallbackDismissal is a to-call-back item closed by hand: it closes the item that was open
// at At, and no later one.
type CallbackDismissal struct {
	// At is when it was dismissed.
	At time.Time
	// Extension is the extension that dismissed it, "" when none was named.
	Extension string
}

// CallbackClose says how a to-call-back item closed.
type CallbackClose struct {
	// Reason is CallbackCalledBack, CallbackAnswered, CallbackDismissed or CallbackExpired.
	Reason string
	// CallID is the id of the call that closed the item; "" for a dismissal or an expiry.
	CallID string
	// Extension is the extension that called back, answered or dismissed; "" when unknown.
	Extension string
}

// Callback is one outside number's item on the to-call-back list: its latest run of missed
// calls, open until a later call settles it or someone dismisses it.
type Callback struct {
	// Number is the caller's E.164 number, or the text a reporter saw when it could not parse
	// one (see CallbackNumber).
	Number string
	// Name is the caller lookup's name for the number, from the latest call of the item that
	// has one; "" for none.
	Name string
	// MissedCount is the number of missed (or voicemail) calls since the item opened.
	MissedCount int
	// FirstMissedAt and LastMissedAt are the starts of the item's first and latest miss.
	FirstMissedAt, LastMissedAt time.Time
	// LastCallID is the id of the item's latest miss.
	LastCallID string
	// Locations are the locations of the item's misses, sorted, each once.
	Locations []string
	// Voicemail is true when one of the item's misses left a message.
	Voicemail bool
	// Open is true until the item closes.
	Open bool
	// ClosedAt is when the item closed, zero while it is open: the start of the call that
	// called back, the answer of the call that was answered, or the dismissal's time.
	ClosedAt time.Time
	// ClosedBy says how it closed; nil while it is open.
	ClosedBy *CallbackClose
}

// Callback kinds of a call, in the order calls that start at the same instant are applied: a
// miss first, so that a callback or an answer in the same instant settles it.
const (
	cbIgnore = iota
	cbMiss
	cbSettle
)

// callbackKind returns what c does to its number's item: cbMiss for an ended inbound call
// whose outcome is missed or voicemail; cbSettle for an inbound call a person took, or for an
// outbound or internal call placed to the number (when needAnswer, only one that was
// answered); else cbIgnore (an inbound call still ringing settles nothing yet).
func callbackKind(c CallbackCall, needAnswer bool) int {
	answered := c.Flags&FlagAnswered != 0 && c.Flags&FlagVoicemail == 0
	switch {
	case c.Inbound && answered:
		return cbSettle
	case c.Inbound && c.State >= StateEnded:
		return cbMiss
	case c.Inbound:
		return cbIgnore
	case needAnswer && c.Flags&FlagAnswered == 0:
		return cbIgnore
	}
	return cbSettle
}

// CallbackOf returns the item of number given every call of it the organization has on file
// and every dismissal of it, in any order, or false when none of its calls was missed. The
// result depends only on the calls' rows and the dismissals, not on the order in which they
// were written, so a store recomputes it after each write that touches the number.
//
// The calls are taken in the order they started (ties: misses before the rest, then by ID);
// each miss opens an item when none is open and counts toward the open one; a call that settles
// (see CallbackCall) closes the open item; a dismissal closes the item that is open at its
// time, that is whose misses all started at or before it. When needAnswer is true, an outbound
// or internal call settles only when it was answered. The item returned is the latest one.
func CallbackOf(number string, calls []CallbackCall, dismissals []CallbackDismissal, needAnswer bool) (Callback, bool) {
	type step struct {
		at   time.Time
		kind int
		call *CallbackCall
		dis  *CallbackDismissal
	}
	steps := make([]step, 0, len(calls)+len(dismissals))
	for i := range calls {
		if k := callbackKind(calls[i], needAnswer); k != cbIgnore {
			steps = append(steps, step{at: calls[i].StartedAt, kind: k, call: &calls[i]})
		}
	}
	for i := range dismissals {
		steps = append(steps, step{at: dismissals[i].At, kind: cbSettle, dis: &dismissals[i]})
	}
	slices.SortStableFunc(steps, func(a, b step) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if c := cmp.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		// A call before a dismissal of the same instant; among calls, by ID; among dismissals,
		// by extension, so that the outcome does not depend on the input's order.
		switch {
		case a.call != nil && b.call != nil:
			return strings.Compare(a.call.ID, b.call.ID)
		case a.call != nil:
			return -1
		case b.call != nil:
			return 1
		}
		return strings.Compare(a.dis.Extension, b.dis.Extension)
	})

	var cb Callback
	found := false
	locs := map[string]bool{}
	for _, s := range steps {
		switch {
		case s.kind == cbMiss:
			c := s.call
			if !cb.Open {
				cb = Callback{Number: number, Open: true, FirstMissedAt: c.StartedAt}
				clear(locs)
				found = true
			}
			cb.MissedCount++
			cb.LastMissedAt = c.StartedAt
			cb.LastCallID = c.ID
			cb.Voicemail = cb.Voicemail || c.Flags&FlagVoicemail != 0
			for _, l := range c.Locations {
				locs[l] = true
			}
			if c.Name != "" {
				cb.Name = c.Name
			}
		case !cb.Open:
			// Nothing is open: a settling call or a dismissal has nothing to close.
		case s.dis != nil:
			cb.Open = false
			cb.ClosedAt = s.dis.At
			cb.ClosedBy = &CallbackClose{Reason: CallbackDismissed, Extension: s.dis.Extension}
		case s.call.Inbound:
			c := s.call
			cb.Open = false
			cb.ClosedAt = c.AnsweredAt
			if cb.ClosedAt.IsZero() {
				cb.ClosedAt = c.StartedAt
			}
			cb.ClosedBy = &CallbackClose{Reason: CallbackAnswered, CallID: c.ID, Extension: c.AnsweredBy}
		default:
			c := s.call
			cb.Open = false
			cb.ClosedAt = c.StartedAt
			cb.ClosedBy = &CallbackClose{Reason: CallbackCalledBack, CallID: c.ID, Extension: c.FromExt}
		}
	}
	if !found {
		return Callback{}, false
	}
	cb.Locations = make([]string, 0, len(locs))
	for l := range locs {
		cb.Locations = append(cb.Locations, l)
	}
	slices.Sort(cb.Locations)
	return cb, true
}

// CallbackNumber returns the number a party (a call block's "from" or "to" JSON object) is
// listed under on the to-call-back list, or false when it is not listed (see CallbackPartyNumber).
// Anything that is not such an object is never listed.
func CallbackNumber(party json.RawMessage) (string, bool) {
	var p struct {
		Kind   string `json:"kind"`
		Number string `json:"number"`
		Name   string `json:"name"`
		URI    string `json:"uri"`
	}
	if len(party) == 0 || json.Unmarshal(party, &p) != nil {
		return "", false
	}
	return CallbackPartyNumber(p.Kind, p.Number, p.URI, p.Name)
}

// CallbackPartyNumber returns the number a party of the given kind, number, uri and name is
// listed under on the to-call-back list, or false when it is not listed: an e164 party (kind
// "" or "e164") by its number; an unknown party, whose number the reporter could not parse, by
// the text it saw (its uri, else its name), trimmed; an anonymous (withheld) party, an
// extension, or a party without any of these, never.
func CallbackPartyNumber(kind, number, uri, name string) (string, bool) {
	switch kind {
	case "", "e164":
		if n := strings.TrimSpace(number); n != "" {
			return n, true
		}
	case "unknown":
		for _, s := range []string{uri, name} {
			if s = strings.TrimSpace(s); s != "" {
				return s, true
			}
		}
	}
	return "", false
}

// MaxCallbackLimit is the most items one ListCallbacks returns.
const MaxCallbackLimit = 500

// CallbackFilter selects items of an organization's to-call-back list.
type CallbackFilter struct {
	// Open selects the open items when true, the closed ones when false.
	Open bool
	// Location, when not "", must be one of the item's locations.
	Location string
}

// CallbackPosition is an item's place in the list's order, newest miss first: by LastMissedAt
// descending, then by Number descending.
type CallbackPosition struct {
	LastMissedAt time.Time
	Number       string
}

// Position returns cb's place in the list's order.
func (cb Callback) Position() CallbackPosition {
	return CallbackPosition{LastMissedAt: cb.LastMissedAt, Number: cb.Number}
}

// CallbackStore is the to-call-back list's part of a store. Its items are kept up to date by
// WriteCalls, in the same transaction as the calls they rest on: after a write, each number the
// write's calls are from (inbound) or placed to (outbound, internal) has the item CallbackOf
// gives for every call of it on file and every dismissal of it, and the organization's
// setting.
type CallbackStore interface {
	// ListCallbacks returns up to limit (1 to MaxCallbackLimit) of the organization's items
	// that f selects, in the list's order (see CallbackPosition); with after not nil, only
	// those strictly after it. A limit out of range is an error wrapping ErrInvalid.
	ListCallbacks(ctx context.Context, orgID string, f CallbackFilter, after *CallbackPosition, limit int) ([]Callback, error)
	// DismissCallback closes the organization's open item of number at time at, naming the
	// extension that closed it ("" for none), and returns the item as closed. ErrNotFound
	// when the number has no open item. A miss that starts after at opens a new item.
	DismissCallback(ctx context.Context, orgID, number string, at time.Time, extension string) (Callback, error)
	// CallbackNeedsAnswer reports the organization's setting: whether an outbound or internal
	// call settles an item only when it was answered. False for an organization that never
	// set it; ErrNotFound when there is no such organization.
	CallbackNeedsAnswer(ctx context.Context, orgID string) (bool, error)
	// SetCallbackNeedsAnswer changes that setting and recomputes the organization's items
	// under it, in one transaction; ErrNotFound when there is no such organization.
	SetCallbackNeedsAnswer(ctx context.Context, orgID string, needsAnswer bool) error
}

// CallbackParty returns the number a call with this direction and block counts toward on the
// to-call-back list (see CallbackNumber): an inbound call's caller ("from"), an outbound or
// internal call's callee ("to"); false for none.
func CallbackParty(direction string, block json.RawMessage) (string, bool) {
	var b struct {
		From json.RawMessage `json:"from"`
		To   json.RawMessage `json:"to"`
	}
	if len(block) == 0 || json.Unmarshal(block, &b) != nil {
		return "", false
	}
	if direction == "inbound" {
		return CallbackNumber(b.From)
	}
	return CallbackNumber(b.To)
}

// CallbackCallOf returns what the to-call-back list reads of a stored call: its summary, its
// start, and as Name the name of the first client the caller lookup matched ("" for none).
func CallbackCallOf(c Call) CallbackCall {
	cc := CallbackCall{
		ID: c.ID, Inbound: c.Direction == "inbound", State: c.State, StartedAt: c.FirstAt,
		AnsweredAt: c.Summary.AnsweredAt, AnsweredBy: c.Summary.AnsweredBy, FromExt: c.Summary.FromExt,
		Flags: c.Summary.Flags,
	}
	if len(c.Summary.Locations) > 0 {
		_ = json.Unmarshal(c.Summary.Locations, &cc.Locations) // a stored array; none when not
	}
	var clients []struct {
		Name string `json:"name"`
	}
	if len(c.Clients) > 0 && json.Unmarshal(c.Clients, &clients) == nil {
		for _, cl := range clients {
			if cl.Name != "" {
				cc.Name = cl.Name
				break
			}
		}
	}
	return cc
}
