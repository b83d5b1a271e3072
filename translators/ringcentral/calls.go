package ringcentral

import (
	"fmt"
	"strings"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/numbering"
)

// Party status codes of a telephony session.
const (
	statusSetup      = "Setup"
	statusProceeding = "Proceeding"
	statusAnswered   = "Answered"
	statusHold       = "Hold"
	statusParked     = "Parked"
	statusVoiceMail  = "VoiceMail"
	statusVMScreen   = "VoiceMailScreening"
	statusDisconn    = "Disconnected"
	statusGone       = "Gone"
	// transferred marks a party that left the call by transferring it: the call goes on.
	transferred = "Transferred (local)"
	// pickedUp marks a ringing party that stopped because another phone picked the call up
	// (Disconnected with reason Pickup): the call goes on with the picking phone's party.
	pickedUp = "Picked up elsewhere (local)"
)

// Party status reasons (of a Disconnected or Gone party) the mapping tells apart; the API
// reference's CallStatusInfo lists them all.
const (
	reasonBlindTransfer    = "BlindTransfer"
	reasonAttendedTransfer = "AttendedTransfer"
	reasonPickup           = "Pickup"
	// reasonVoicemail ends a party whose call was sent to voicemail (the Account Telephony
	// Sessions Event page lists it among the status reasons).
	reasonVoicemail = "Voicemail"
)

// The providerEventIds of the events a call has at most once. The live path and the call-log
// poll give them the same ids, so the core keeps whichever arrives first and drops the other.
const (
	idReceived = "rc-received"
	idPlaced   = "rc-placed"
	idAnswered = "rc-answered"
	idMissed   = "rc-missed"
	idEnded    = "rc-ended"
)

// recordedID is the providerEventId of a recording's call_recorded.
func recordedID(recordingID string) string { return "rc-recording-" + recordingID }

// callState is what the live path knows of one telephony session.
type callState struct {
	id        string
	call      event.Call
	locations []string
	started   time.Time
	answered  time.Time
	// seen holds the sequences of the notifications handled; partySeq, for each party, the
	// sequence of the notification that set its status. RingCentral's guide warns that
	// notifications can arrive out of sequence, so a late one is still read, but it does not
	// set back a party that a newer one moved on.
	seen     map[int64]bool
	partySeq map[string]int64
	// newest is the notification of the highest sequence seen: once every party has ended, the
	// call ended there.
	newest mark
	// endHeld tells that every party has ended but a sequence below newest is still missing:
	// the end waits for it (see settled).
	endHeld bool
	// inbound tells whether the session showed a party of direction Inbound: the party that
	// receives the call, whose Answered is the answer.
	inbound bool
	// outAnswer is the first Answered of a party of direction Outbound (the calling side). It is
	// not an answer: RingCentral reports it when the call reaches its RingCentral destination,
	// before any phone is picked up. It stands for the answer only of a call placed by the
	// clinic whose receiving party never shows.
	outAnswer *mark
	// held holds, for each party on hold, the sequence of the notification that put it there,
	// until its release is told. reheld holds, for a party on hold, the newer Hold
	// notifications of that party, oldest first: each follows a release not yet heard of (a
	// late Answered), and is told when that release is.
	held      map[string]int64
	reheld    map[string][]mark
	heard     time.Time // when the last notification came, by the local clock
	announced bool
	voicemail bool
	missed    bool
	ended     bool
	reason    string            // the last terminal reason seen
	parties   map[string]string // party id → its last status code
	// pending is a transfer whose target has not shown yet: its call_transferred waits for the
	// first new party of the session (the target), or for the call's end.
	pending *pendingTransfer
}

// mark is when, in which notification, something happened.
type mark struct {
	at  time.Time
	seq int64
}

// pendingTransfer is a transferring party's exit, remembered until the target's party shows.
type pendingTransfer struct {
	id   string // the call_transferred's providerEventId
	at   time.Time
	seq  int64
	mode event.TransferMode
}

// calls turns telephony-session notifications into canonical events. It keeps the state of the
// sessions in progress; it is used from one goroutine.
type calls struct {
	plan     *numbering.Plan
	provider string
	maxAge   time.Duration
	byID     map[string]*callState
}

func newCalls(plan *numbering.Plan, provider string, maxAge time.Duration) *calls {
	return &calls{plan: plan, provider: provider, maxAge: maxAge, byID: map[string]*callState{}}
}

