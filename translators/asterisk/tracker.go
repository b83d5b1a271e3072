package asterisk

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/asterisk/ami"
	"github.com/callwire/callwire/translators/numbering"
)

// Asterisk channel states (ChannelState in AMI events).
const (
	stateRinging = 5 // the far end is ringing
	stateUp      = 6
)

// plumbing are channel technologies that are never a phone or a trunk: Local channels join two
// halves of the dialplan, the others are the PBX's own announcers, recorders and spies.
var plumbing = []string{"local/", "announcer/", "cbann/", "cbrec/", "recorder/", "snoop/", "message/", "bridge/", "multicast/"}

// TrackerConfig configures a Tracker.
type TrackerConfig struct {
	// Plan classifies numbers and gives a clinic number's locations. Required.
	Plan *numbering.Plan
	// Provider is the events' provider. Required.
	Provider string
	// TrunkChannels are prefixes of trunk channel names; TrunkContexts the contexts trunk
	// channels start in. A channel matching either is a trunk channel.
	TrunkChannels []string
	TrunkContexts []string
	// EndpointExtensions maps a phone's endpoint, as its channels name it ("PJSIP/frontdesk" or
	// just "frontdesk"; letter case ignored), to the extension the clinic knows it by. A phone
	// not in it is known by its endpoint name. Entries with an empty key or value are an error.
	EndpointExtensions map[string]string
}

// TrackerStats are the Tracker's counters.
type TrackerStats struct {
	Messages int64 `json:"messages"` // AMI events observed
	Ignored  int64 `json:"ignored"`  // events of no call, or of kinds the model does not use
	Calls    int64 `json:"calls"`    // calls seen
	Active   int   `json:"active"`   // calls in progress
	Emitted  int64 `json:"emitted"`  // canonical events produced
	Resyncs  int64 `json:"resyncs"`  // views rebuilt from CoreShowChannels
	Swept    int64 `json:"swept"`    // channels dropped by a Sweep: their Hangup was never seen
}

// Tracker turns AMI events into canonical call events. It does no I/O and keeps no clock of its
// own: each event's time is its Timestamp field when Asterisk sends one (manager.conf
// timestampevents = yes), otherwise the time the caller passes. A Tracker is used from one
// goroutine.
//
// A call is a Linkedid (the providerCallId); its legs are channels, by Uniqueid. A leg whose
// Linkedid changes (an attended transfer joins two calls) moves to the call it now belongs to.
// Every event's providerEventId is derived from the call, the event's kind and the channel, so
// that seeing a call again (after a reconnect or a restart) repeats ids rather than inventing
// new ones.
type Tracker struct {
	cfg   TrackerConfig
	calls map[string]*call // by the Linkedid the call is filed under
	alias map[string]string
	legs  map[string]*leg // by Uniqueid
	// hungUp holds the Uniqueids of the last maxHungUp channels that hung up, oldest first in
	// hungUpOrder: Asterisk still sends events about a channel after its Hangup (a
	// NewConnectedLine, a NewAccountCode), and such an event must not bring the channel back.
	hungUp      map[string]struct{}
	hungUpOrder []string
	stats       TrackerStats
}

// maxHungUp bounds how many hung-up channels a Tracker remembers. Asterisk's late events for a
// channel follow its Hangup within the same few messages, and a Uniqueid is never reused (it is
// the channel's creation time and a counter), so the last few thousand are plenty.
const maxHungUp = 4096

type legKind uint8

const (
	kindPhone legKind = iota
	kindTrunk
	kindPlumbing
)

type leg struct {
	uid, name string
	kind      legKind
	call      *call
	state     int
	cidNum    string
	cidName   string
	exten     string // the extension the channel was created for
	context   string // the context the channel was created in
	answered  bool   // reported as the answering leg
	ringing   bool
	holds     int
	hold      holdState
	dialer    *leg // the channel whose Dial created this one (DialBegin), if seen
	missing   bool // absent from the last Sweep's list
	withheld  bool // the caller ID's presentation is prohibited
}

// holdState is whether a leg is on hold, as far as the Tracker knows.
type holdState uint8

