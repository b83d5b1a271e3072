package callmodel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// maxRawSIP bounds the SIP text an event's raw carries; longer text is cut and raw says so.
const maxRawSIP = 16 << 10

// call is one call: the dialogs of one initial INVITE (and its retries) under one Call-ID.
type call struct {
	callID string // as on the wire
	id     string // providerCallId: the Call-ID, "#<gen>" after the first
	gen    int
	block  event.Call
	locs   []string
	seq    int64
	seen   []uint64 // the keys of the messages seen (wire.key), for duplicate suppression

	fromTag    string         // the caller's tag
	callerHop  netip.AddrPort // where the first INVITE came from
	firstAt    time.Time
	inviteAt   time.Time // the latest initial INVITE (retries included)
	responded  bool
	cancelled  bool
	answered   bool
	answerTag  string // the to-tag of the branch that answered
	answerAt   time.Time
	lastAt     time.Time // last in-dialog activity of the answered call
	seenAt     time.Time // the last message of the call that was not a copy
	sessionExp time.Duration

	// A 401/407/422/3xx final response waiting for its retry.
	pending       bool
	pendingAt     time.Time
	pendingCode   int
	pendingReason string

	held [2]bool   // hold by the caller (0) and the callee (1)
	sdp  [2]uint64 // their last SDP fingerprints
	hasS [2]bool

	// A re-INVITE without SDP, whose 2xx carries the other side's offer.
	lateOffer bool
	lateCSeq  uint32
	lateTag   string

	refers map[string]referTarget // REFERs awaiting their 2xx, by CSeq number and from-tag

	queuedAt time.Time // the earliest deadline queued for the call

	ended    bool
	endedAt  time.Time
	forgetAt time.Time

	gone      bool // the tracker no longer holds the call: forgotten, buried, evicted, or its Call-ID taken
	endQueued bool // the call is in the tracker's queue of ended calls
}

// newCall builds the call an initial INVITE starts, or reports false (counted) when the dialog
// is not a call: its direction cannot be told, or it is a PBX's leg to one of its phones.
func (t *Tracker) newCall(w *wire, gen int, seen []uint64) (*call, bool) {
	req := w.req
	plan := t.cfg.Plan

	var from event.Party
	if id, err := callerIdentity(req); err == nil {
		if id.anonymous {
			from = event.Party{Kind: event.KindAnonymous}
		} else {
			from = plan.Classify(id.uri, id.display)
		}
	} else {
		from = event.Party{Kind: event.KindUnknown}
	}
	to := t.dialled(w)

	srcPBX, dstPBX := t.pbx[w.m.Src], t.pbx[w.m.Dst]
	trunkSet := len(t.trunk) > 0
	srcTrunk, dstTrunk := t.trunk[w.m.Src], t.trunk[w.m.Dst]
	partyDir, partyOK := plan.Direction(from, to)
	var dir event.Direction
	var trunk string
	switch {
	case dstPBX && !srcPBX && !srcTrunk && partyOK && partyDir == event.Outbound,
		srcPBX && !dstPBX && !dstTrunk && partyOK && partyDir == event.Inbound:
		// The parties contradict the network: a phone handing the PBX a call to the outside,
		// or the PBX handing a phone a call from the outside. That is a B2BUA PBX's inner leg
		// of a call its trunk leg reports.
		t.stats.Ignored++
		return nil, false
	case dstPBX && !srcPBX:
		if trunkSet && !srcTrunk {
			if !partyOK || partyDir != event.Internal {
				t.stats.Ignored++
				return nil, false
			}
		}
		dir = event.Inbound
		if inside(plan, from) {
			dir = event.Internal
		} else {
			trunk = w.m.Src.String()
		}
	case srcPBX && !dstPBX:
		if trunkSet && !dstTrunk {
			t.stats.Ignored++
			return nil, false
		}
		dir = event.Outbound
		if to.EffectiveKind() == event.KindExtension {
			dir = event.Internal
		} else {
			trunk = w.m.Dst.String()
		}
	case partyOK:
		dir = partyDir
		switch {
		case dir == event.Inbound:
			trunk = w.m.Src.String()
		case dir == event.Outbound:
			trunk = w.m.Dst.String()
		}
	case trunkSet && srcTrunk:
		dir, trunk = event.Inbound, w.m.Src.String()
	default:
		t.stats.Undirected++
		return nil, false
	}

	c := &call{
		callID:    w.callID,
		id:        w.callID,
		gen:       gen,
		seen:      seen,
		fromTag:   w.fromTag,
		callerHop: w.m.Src,
		firstAt:   w.m.At,
		seenAt:    w.m.At,
		inviteAt:  w.m.At,
	}
	if c.seen == nil {
		c.seen = make([]uint64, 0, 8)
	}
	if gen > 1 {
		c.id = w.callID + "#" + strconv.Itoa(gen)
	}
	c.block = event.Call{Direction: dir, From: &from, To: &to, Trunk: trunk}
	if ds, _ := diversions(req); len(ds) > 0 {
		for _, d := range ds {
			var p event.Party
			if d.anonymous {
				p = event.Party{Kind: event.KindAnonymous}
			} else {
				p = plan.Classify(d.party.uri, d.party.display)
			}
			c.block.Diversion = append(c.block.Diversion, event.Diversion{Party: p, Reason: d.reason, Counter: d.counter})
		}
	}
	clinic := to
	if dir != event.Inbound {
		clinic = from
	}
	if clinic.Number != "" {
		c.locs = plan.Locations(clinic.Number)
	}
	if c.locs == nil && dir == event.Internal && to.Number != "" {
		c.locs = plan.Locations(to.Number)
	}
	if info, ok, err := messageSDP(req); ok && err == nil {
		c.sdp[0], c.hasS[0] = info.fingerprint, true
	}
	return c, true
}