// observe maps one notification to the events it causes, in order. now is the local time, for
// forgetting sessions; the events carry the notification's eventTime.
func (c *calls) observe(ev sessionEvent, raw []byte, now time.Time) []event.Event {
	st := c.byID[ev.TelephonySessionID]
	if st == nil {
		st = &callState{id: ev.TelephonySessionID, started: ev.at, parties: map[string]string{},
			seen: map[int64]bool{}, partySeq: map[string]int64{}, held: map[string]int64{}, reheld: map[string][]mark{}}
		c.byID[st.id] = st
	}
	st.heard = now
	if ev.Sequence != 0 {
		if st.seen[ev.Sequence] {
			return nil // a notification seen before (the gateway redelivers after a reconnect)
		}
		st.seen[ev.Sequence] = true
	}
	if st.ended {
		return nil
	}
	if ev.at.Before(st.started) {
		st.started = ev.at // an earlier notification that arrived late
	}
	if ev.Sequence == 0 || ev.Sequence >= st.newest.seq {
		st.newest = mark{at: ev.at, seq: ev.Sequence}
	}
	if st.call.Direction == "" {
		if p, ok := mainParty(ev.Parties); ok {
			st.call, st.locations = c.callOf(p)
		} else {
			return nil
		}
	}
	var out []event.Event
	emit := func(t event.Type, id string, set func(*event.Event)) {
		e := event.New(t, st.id, ev.at, st.call)
		e.Provider = c.provider
		e.Observer = event.ObserverPBXAPI
		e.ProviderEventID = id
		e.Sequence = ev.Sequence
		if len(st.locations) > 0 {
			e.Locations = st.locations
		}
		if len(raw) > 0 && len(raw) <= 64<<10 {
			e.Raw = append([]byte(nil), raw...)
		}
		if set != nil {
			set(&e)
		}
		out = append(out, e)
	}
	announce := func() {
		if st.announced {
			return
		}
		st.announced = true
		if st.call.Direction == event.Outbound {
			emit(event.CallPlaced, idPlaced, nil)
		} else {
			emit(event.CallReceived, idReceived, nil)
		}
	}
	emitTransfer := func(tr *pendingTransfer, to *event.Party) {
		emit(event.CallTransferred, tr.id, func(e *event.Event) {
			e.OccurredAt, e.Sequence = tr.at, tr.seq
			e.Mode = tr.mode
			e.TransferTo = to
		})
	}
	answer := func(p eventParty) {
		st.answered = ev.at
		by := c.extensionOf(p.To)
		emit(event.CallAnswered, idAnswered, func(e *event.Event) { e.AnsweredBy = by })
	}
	hold := func(p eventParty, m mark) {
		st.held[p.ID] = m.seq
		emit(event.CallHold, fmt.Sprintf("rc-hold-%s-%d", p.ID, m.seq), func(e *event.Event) {
			e.OccurredAt, e.Sequence = m.at, m.seq
			e.Released = event.Ptr(false)
		})
	}
	unhold := func(p eventParty) {
		delete(st.held, p.ID)
		emit(event.CallHold, fmt.Sprintf("rc-unhold-%s-%d", p.ID, ev.Sequence), func(e *event.Event) { e.Released = event.Ptr(true) })
	}
	// lateAnswer takes an Answered that arrived after a newer status of its party: the release
	// of a hold told before it, or an answer.
	lateAnswer := func(p eventParty) {
		if h, ok := st.held[p.ID]; ok && ev.Sequence > h {
			unhold(p)
			// A newer Hold of the party, heard before this release, puts the call back on hold.
			rs := st.reheld[p.ID]
			for len(rs) > 0 && rs[0].seq <= ev.Sequence {
				rs = rs[1:]
			}
			if len(rs) > 0 {
				hold(p, rs[0])
				rs = rs[1:]
			}
			if len(rs) == 0 {
				delete(st.reheld, p.ID)
			} else {
				st.reheld[p.ID] = rs
			}
			return
		}
		switch {
		case outbound(p):
			if st.outAnswer == nil || ev.at.Before(st.outAnswer.at) {
				st.outAnswer = &mark{at: ev.at, seq: ev.Sequence}
			}
		case st.answered.IsZero():
			answer(p)
		}
	}
	terminal := false
	first := len(st.parties) == 0 // the session's first notification: its parties join no transfer
	var joined []eventParty       // parties new in this notification, before a transfer in it
	for _, p := range ev.Parties {
		code, prev := p.Status.Code, st.parties[p.ID]
		if last, ok := st.partySeq[p.ID]; ok && ev.Sequence != 0 && ev.Sequence < last {
			// A status older than the one the party has does not set the party back. An answer
			// it reports still counts: the party's Hold, or its end, overtook its Answered.
			if code == statusAnswered {
				lateAnswer(p)
			}
			continue
		}
		if ev.Sequence != 0 {
			st.partySeq[p.ID] = ev.Sequence
		}
		if !outbound(p) {
			st.inbound = true
		}
		if code == prev {
			if h, ok := st.held[p.ID]; ok && code == statusHold && ev.Sequence > h {
				// A second Hold: a release between the two has not come yet.
				st.reheld[p.ID] = append(st.reheld[p.ID], mark{at: ev.at, seq: ev.Sequence})
			}
			continue
		}
		st.parties[p.ID] = code
		if prev == "" && code != statusDisconn && code != statusGone {
			if st.pending != nil {
				// The first party to join after a transfer is its target.
				tr, to := st.pending, c.target(p)
				st.pending = nil
				emitTransfer(tr, &to)
			} else if !first {
				joined = append(joined, p)
			}
		}
		if p.MissedCall {
			st.missed = true
		}
		switch code {
		case statusSetup, statusProceeding:
			announce()
		case statusAnswered:
			announce()
			if prev == statusHold {
				unhold(p)
				delete(st.reheld, p.ID)
				continue
			}
			if outbound(p) {
				// The calling side's party: the call reached its destination, nobody answered yet.
				if st.outAnswer == nil {
					st.outAnswer = &mark{at: ev.at, seq: ev.Sequence}
				}
				continue
			}
			if st.answered.IsZero() {
				// The receiving party answered: the phone called, one that picked the call up,
				// a ring group's or a queue's agent.
				answer(p)
			}
		case statusHold:
			announce()
			hold(p, mark{at: ev.at, seq: ev.Sequence})
		case statusVoiceMail, statusVMScreen:
			announce()
			st.voicemail = true
		case statusDisconn, statusGone:
			switch p.Status.Reason {
			case reasonBlindTransfer, reasonAttendedTransfer:
				mode := event.TransferBlind
				if p.Status.Reason == reasonAttendedTransfer {
					mode = event.TransferAttended
				}
				if st.pending != nil {
					emitTransfer(st.pending, nil) // a second transfer before the first's target showed
				}
				// call_transferred waits for the target's party, which names it.
				st.pending = &pendingTransfer{id: fmt.Sprintf("rc-transfer-%s-%d", p.ID, ev.Sequence), at: ev.at, seq: ev.Sequence, mode: mode}
				// The call goes on with the transfer target: this party's end is not the call's.
				st.parties[p.ID] = transferred
				continue
			case reasonPickup:
				// Another phone picked the ringing call up: this party's end is not the call's,
				// whether the picking phone's party shows before this notification or after it.
				st.parties[p.ID] = pickedUp
				continue
			case reasonVoicemail:
				st.voicemail = true
			}
			st.reason = p.Status.Reason
			terminal = true
		}
	}
	if st.pending != nil && len(joined) > 0 {
		// The target was listed before the transferring party in the same notification.
		tr, to := st.pending, c.target(joined[0])
		st.pending = nil
		emitTransfer(tr, &to)
	}
	if terminal && c.allEnded(st) && first {
		// The session's first notification is its end: this translator heard nothing of the
		// call before (it was restarted, or its socket was down), and cannot tell whether it
		// was answered. The call log's record, which says, ends it at the next poll with the
		// same ids; a guess here could report an answered call missed.
		st.ended = true
		return out
	}
	if (terminal || st.endHeld) && c.allEnded(st) {
		if !settled(st) {
			// A notification below the end has not come yet: it may hold the answer (a late
			// Answered), a hold or another party's end, and an end decided now could report an
			// answered call missed. The end waits for it; if it never comes, the call log's
			// record ends the call at the next poll, with the same ids.
			st.endHeld = true
			return out
		}
		st.ended, st.endHeld = true, false
		end := st.newest
		at := func(e *event.Event) { e.OccurredAt, e.Sequence = end.at, end.seq }
		if st.pending != nil {
			// The target never showed: the transfer is still told, without a target.
			emitTransfer(st.pending, nil)
			st.pending = nil
		}
		if st.answered.IsZero() && st.outAnswer != nil && !st.inbound && st.call.Direction != event.Inbound {
			// A call the clinic placed whose receiving party never showed: its own party's
			// Answered is all there is to go by.
			a := st.outAnswer
			st.answered = a.at
			emit(event.CallAnswered, idAnswered, func(e *event.Event) { e.OccurredAt, e.Sequence = a.at, a.seq })
		}
		disp := disposition(st)
		if missed(st, disp) {
			emit(event.CallMissed, idMissed, at)
		}
		emit(event.CallEnded, idEnded, func(e *event.Event) {
			at(e)
			e.Disposition = disp
			e.Duration = event.Ptr(max(end.at.Sub(st.started).Seconds(), 0))
			if !st.answered.IsZero() {
				e.TalkTime = event.Ptr(max(end.at.Sub(st.answered).Seconds(), 0))
			}
		})
	}
	return out
}