const (
	holdUnknown holdState = iota // the leg was first seen mid-call (a resync, a restart)
	holdOff                      // seen from its Newchannel, or released since
	holdOn
)

type call struct {
	id          string
	startedAt   time.Time
	lastAt      time.Time
	legs        map[string]*leg
	origin      *leg
	block       event.Call
	locs        []string
	started     bool // call_received or call_placed emitted
	answered    bool
	answeredAt  time.Time
	answerShown bool // a call_answered was reported since the call began or was last transferred
	elsewhere   bool // answered outside the PBX's phones: a forward to an outside number
	voicemail   bool
	abandoned   bool
	dialStatus  string // the last DialStatus of the originating channel's Dial, else of any Dial
	originDial  bool   // dialStatus came from the originating channel
	lastCause   int
	seq         int64
	transfers   int
}

// NewTracker returns a Tracker, or an error when cfg lacks what it needs.
func NewTracker(cfg TrackerConfig) (*Tracker, error) {
	if cfg.Plan == nil {
		return nil, errors.New("asterisk tracker: a numbering plan is required")
	}
	if cfg.Provider == "" {
		return nil, errors.New("asterisk tracker: a provider is required")
	}
	exts := make(map[string]string, len(cfg.EndpointExtensions))
	for k, v := range cfg.EndpointExtensions {
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if k == "" || v == "" {
			return nil, fmt.Errorf("asterisk tracker: endpoint extension %q → %q: both must be set", k, v)
		}
		exts[k] = v
	}
	cfg.EndpointExtensions = exts
	return &Tracker{cfg: cfg, calls: make(map[string]*call), alias: make(map[string]string), legs: make(map[string]*leg),
		hungUp: make(map[string]struct{})}, nil
}

// Stats returns the Tracker's counters.
func (t *Tracker) Stats() TrackerStats {
	s := t.stats
	s.Active = len(t.calls)
	return s
}

// Active returns the providerCallIds of the calls in progress (in no particular order).
func (t *Tracker) Active() []string {
	out := make([]string, 0, len(t.calls))
	for id := range t.calls {
		out = append(out, id)
	}
	return out
}

// eventTime is m's Timestamp when it has one, else at.
func eventTime(m ami.Message, at time.Time) time.Time {
	if ts := m.Get("Timestamp"); ts != "" {
		if f, err := strconv.ParseFloat(ts, 64); err == nil && f > 0 && f < 1e11 {
			sec := int64(f)
			return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC().Truncate(time.Microsecond)
		}
	}
	return at
}