// dialled is the party the caller dialled: the Request-URI of the first INVITE, or the To
// header when the Request-URI does not classify (a PBX contact such as sip:abc123@10.0.0.5).
func (t *Tracker) dialled(w *wire) event.Party {
	plan := t.cfg.Plan
	var toName string
	var toParty *nameAddr
	if nas, errs := nameAddrs(w.req, "To", "t"); len(nas) == 1 && len(errs) == 0 {
		toParty, toName = &nas[0], nas[0].party.display
	}
	ruri := partyOf("", &w.req.Recipient)
	p := plan.Classify(ruri.uri, toName)
	if p.Kind == event.KindUnknown && toParty != nil {
		if q := plan.Classify(toParty.party.uri, toName); q.Kind != event.KindUnknown {
			return q
		}
	}
	return p
}

// inside reports whether a party is the clinic's: an extension or one of its numbers.
func inside(plan interface{ IsClinic(string) bool }, p event.Party) bool {
	return p.EffectiveKind() == event.KindExtension || p.Number != "" && plan.IsClinic(p.Number)
}

// start emits the call's first event.
func (c *call) start(t *Tracker, w *wire) []event.Event {
	typ := event.CallPlaced
	if c.block.Direction == event.Inbound {
		typ = event.CallReceived
	}
	return t.events(c.emit(t, typ, w.m.At, w.eventID(c, typ), renderRaw(w)))
}

// retry takes a new initial INVITE for a call not yet ended.
func (c *call) retry(t *Tracker, w *wire) {
	if c.answered || w.fromTag != c.fromTag {
		t.stats.Ignored++
		return
	}
	c.pending = false
	c.inviteAt = w.m.At
}