// outbound reports whether p is a party of direction Outbound: the side that places the call
// (RingCentral's "technical call direction" of the party). A party without a direction is taken
// for the receiving side.
func outbound(p eventParty) bool { return strings.EqualFold(p.Direction, "Outbound") }

// extensionOf is the clinic extension an end names: its extensionNumber, or its phoneNumber
// when that is an extension number (RingCentral writes a call between extensions with the
// extension numbers as phoneNumber); "" for an outside number.
func (c *calls) extensionOf(e endpoint) string {
	if e.ExtensionNumber != "" {
		return cut(e.ExtensionNumber, event.MaxExtensionLength)
	}
	if e.PhoneNumber != "" {
		if p := c.plan.Classify(e.PhoneNumber, ""); p.Kind == event.KindExtension {
			return cut(p.Extension, event.MaxExtensionLength)
		}
	}
	return ""
}

// firstSequence is the sequence from which a session's notifications are counted as due: the
// recorded streams RingCentral's guide links (https://github.com/dibyenduroy/csn-data) number
// each session's notifications 2, 3, 4, ... without a gap; a session whose 1 comes counts from 1.
const firstSequence = 2

// settled reports whether every notification of st up to the newest has come: no sequence from
// firstSequence (or the lowest seen, when lower) to the newest is missing. A notification without
// a sequence settles nothing and leaves nothing missing.
func settled(st *callState) bool {
	if st.newest.seq == 0 {
		return true
	}
	low, n := int64(firstSequence), uint64(0)
	for s := range st.seen {
		low = min(low, s)
	}
	for s := range st.seen {
		if s >= low && s <= st.newest.seq {
			n++
		}
	}
	// The count of sequences from low to newest, computed without overflow.
	return n > uint64(st.newest.seq-low)
}