// Observe takes one AMI event seen at at and returns the canonical events it completes, in
// order. It never panics on any message.
func (t *Tracker) Observe(m ami.Message, at time.Time) []event.Event {
	t.stats.Messages++
	at = eventTime(m, at)
	var out []event.Event
	switch strings.ToLower(m.Event()) {
	case "newchannel":
		if l := t.legOf(m, "", at, &out); l != nil {
			t.update(l, m, "")
			if l.hold == holdUnknown {
				l.hold = holdOff // a channel starts off hold
			}
		}
	case "newstate":
		if l := t.legOf(m, "", at, &out); l != nil {
			t.update(l, m, "")
			out = append(out, t.stateChanged(l, at)...)
		}
	case "newcallerid", "newconnectedline", "newaccountcode", "newexten", "bridgeenter", "bridgeleave":
		l := t.legOf(m, "", at, &out)
		if l == nil {
			break
		}
		t.update(l, m, "")
		if strings.EqualFold(m.Event(), "Newexten") && strings.EqualFold(m.Get("Application"), "VoiceMail") {
			l.call.voicemail = true
		}
	case "dialbegin":
		src := t.legOf(m, "", at, &out)
		dst := t.legOf(m, "Dest", at, &out)
		if dst == nil {
			break
		}
		t.update(dst, m, "Dest")
		if src != nil {
			t.update(src, m, "")
			if src != dst {
				dst.dialer = src
				out = append(out, t.join(dst, src.call, at)...)
			}
		}
		out = append(out, t.dialed(dst, at)...)
	case "dialend":
		src := t.legOf(m, "", at, &out)
		dst := t.legOf(m, "Dest", at, &out)
		status := strings.ToUpper(strings.TrimSpace(m.Get("DialStatus")))
		if src != nil && dst != nil && src != dst {
			out = append(out, t.join(dst, src.call, at)...)
		}
		if dst != nil {
			t.update(dst, m, "Dest")
			if status == "ANSWER" {
				dst.state = stateUp
				out = append(out, t.stateChanged(dst, at)...)
			}
		}
		c := callOf(src, dst)
		if c == nil || status == "" || status == "ANSWER" {
			break
		}
		fromOrigin := src != nil && src == c.origin
		if fromOrigin || !c.originDial {
			c.dialStatus, c.originDial = status, fromOrigin
		}
	case "hangup":
		if _, known := t.legs[m.Get("Uniqueid")]; !known {
			t.stats.Ignored++ // a channel that ended before it was seen
			break
		}
		l := t.legOf(m, "", at, &out)
		if l == nil {
			break
		}
		c := l.call
		if n, err := strconv.Atoi(m.Get("Cause")); err == nil && (l == c.origin || c.lastCause == 0) {
			c.lastCause = n
		}
		out = append(out, t.drop(l, at)...)
	case "hold", "unhold":
		l := t.legOf(m, "", at, &out)
		if l == nil {
			break
		}
		out = append(out, t.hold(l, strings.EqualFold(m.Event(), "Unhold"), at)...)
	case "blindtransfer":
		out = append(out, t.blindTransfer(m, at)...)
	case "attendedtransfer":
		out = append(out, t.attendedTransfer(m, at)...)
	case "pickup":
		out = append(out, t.pickup(m, at)...)
	case "queuecallerabandon":
		if l := t.legOf(m, "", at, &out); l != nil {
			l.call.abandoned = true
		}
	default:
		t.stats.Ignored++
	}
	t.stats.Emitted += int64(len(out))
	return out
}

func callOf(ls ...*leg) *call {
	for _, l := range ls {
		if l != nil {
			return l.call
		}
	}
	return nil
}

// lookup returns the call filed under linkedid, following the calls it was merged into.
func (t *Tracker) lookup(linkedid string) *call {
	for range 8 {
		if c, ok := t.calls[linkedid]; ok {
			return c
		}
		next, ok := t.alias[linkedid]
		if !ok {
			return nil
		}
		linkedid = next
	}
	return nil
}

// legOf returns the leg a message is about (its fields prefixed with prefix: "" or "Dest"),
// creating the leg, and its call, when they are new. A leg whose Linkedid changed moves to its
// new call. It returns nil for a message about no channel.
func (t *Tracker) legOf(m ami.Message, prefix string, at time.Time, out *[]event.Event) *leg {
	uid := m.Get(prefix + "Uniqueid")
	lid := m.Get(prefix + "Linkedid")
	if uid == "" {
		return nil
	}
	if lid == "" {
		lid = uid
	}
	if !validID(uid) || !validID(lid) {
		t.stats.Ignored++
		return nil
	}
	if _, gone := t.hungUp[uid]; gone {
		return nil // a late event of a channel that hung up: it is not a channel any more
	}
	if l, ok := t.legs[uid]; ok {
		target := t.lookup(lid)
		switch {
		case target == nil:
			t.alias[lid] = l.call.id
		case target != l.call:
			*out = append(*out, t.move(l, target, at)...)
		}
		return l
	}
	c := t.lookup(lid)
	if c == nil {
		c = &call{id: lid, startedAt: at, legs: make(map[string]*leg)}
		t.calls[lid] = c
		t.stats.Calls++
	}
	l := &leg{uid: uid, name: m.Get(prefix + "Channel"), call: c}
	l.context = m.Get(prefix + "Context")
	l.exten = m.Get(prefix + "Exten")
	l.kind = t.kindOf(l.name, l.context)
	c.legs[uid] = l
	t.legs[uid] = l
	if c.origin == nil && l.kind != kindPlumbing && (uid == lid || len(c.legs) == 1 || c.onlyPlumbing(l)) {
		c.origin = l
	}
	return l
}