// request handles an in-dialog request, a CANCEL or an ACK of the call.
func (c *call) request(t *Tracker, w *wire) []event.Event {
	if c.ended {
		t.stats.Ignored++
		return nil
	}
	if w.method == "CANCEL" {
		return c.cancel(t, w)
	}
	if !c.answered || !c.inDialog(w) {
		t.stats.Ignored++
		return nil
	}
	c.lastAt = later(c.lastAt, w.m.At)
	switch w.method {
	case "BYE":
		return c.bye(t, w)
	case "INVITE", "UPDATE":
		return c.offer(t, w)
	case "REFER":
		if tg, err := referTargetOf(w.req); err == nil || tg.party.uri != "" {
			if c.refers == nil {
				c.refers = make(map[string]referTarget)
			}
			if len(c.refers) < maxPendingRefs {
				c.refers[strconv.FormatUint(uint64(w.cseq), 10)+" "+w.fromTag] = tg
			}
		}
	}
	return nil
}

// inDialog reports whether an in-dialog message belongs to the answered dialog.
func (c *call) inDialog(w *wire) bool {
	return w.fromTag == c.fromTag && w.toTag == c.answerTag || w.fromTag == c.answerTag && w.toTag == c.fromTag
}

// side is 0 for a request sent by the caller, 1 for one sent by the callee.
func (c *call) side(w *wire) int {
	if w.fromTag == c.fromTag {
		return 0
	}
	return 1
}

// cancel handles the caller's CANCEL of the initial INVITE.
func (c *call) cancel(t *Tracker, w *wire) []event.Event {
	if c.answered || c.cancelled || w.fromTag != c.fromTag {
		t.stats.Ignored++
		return nil
	}
	c.cancelled = true
	raw := renderRaw(w)
	rs := messageReasons(w.req)
	if answeredElsewhere(rs) {
		e := c.endEvent(t, w.m.At, event.DispositionAnswered, w.eventID(c, event.CallEnded), raw)
		e.AnsweredElsewhere = event.Ptr(true)
		return t.events(e)
	}
	return c.unanswered(t, w.m.At, event.DispositionCancelled, 0, "", w, raw)
}

// bye ends an answered call.
func (c *call) bye(t *Tracker, w *wire) []event.Event {
	e := c.endEvent(t, w.m.At, event.DispositionAnswered, w.eventID(c, event.CallEnded), renderRaw(w))
	rs := messageReasons(w.req)
	if r, ok := sipCause(rs); ok {
		e.SIPCode = event.Ptr(r.cause)
		e.SIPReason = r.text
	} else if r, ok := q850Cause(rs); ok {
		// A Q.850 cause is not a SIP code: it is kept as the reason's words, with its number.
		e.SIPReason = r.text
		if e.SIPReason == "" {
			e.SIPReason = "Q.850 cause " + strconv.Itoa(r.cause)
		} else {
			e.SIPReason += " (Q.850 cause " + strconv.Itoa(r.cause) + ")"
		}
	}
	return t.events(e)
}

// offer reads the SDP of an in-dialog INVITE or UPDATE for a change of hold by its sender.
func (c *call) offer(t *Tracker, w *wire) []event.Event {
	info, ok, err := messageSDP(w.req)
	if err != nil {
		return nil
	}
	if !ok {
		if w.method == "INVITE" {
			// A re-INVITE without SDP asks the other side for an offer, in its 2xx.
			c.lateOffer, c.lateCSeq, c.lateTag = true, w.cseq, w.fromTag
		}
		return nil
	}
	return c.hold(t, w, c.side(w), info)
}

// hold compares the SDP a side offered with its last one, and emits call_hold when the side's
// hold changed.
func (c *call) hold(t *Tracker, w *wire, s int, info sdpInfo) []event.Event {
	if c.hasS[s] && c.sdp[s] == info.fingerprint {
		return nil // a session refresh repeating the SDP
	}
	c.sdp[s], c.hasS[s] = info.fingerprint, true
	if info.held == c.held[s] {
		return nil
	}
	c.held[s] = info.held
	e := c.emit(t, event.CallHold, w.m.At, w.eventID(c, event.CallHold), renderRaw(w))
	e.Released = event.Ptr(!info.held)
	return t.events(e)
}