// allEnded reports whether no party of st is still in the call.
func (c *calls) allEnded(st *callState) bool {
	for _, code := range st.parties {
		if code != statusDisconn && code != statusGone && code != transferred && code != pickedUp {
			return false
		}
	}
	return true
}

// missed reports whether a call that ended with disposition disp is a missed call: an inbound
// call no clinic phone answered, however it ended (it rang out, its caller gave up, it was busy,
// refused or failed, it reached voicemail), as the SIP observer and the Asterisk translator
// report one, so that the desk calls back the same callers whatever the phone system. An
// outbound call is missed only when RingCentral marked one of its parties missedCall and it did
// not reach voicemail.
func missed(st *callState, disp event.Disposition) bool {
	switch {
	case !st.answered.IsZero(), disp == event.DispositionAnswered:
		return false
	case st.call.Direction == event.Inbound:
		return true
	}
	return st.missed && !st.voicemail
}

// disposition is how a call the live path saw end ended: voicemail, answered, or else from the
// reason of the party whose end ended it (RingCentral's CallStatusInfo reasons, and a few other
// spellings).
func disposition(st *callState) event.Disposition {
	switch {
	case st.voicemail:
		return event.DispositionVoicemail
	case !st.answered.IsZero():
		return event.DispositionAnswered
	}
	switch st.reason {
	case "TargetBusy", "Busy", "BusyHere":
		return event.DispositionBusy
	case "Rejected", "Declined":
		return event.DispositionRejected
	case "Cancelled", "CallerHangup", "HangUp":
		return event.DispositionCancelled
	case "InternalError", "InvalidNumber", "InternationalDisabled", "DestinationBlocked", "NotEnoughFunds", "NoSuchUser", "Failed", "Error":
		return event.DispositionFailed
	}
	return event.DispositionNoAnswer
}