// inbound reports whether the call came in from the carrier: its originating channel is a trunk
// channel that no Dial created. A trunk channel the PBX dialled first (an Originate) begins an
// outbound call.
func (c *call) inbound() bool {
	return c.origin != nil && c.origin.kind == kindTrunk && c.origin.dialer == nil
}

func (c *call) onlyPlumbing(except *leg) bool {
	for _, l := range c.legs {
		if l != except && l.kind != kindPlumbing {
			return false
		}
	}
	return true
}

func (t *Tracker) kindOf(name, context string) legKind {
	low := strings.ToLower(name)
	for _, p := range plumbing {
		if strings.HasPrefix(low, p) {
			return kindPlumbing
		}
	}
	for _, p := range t.cfg.TrunkChannels {
		if strings.HasPrefix(low, strings.ToLower(p)) {
			return kindTrunk
		}
	}
	for _, ctx := range t.cfg.TrunkContexts {
		if context != "" && strings.EqualFold(ctx, context) {
			return kindTrunk
		}
	}
	return kindPhone
}

// update refreshes what a leg shows of itself from m's fields under prefix.
func (t *Tracker) update(l *leg, m ami.Message, prefix string) {
	if s := m.Get(prefix + "ChannelState"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			l.state = n
		}
	}
	if v := m.Get(prefix + "CallerIDNum"); v != "" && v != "<unknown>" {
		l.cidNum = v
	}
	if v := m.Get(prefix + "CallerIDName"); v != "" && v != "<unknown>" {
		l.cidName = v
	}
	if v := m.Get(prefix + "CID-CallingPres"); v != "" {
		l.withheld = strings.Contains(strings.ToLower(v), "prohibited")
	}
	if l.exten == "" {
		l.exten = m.Get(prefix + "Exten")
	}
	if l.context == "" {
		if l.context = m.Get(prefix + "Context"); l.context != "" && l.kind == kindPhone {
			l.kind = t.kindOf(l.name, l.context)
		}
	}
}

// endpoint is a channel's technology and endpoint name: "PJSIP/201-0000001a" is "PJSIP" and
// "201".
func (l *leg) endpoint() (tech, name string) {
	name = l.name
	if i := strings.IndexByte(name, '/'); i >= 0 {
		tech, name = name[:i], name[i+1:]
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		name = name[:i]
	}
	return tech, name
}

// extension is the extension of a phone leg: the one EndpointExtensions gives its endpoint, else
// the endpoint's name, which FreePBX and most configurations make the extension
// ("PJSIP/201-0000001a" is 201), else its caller ID number.
//
// The channel's own CallerIDNum is not used: on a dialled channel Asterisk sets it to the number
// that was dialled, which for a ring group or a queue is the group's number or the clinic's DID,
// not the phone's extension.
func (t *Tracker) extension(l *leg) string {
	tech, name := l.endpoint()
	if len(t.cfg.EndpointExtensions) > 0 && name != "" {
		if x, ok := t.cfg.EndpointExtensions[strings.ToLower(tech+"/"+name)]; ok {
			return x
		}
		if x, ok := t.cfg.EndpointExtensions[strings.ToLower(name)]; ok {
			return x
		}
	}
	if name == "" {
		return l.cidNum
	}
	return name
}

// trunkName is the name of a trunk leg's endpoint, for the call's trunk.
func (l *leg) trunkName() string {
	if _, name := l.endpoint(); name != "" {
		return name
	}
	return l.cidNum
}