// response handles a response of the call.
func (c *call) response(t *Tracker, w *wire) []event.Event {
	if c.ended {
		t.stats.Ignored++
		return nil
	}
	if w.status > 100 {
		c.responded = true
	}
	switch {
	case w.method == "INVITE" && w.fromTag == c.fromTag && !c.answered:
		return c.inviteResponse(t, w)
	case c.answered && c.inDialog(w):
		c.lastAt = later(c.lastAt, w.m.At)
		if w.status >= 200 && w.status < 300 {
			switch w.method {
			case "INVITE", "UPDATE":
				// RFC 4028 section 7.2: a 2xx without Session-Expires ends the session timer.
				c.sessionExp = sessionExpires(w.resp)
				if w.method == "INVITE" && c.lateOffer && w.cseq == c.lateCSeq && w.fromTag == c.lateTag {
					// The offer of a re-INVITE without SDP, made by the side that answers it.
					c.lateOffer = false
					if info, ok, err := messageSDP(w.resp); ok && err == nil {
						return c.hold(t, w, 1-c.side(w), info)
					}
				}
			case "REFER":
				// The REFER went the other way: its from-tag is the response's from-tag.
				k := strconv.FormatUint(uint64(w.cseq), 10) + " " + w.fromTag
				if tg, ok := c.refers[k]; ok {
					delete(c.refers, k)
					return t.events(c.transfer(t, w, tg))
				}
			}
		}
		return nil
	}
	t.stats.Ignored++
	return nil
}

// inviteResponse handles a response to the initial INVITE before the call was answered.
func (c *call) inviteResponse(t *Tracker, w *wire) []event.Event {
	switch {
	case w.status < 200:
		if w.status > 100 {
			c.pending = false // a branch rings: whatever failed before, the call goes on
		}
		return nil
	case w.status < 300:
		if c.cancelled {
			return nil // a 2xx racing the CANCEL: the caller hangs up at once
		}
		c.answered, c.answerTag, c.answerAt, c.lastAt = true, w.toTag, w.m.At, w.m.At
		c.pending = false
		c.sessionExp = sessionExpires(w.resp) // RFC 4028 section 7.2: the 2xx decides
		if info, ok, err := messageSDP(w.resp); ok && err == nil {
			c.sdp[1], c.hasS[1] = info.fingerprint, true
		}
		e := c.emit(t, event.CallAnswered, w.m.At, w.eventID(c, event.CallAnswered), renderRaw(w))
		if id, ok := answeringParty(w.resp); ok {
			if p := t.cfg.Plan.Classify(id.uri, ""); p.Kind == event.KindExtension {
				e.AnsweredBy = p.Extension
			}
		}
		return t.events(e)
	}
	if c.cancelled {
		return nil // the 487 that answers the CANCEL
	}
	if retryable(w.status) || w.m.Dst != c.callerHop {
		// A redirect, a challenge or a too-short session interval: the caller retries with a
		// new INVITE on the same Call-ID, and it is the same call. Or a final response headed
		// elsewhere than to the caller's hop (a proxy's branch, captured on its far side): the
		// proxy may still try another branch. Either way the call ends only if nothing follows.
		c.pending, c.pendingAt, c.pendingCode, c.pendingReason = true, w.m.At, w.status, w.reason
		return nil
	}
	return c.unanswered(t, w.m.At, disposition(w.status), w.status, w.reason, w, renderRaw(w))
}

// finalCopy handles a copy of the pending final response that reaches the caller's hop: the
// proxy gave up, the call ends as of the first copy.
func (c *call) finalCopy(t *Tracker, w *wire) []event.Event {
	c.pending = false
	return c.unanswered(t, c.pendingAt, disposition(w.status), w.status, w.reason, w, renderRaw(w))
}

// retryable reports whether a final response to an INVITE is one its sender retries on the same
// Call-ID: 3xx (the new target), 401 and 407 (credentials), 422 (a longer session interval).
func retryable(code int) bool {
	return code >= 300 && code < 400 || code == 401 || code == 407 || code == 422
}