// forget drops the sessions ended or not heard of for maxAge, and returns how many remain.
func (c *calls) forget(now time.Time) int {
	for id, st := range c.byID {
		if now.Sub(st.heard) > c.maxAge || (st.ended && now.Sub(st.heard) > 10*time.Minute) {
			delete(c.byID, id)
		}
	}
	return len(c.byID)
}

// mainParty is the party whose ends describe the call: the first with a direction.
func mainParty(ps []eventParty) (eventParty, bool) {
	for _, p := range ps {
		if p.Direction != "" {
			return p, true
		}
	}
	if len(ps) > 0 {
		return ps[0], true
	}
	return eventParty{}, false
}

// callOf is the call block and locations of a call as its main party describes it: callBlock's
// rule, given the party's own direction, except that an Outbound party that belongs to no
// extension, between two ends of none, is an outside caller's leg (the first party RingCentral
// reports of a call from the public network is the caller's, direction Outbound), so the call is
// inbound.
func (c *calls) callOf(p eventParty) (event.Call, []string) {
	dir := p.Direction
	if outbound(p) && p.ExtensionID == "" && p.From.ExtensionID == "" && p.To.ExtensionID == "" {
		dir = "Inbound"
	}
	return c.callBlock(dir, p.From, p.To)
}

// callBlock classifies the two ends of a call, tells its direction, and the locations its clinic
// number wakes. It is the one rule of both paths (the live path's callOf and the call-log poll),
// so that the call block the core keeps (the call log's, whose events come last) is the one the
// live path told. The direction comes from the numbers when they tell (an extension or one of
// the clinic's numbers is the clinic). When they do not, the account's extensions tell: an end
// with an extensionId is inside the account, so a call from one to an end without is outbound,
// and the reverse inbound. Only when neither tells is direction (RingCentral's) used.
func (c *calls) callBlock(direction string, from, to endpoint) (event.Call, []string) {
	f, t := c.party(from), c.party(to)
	dir, ok := c.plan.Direction(f, t)
	if !ok {
		fromIn, toIn := from.ExtensionID != "", to.ExtensionID != ""
		switch {
		case fromIn && !toIn:
			dir = event.Outbound
		case toIn && !fromIn:
			dir = event.Inbound
		case strings.EqualFold(direction, "Outbound"):
			dir = event.Outbound
		default:
			dir = event.Inbound
		}
	}
	var locs []string
	switch dir {
	case event.Inbound:
		locs = c.plan.Locations(t.Number)
	case event.Outbound:
		locs = c.plan.Locations(f.Number)
	}
	return event.Call{Direction: dir, From: &f, To: &t}, locs
}

// target is the party a transfer sent the call to, from the target's own party: the end it
// rings (its to) or, for a party that is the calling side, its from. An end with an extension
// number is that extension (the clinic's phone the call went to); otherwise its phone number.
func (c *calls) target(p eventParty) event.Party {
	e := p.To
	if strings.EqualFold(p.Direction, "Outbound") && e.PhoneNumber == "" && e.ExtensionNumber == "" {
		e = p.From
	}
	if e.ExtensionNumber != "" {
		return c.plan.Classify(e.ExtensionNumber, e.Name)
	}
	return c.party(e)
}

// party classifies one end: its phone number when it has one, else its extension number.
func (c *calls) party(e endpoint) event.Party {
	text := e.PhoneNumber
	if text == "" {
		text = e.ExtensionNumber
	}
	if text == "" {
		return event.Party{Kind: event.KindUnknown, Name: cut(strings.TrimSpace(e.Name), event.MaxNameLength)}
	}
	p := c.plan.Classify(text, e.Name)
	if p.Kind == event.KindE164 && p.Extension == "" && e.ExtensionNumber != "" && e.PhoneNumber != "" {
		p.Extension = cut(e.ExtensionNumber, event.MaxExtensionLength)
	}
	return p
}

// cut shortens s to at most n runes, made valid UTF-8 without control characters.
func cut(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