// begin decides the call's direction and parties, once, when it first has something to report.
func (t *Tracker) begin(c *call, callee *leg) {
	if c.block.Direction != "" {
		return
	}
	o := c.origin
	if o == nil {
		o = callee
	}
	plan := t.cfg.Plan
	var from, to event.Party
	if o != nil {
		from = plan.Classify(o.cidNum, o.cidName)
		switch {
		case o.dialer == nil:
			to = plan.Classify(o.exten, "")
		case callee != nil && callee.kind == kindTrunk:
			// An Originate: the PBX dialled the calling party first, so the origin's extension
			// is the dialplan's ("s"); the called party is the outside number dialled next,
			// which Asterisk shows as that channel's caller ID.
			to = plan.Classify(callee.cidNum, "")
		}
		if o.withheld {
			// The caller withheld the number: the PBX knows it, the desk must not see it.
			from = event.Party{Kind: event.KindAnonymous}
		}
	}
	switch {
	case c.inbound():
		c.block.Direction = event.Inbound
	case o != nil && o.kind == kindTrunk:
		// The PBX dialled the outside party first (an Originate: click-to-dial, call-me-now):
		// the call was placed by the PBX, not received.
		c.block.Direction = event.Outbound
	case callee != nil && callee.kind == kindTrunk:
		c.block.Direction = event.Outbound
	default:
		if d, ok := plan.Direction(from, to); ok {
			c.block.Direction = d
		} else {
			c.block.Direction = event.Internal
		}
	}
	if to.EffectiveKind() == event.KindUnknown && callee != nil && callee.kind == kindPhone && c.block.Direction != event.Outbound {
		to = event.Party{Kind: event.KindExtension, Extension: t.extension(callee)}
	}
	c.block.From, c.block.To = &from, &to
	if c.block.Direction == event.Inbound && to.Number != "" {
		c.locs = plan.Locations(to.Number)
	}
	if c.block.Direction == event.Outbound && from.Number != "" {
		c.locs = plan.Locations(from.Number)
	}
	if o != nil && o.kind == kindTrunk {
		c.block.Trunk = o.trunkName()
	} else if callee != nil && callee.kind == kindTrunk {
		c.block.Trunk = callee.trunkName()
	}
}

// start emits call_received (inbound) or call_placed, once.
func (t *Tracker) start(c *call, callee *leg, at time.Time) []event.Event {
	if c.started {
		return nil
	}
	t.begin(c, callee)
	c.started = true
	typ := event.CallPlaced
	if c.block.Direction == event.Inbound {
		typ = event.CallReceived
	}
	return []event.Event{t.emit(c, typ, at, c.id+"/"+string(typ))}
}

// dialed handles a Dial towards dst.
func (t *Tracker) dialed(dst *leg, at time.Time) []event.Event {
	c := dst.call
	if dst.kind == kindPlumbing || dst == c.origin {
		return nil
	}
	if c.inbound() && dst.kind == kindTrunk {
		return nil // a call forwarded out: it started when a phone rang, or ends as it ends
	}
	dst.ringing = true
	return t.start(c, dst, at)
}

// stateChanged reacts to a leg's new state: a phone ringing, a called leg answering.
func (t *Tracker) stateChanged(l *leg, at time.Time) []event.Event {
	c := l.call
	if l.kind == kindPlumbing || l == c.origin {
		return nil
	}
	switch l.state {
	case stateRinging:
		if l.kind == kindPhone || !c.started {
			return t.dialed(l, at)
		}
	case stateUp:
		if l.answered {
			return nil
		}
		if c.inbound() && l.kind == kindTrunk {
			// An inbound call forwarded to an outside number (follow-me to a mobile) answered
			// there: someone took it, though no clinic phone did. No call_answered (there is no
			// phone to name); the call ends answered elsewhere, not missed.
			l.answered = true
			if !c.answered {
				c.answered, c.answeredAt, c.elsewhere = true, at, true
			}
			return nil
		}
		out := t.start(c, l, at)
		l.answered = true
		if !c.answered {
			c.answered, c.answeredAt = true, at
		}
		if c.answerShown {
			// The call is already with someone and has not been transferred since: this leg
			// answered a consultation the transferer made under the call's Linkedid (Asterisk's
			// attended-transfer feature), not the caller. The transfer names it.
			return out
		}
		c.answerShown = true
		e := t.emit(c, event.CallAnswered, at, c.id+"/answered/"+l.uid)
		if l.kind == kindPhone {
			e.AnsweredBy = t.extension(l)
		}
		return append(out, e)
	}
	return nil
}

// drop removes a leg that hung up, and ends its call when it was the last.
func (t *Tracker) drop(l *leg, at time.Time) []event.Event {
	c := l.call
	delete(c.legs, l.uid)
	delete(t.legs, l.uid)
	if _, seen := t.hungUp[l.uid]; !seen {
		if len(t.hungUpOrder) >= maxHungUp {
			delete(t.hungUp, t.hungUpOrder[0])
			t.hungUpOrder = t.hungUpOrder[1:]
		}
		t.hungUp[l.uid] = struct{}{}
		t.hungUpOrder = append(t.hungUpOrder, l.uid)
	}
	if len(c.legs) > 0 {
		return nil
	}
	return t.end(c, at)
}