// disposition is how a final failure response ends a call.
func disposition(code int) event.Disposition {
	switch code {
	case 486, 600:
		return event.DispositionBusy
	case 603:
		return event.DispositionRejected
	case 480, 408:
		return event.DispositionNoAnswer
	case 487:
		return event.DispositionCancelled
	}
	return event.DispositionFailed
}

// transfer builds the call_transferred of an accepted REFER.
func (c *call) transfer(t *Tracker, w *wire, tg referTarget) event.Event {
	e := c.emit(t, event.CallTransferred, w.m.At, w.eventID(c, event.CallTransferred), renderRaw(w))
	p := t.cfg.Plan.Classify(tg.party.uri, tg.party.display)
	e.TransferTo = &p
	e.Mode = event.TransferBlind
	if tg.attended {
		e.Mode = event.TransferAttended
	}
	return e
}

// unanswered ends a call that was never answered: call_missed first when it was inbound.
// w is nil for an inferred end; then the ids key on the call.
func (c *call) unanswered(t *Tracker, at time.Time, d event.Disposition, code int, reason string, w *wire, raw json.RawMessage) []event.Event {
	id := func(typ event.Type) string {
		if w == nil {
			return inferredID(c, typ)
		}
		return w.eventID(c, typ)
	}
	var missed event.Event
	inbound := c.block.Direction == event.Inbound
	if inbound {
		missed = c.emit(t, event.CallMissed, at, id(event.CallMissed), raw)
	}
	e := c.endEvent(t, at, d, id(event.CallEnded), raw)
	if code != 0 {
		e.SIPCode = event.Ptr(code)
		e.SIPReason = cut(reason, event.MaxNameLength)
	}
	if inbound {
		return t.events(missed, e)
	}
	return t.events(e)
}

// events returns es, a reading's events (at most len(t.scratch)), in the tracker's scratch. The
// slice is valid until the next reading's events; its capacity is its length, so appending to
// it copies it.
func (t *Tracker) events(es ...event.Event) []event.Event {
	n := copy(t.scratch[:], es)
	return t.scratch[:n:n]
}

// endEvent builds call_ended and marks the call ended at at.
func (c *call) endEvent(t *Tracker, at time.Time, d event.Disposition, id string, raw json.RawMessage) event.Event {
	e := c.emit(t, event.CallEnded, at, id, raw)
	e.Disposition = d
	e.Duration = event.Ptr(seconds(at.Sub(c.firstAt)))
	if d == event.DispositionAnswered && c.answered {
		e.TalkTime = event.Ptr(seconds(at.Sub(c.answerAt)))
	}
	c.ended, c.endedAt, c.forgetAt = true, at, at.Add(t.cfg.Grace)
	c.shed()
	return e
}

// shed lets go of what only a call in progress needs. An ended call emits nothing more; it is
// held for Grace only to absorb retransmissions and late copies and to number a new call on its
// Call-ID, and at the rates a proxy carries most calls held are such calls, which the garbage
// collector scans on every cycle.
func (c *call) shed() {
	c.block = event.Call{Direction: c.block.Direction}
	c.locs = nil
	c.refers = nil
	c.answerTag, c.lateTag, c.pendingReason = "", "", ""
}

// deadline is when Expire next has something to do with the call.
func (c *call) deadline(t *Tracker) time.Time {
	switch {
	case c.ended:
		return c.forgetAt
	case c.answered:
		if c.sessionExp > 0 {
			return c.lastAt.Add(c.sessionExp + SessionMargin)
		}
		return c.lastAt.Add(t.cfg.CallTimeout)
	case c.pending:
		return c.pendingAt.Add(t.cfg.Grace)
	}
	return c.inviteAt.Add(t.cfg.RingTimeout)
}

// expire ends the call at its deadline at.
func (c *call) expire(t *Tracker, at time.Time) []event.Event {
	last := c.seenAt
	switch {
	case c.answered:
		why := "no BYE within the call timeout of silence"
		if c.sessionExp > 0 {
			why = "no BYE and no session refresh within Session-Expires " + strconv.Itoa(int(c.sessionExp/time.Second)) + "s"
		}
		return t.events(c.endEvent(t, at, event.DispositionAnswered, inferredID(c, event.CallEnded), inferredRaw(why, last)))
	case c.pending:
		// The call ended at the response that was never retried.
		why := "no new INVITE after " + strconv.Itoa(c.pendingCode) + " " + c.pendingReason
		if !retryable(c.pendingCode) {
			why = "no other branch and no copy to the caller after " + strconv.Itoa(c.pendingCode) + " " + c.pendingReason
		}
		return c.unanswered(t, c.pendingAt, disposition(c.pendingCode), c.pendingCode, c.pendingReason, nil, inferredRaw(why, last))
	}
	return c.unanswered(t, at, event.DispositionNoAnswer, 0, "", nil, inferredRaw("no final response within the ring timeout", last))
}

// supersede ends an answered call whose Call-ID a new call took, as of the new call's INVITE.
func (c *call) supersede(t *Tracker, at time.Time) []event.Event {
	at = later(at, c.lastAt)
	return t.events(c.endEvent(t, at, event.DispositionAnswered, inferredID(c, event.CallEnded),
		inferredRaw("a new call took the Call-ID; no BYE was seen", c.seenAt)))
}

// emit builds the next event of the call. The call's events share its call block's parties and
// diversion hops and its locations: the call sets them once, when it starts, and replaces
// rather than changes them afterwards (shed), so a copy per event would only be garbage.
func (c *call) emit(t *Tracker, typ event.Type, at time.Time, id string, raw json.RawMessage) event.Event {
	c.seq++
	e := event.New(typ, c.id, at, c.block)
	e.Provider = t.cfg.Provider
	e.Observer = t.cfg.Observer
	e.Sequence = c.seq
	e.ProviderEventID = id
	if len(c.locs) > 0 {
		e.Locations = c.locs
	}
	e.Raw = raw
	return e
}

// eventID is the providerEventId of an event a message causes: from the meaning of the message,
// never its bytes or its arrival, so a retransmission, a second capture or a replay gives the
// same id.
func (w *wire) eventID(c *call, typ event.Type) string {
	status := ""
	if w.resp != nil {
		status = strconv.Itoa(w.status)
	}
	return hashID(c.id, string(typ), strconv.FormatUint(uint64(w.cseq), 10), w.method, status, w.toTag)
}

// inferredID is the providerEventId of an event Expire infers.
func inferredID(c *call, typ event.Type) string {
	return hashID(c.id, string(typ), "inferred")
}

// hashID is "sip-" and the first 128 bits of the SHA-256 of the parts, each followed by a zero
// byte, in hex.
func hashID(parts ...string) string {
	var buf [256]byte
	b := buf[:0]
	for _, p := range parts {
		b = append(b, p...)
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	var out [4 + 32]byte
	copy(out[:], "sip-")
	hex.Encode(out[4:], sum[:16])
	return string(out[:])
}

// inferredRaw is the raw of an event Expire inferred.
func inferredRaw(why string, last time.Time) json.RawMessage {
	b, err := json.Marshal(struct {
		Inferred   string `json:"inferred"`
		LastSeenAt string `json:"lastSeenAt"`
	}{why, last.UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return nil
	}
	return b
}

// sessionExpires reads the Session-Expires header (RFC 4028, compact "x"): its delta-seconds.
func sessionExpires(msg headerer) time.Duration {
	vs := headerValues(msg, "Session-Expires", "x")
	if len(vs) == 0 {
		return 0
	}
	v, _, _ := strings.Cut(vs[0], ";")
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 || n > 86400 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// seconds is d in seconds, to the millisecond, never negative.
func seconds(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return math.Round(float64(d/time.Millisecond)) / 1000
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cut bounds s to n characters.
func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}