// end reports the end of a call and forgets it.
func (t *Tracker) end(c *call, at time.Time) []event.Event {
	for uid := range c.legs {
		delete(t.legs, uid)
	}
	delete(t.calls, c.id)
	for a, target := range t.alias {
		if target == c.id || a == c.id {
			delete(t.alias, a)
		}
	}
	if !c.started && c.origin == nil {
		return nil // nothing but plumbing was ever seen
	}
	t.begin(c, nil)
	at = later(at, c.lastAt)
	var out []event.Event
	var d event.Disposition
	switch {
	case c.answered:
		d = event.DispositionAnswered
	case c.voicemail:
		d = event.DispositionVoicemail
	case c.abandoned:
		d = event.DispositionCancelled
	default:
		d = c.failure()
	}
	if !c.started && c.block.Direction != event.Inbound {
		out = append(out, t.start(c, nil, at)...)
	}
	if !c.answered && c.block.Direction == event.Inbound {
		out = append(out, t.emit(c, event.CallMissed, at, c.id+"/missed"))
	}
	e := t.emit(c, event.CallEnded, at, c.id+"/ended")
	e.Disposition = d
	if c.elsewhere {
		e.AnsweredElsewhere = event.Ptr(true)
	}
	e.Duration = event.Ptr(seconds(at.Sub(c.startedAt)))
	if c.answered {
		e.TalkTime = event.Ptr(seconds(at.Sub(c.answeredAt)))
	} else {
		e.TalkTime = event.Ptr(0.0)
	}
	return append(out, e)
}

// failure is how an unanswered call ended, from its Dial status, else the hangup cause.
func (c *call) failure() event.Disposition {
	switch c.dialStatus {
	case "BUSY":
		return event.DispositionBusy
	case "NOANSWER":
		return event.DispositionNoAnswer
	case "CANCEL":
		return event.DispositionCancelled
	case "CONGESTION", "CHANUNAVAIL", "INVALIDARGS", "DONTCALL", "TORTURE":
		return event.DispositionFailed
	}
	switch c.lastCause {
	case 17:
		return event.DispositionBusy
	case 18, 19:
		return event.DispositionNoAnswer
	case 21:
		return event.DispositionRejected
	case 0, 16, 31:
		return event.DispositionCancelled
	}
	return event.DispositionFailed
}

func seconds(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return float64(d.Milliseconds()) / 1000
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (t *Tracker) hold(l *leg, released bool, at time.Time) []event.Event {
	c := l.call
	kind := "hold"
	if released {
		if l.hold == holdOff {
			// An Unhold with no Hold before it: Asterisk sends one for the transferer just
			// before a BlindTransfer. Nothing was on hold, so nothing resumes. A leg first seen
			// mid-call (holdUnknown) may have been held before: its Unhold is passed on.
			t.stats.Ignored++
			return nil
		}
		kind = "unhold"
		l.hold = holdOff
	} else {
		l.holds++
		l.hold = holdOn
	}
	out := t.start(c, nil, at)
	e := t.emit(c, event.CallHold, at, c.id+"/"+kind+"/"+l.uid+"/"+strconv.Itoa(max(l.holds, 1)))
	e.Released = event.Ptr(released)
	return append(out, e)
}

func sortLegs(ls []*leg) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].uid < ls[j-1].uid; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

// emit builds the next event of call c.
func (t *Tracker) emit(c *call, typ event.Type, at time.Time, id string) event.Event {
	c.seq++
	at = later(at, c.lastAt)
	c.lastAt = at
	e := event.New(typ, c.id, at, c.block.Clone())
	e.Provider = t.cfg.Provider
	e.Observer = event.ObserverPBXAPI
	e.Sequence = c.seq
	e.ProviderEventID = id
	if len(c.locs) > 0 {
		e.Locations = append([]string(nil), c.locs...)
	}
	return e
}
