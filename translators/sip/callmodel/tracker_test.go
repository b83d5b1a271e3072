package callmodel

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/callwire/callwire/sdk/event"
)

func TestConfigValidate(t *testing.T) {
	good := testConfig(t)
	tests := []struct {
		name string
		mod  func(*Config)
		want []string // every one must be named in the error
	}{
		{"good", func(*Config) {}, nil},
		{"zero", func(c *Config) { *c = Config{} }, []string{"plan:", "pbx:"}},
		{"bad addresses", func(c *Config) {
			c.PBX = []netip.AddrPort{{}}
			c.Trunk = []netip.AddrPort{testPBX, netip.MustParseAddrPort("192.0.2.1:0")}
		}, []string{"pbx[0]:", "trunk[1]:"}},
		{"trunk is the pbx", func(c *Config) { c.Trunk = []netip.AddrPort{testPBX} }, []string{"trunk[0]:", "also a pbx"}},
		{"everything else", func(c *Config) {
			c.Provider, c.Observer = "Bad Provider", "spy"
			c.RingTimeout, c.CallTimeout, c.Grace, c.MaxCalls = -1, -1, -1, -1
		}, []string{"provider:", "observer:", "ring_timeout:", "call_timeout:", "grace:", "max_calls:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mod(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate = nil")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if _, err := NewTracker(c); err == nil {
				t.Error("NewTracker accepted an invalid configuration")
			}
		})
	}
}

// inboundInvite is an initial INVITE from the trunk to the PBX with the given Call-ID.
func inboundInvite(callID string, at time.Time) Message {
	text := "INVITE sip:+15551230100@10.0.0.20 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-" + callID + "\r\n" +
		"From: <sip:+12125550123@203.0.113.5>;tag=f1\r\n" +
		"To: <sip:+15551230100@10.0.0.20>\r\n" +
		"Call-ID: " + callID + "\r\n" +
		"CSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
	return Message{Data: []byte(text), Transport: "udp", Src: testTrunk, Dst: testPBX, At: at}
}

// ringing is the PBX's 180 to inboundInvite.
func ringing(callID string, at time.Time) Message {
	text := "SIP/2.0 180 Ringing\r\n" +
		"Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-" + callID + "\r\n" +
		"From: <sip:+12125550123@203.0.113.5>;tag=f1\r\n" +
		"To: <sip:+15551230100@10.0.0.20>;tag=t1\r\n" +
		"Call-ID: " + callID + "\r\n" +
		"CSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
	return Message{Data: []byte(text), Transport: "udp", Src: testPBX, Dst: testTrunk, At: at}
}

// busyHere is the PBX's 486 to inboundInvite.
func busyHere(callID string, at time.Time) Message {
	m := ringing(callID, at)
	m.Data = bytes.Replace(m.Data, []byte("180 Ringing"), []byte("486 Busy Here"), 1)
	return m
}

func TestMaxCallsBoundsAFlood(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxCalls = 100
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		tr.Observe(inboundInvite("flood-"+itoa(i), flowBase.Add(time.Duration(i)*time.Millisecond)))
		if n := tr.Stats().Calls; n > cfg.MaxCalls {
			t.Fatalf("after %d INVITEs %d calls held, more than %d", i+1, n, cfg.MaxCalls)
		}
	}
	s := tr.Stats()
	if s.Evicted != 10_000-100 || s.Dropped != 0 {
		t.Errorf("Evicted %d, Dropped %d; want %d and 0", s.Evicted, s.Dropped, 10_000-100)
	}
	if len(tr.fresh.items) > 2*cfg.MaxCalls+1024 {
		t.Errorf("eviction queue holds %d entries", len(tr.fresh.items))
	}
	if n := tr.timers.Len(); n > 2*cfg.MaxCalls+1024 {
		t.Errorf("deadline queue holds %d entries", n)
	}
	// The newest calls are the ones kept.
	if !tr.holds("flood-9999") || tr.holds("flood-0") {
		t.Error("eviction did not take the oldest calls")
	}
}

func TestMaxCallsRefusesWhenNoneEvictable(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxCalls = 3
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		id := "ringing-" + itoa(i)
		tr.Observe(inboundInvite(id, flowBase))
		tr.Observe(ringing(id, flowBase))
	}
	if evs := tr.Observe(inboundInvite("one-too-many", flowBase)); evs != nil {
		t.Errorf("a refused call made events: %v", evs)
	}
	if s := tr.Stats(); s.Dropped != 1 || s.Evicted != 0 || s.Calls != 3 {
		t.Errorf("stats %+v: want 1 dropped, 0 evicted, 3 calls", s)
	}
}

func TestExpireAndNextExpiry(t *testing.T) {
	tr := newTestTracker(t)
	if !tr.NextExpiry().IsZero() {
		t.Fatal("NextExpiry of an empty tracker is not zero")
	}
	evs := tr.Observe(inboundInvite("ring@x", flowBase))
	if len(evs) != 1 || evs[0].Type != event.CallReceived {
		t.Fatalf("INVITE gave %v", evs)
	}
	ringEnd := flowBase.Add(DefaultRingTimeout)
	if got := tr.NextExpiry(); !got.Equal(ringEnd) {
		t.Fatalf("NextExpiry = %v, want %v", got, ringEnd)
	}
	if evs := tr.Expire(ringEnd.Add(-time.Millisecond)); len(evs) != 0 {
		t.Fatalf("Expire before the deadline gave %v", evs)
	}
	evs = tr.Expire(ringEnd)
	if len(evs) != 2 || evs[0].Type != event.CallMissed || evs[1].Type != event.CallEnded ||
		!evs[1].OccurredAt.Equal(ringEnd) || evs[1].Disposition != event.DispositionNoAnswer {
		t.Fatalf("Expire at the deadline gave %+v", evs)
	}
	if got := tr.NextExpiry(); !got.Equal(ringEnd.Add(DefaultGrace)) {
		t.Fatalf("NextExpiry after the end = %v, want the end + grace", got)
	}
	// A late copy of the INVITE within the grace is absorbed.
	if evs := tr.Observe(inboundInvite("ring@x", ringEnd.Add(time.Second))); len(evs) != 0 {
		t.Fatalf("a late copy gave %v", evs)
	}
	if evs := tr.Expire(ringEnd.Add(DefaultGrace)); len(evs) != 0 {
		t.Fatalf("forgetting gave %v", evs)
	}
	if s := tr.Stats(); s.Calls != 0 || s.Forgotten != 1 || s.Inferred != 1 {
		t.Fatalf("stats %+v", s)
	}
	if !tr.NextExpiry().IsZero() {
		t.Fatal("NextExpiry is not zero once everything is forgotten")
	}
	// The same INVITE comes back after its call was forgotten (a capture replayed): the same
	// call, with the same providerCallId and event ids, so the core stores nothing new.
	evs = tr.Observe(inboundInvite("ring@x", ringEnd.Add(time.Hour)))
	if len(evs) != 1 || evs[0].ProviderCallID != "ring@x" || evs[0].Sequence != 1 {
		t.Fatalf("replayed INVITE gave %+v", evs)
	}
	tr.Expire(ringEnd.Add(2 * time.Hour))
	tr.Expire(ringEnd.Add(3 * time.Hour))
	// Another caller's INVITE on the Call-ID (a new From tag): a new call, with a suffix.
	other := inboundInvite("ring@x", ringEnd.Add(4*time.Hour))
	other.Data = []byte(strings.Replace(string(other.Data), "tag=f1", "tag=f2", 1))
	evs = tr.Observe(other)
	if len(evs) != 1 || evs[0].ProviderCallID != "ring@x#2" {
		t.Fatalf("reused Call-ID gave %+v", evs)
	}
}

func TestUndirectedDialogIsSkipped(t *testing.T) {
	cfg := testConfig(t)
	cfg.Trunk = nil
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := inboundInvite("elsewhere@x", flowBase)
	m.Data = bytes.ReplaceAll(m.Data, []byte("+15551230100"), []byte("+12025550199"))
	m.Src, m.Dst = netip.MustParseAddrPort("192.0.2.1:5060"), netip.MustParseAddrPort("192.0.2.2:5060")
	if evs := tr.Observe(m); evs != nil {
		t.Fatalf("an undirected dialog gave %v", evs)
	}
	if s := tr.Stats(); s.Undirected != 1 || s.Calls != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Between two other hosts, the parties tell: outside to the clinic's number is inbound.
	m = inboundInvite("hop-before@x", flowBase)
	m.Src, m.Dst = netip.MustParseAddrPort("192.0.2.1:5060"), netip.MustParseAddrPort("192.0.2.2:5060")
	evs := tr.Observe(m)
	if len(evs) != 1 || evs[0].Call.Direction != event.Inbound || evs[0].Call.Trunk != "192.0.2.1:5060" {
		t.Fatalf("a capture before the PBX gave %+v", evs)
	}
}

func TestObserveLeavesParsedMessageAlone(t *testing.T) {
	tr := newTestTracker(t)
	msgs := loadFlow(t, "testdata/flows/inbound_answered_caller_bye.sip")
	for _, m := range msgs {
		p, err := newParser().ParseSIP(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		before := p.String()
		m.SIP, m.Data = p, nil
		tr.Observe(m)
		if after := p.String(); after != before {
			t.Fatalf("Observe changed the message:\n%s\n---\n%s", before, after)
		}
	}
}

func TestRawIsBounded(t *testing.T) {
	tr := newTestTracker(t)
	m := inboundInvite("big@x", flowBase)
	body := "v=0\r\n" + strings.Repeat("a=x-filler:0123456789abcdef\r\n", 1000)
	m.Data = bytes.Replace(m.Data, []byte("Content-Length: 0\r\n\r\n"),
		[]byte("Content-Type: application/sdp\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body), 1)
	evs := tr.Observe(m)
	if len(evs) != 1 {
		t.Fatalf("got %v", evs)
	}
	var raw struct {
		SIP       string `json:"sip"`
		Truncated bool   `json:"truncated"`
		SIPBytes  int    `json:"sipBytes"`
		Src       string `json:"src"`
	}
	if err := json.Unmarshal(evs[0].Raw, &raw); err != nil {
		t.Fatal(err)
	}
	if !raw.Truncated || len(raw.SIP) > maxRawSIP || raw.SIPBytes != len(m.Data) || raw.Src != testTrunk.String() {
		t.Errorf("raw: truncated %v, %d bytes of %d, src %q", raw.Truncated, len(raw.SIP), raw.SIPBytes, raw.Src)
	}
}

func TestMalformedIsCounted(t *testing.T) {
	tr := newTestTracker(t)
	good := inboundInvite("ok@x", flowBase)
	for name, m := range map[string]Message{
		"empty":       {At: flowBase},
		"no time":     {Data: good.Data},
		"not SIP":     {Data: []byte("hello"), At: flowBase},
		"nil request": {SIP: (*sip.Request)(nil), At: flowBase},
		"no Call-ID":  {Data: bytes.Replace(good.Data, []byte("Call-ID: ok@x\r\n"), nil, 1), At: flowBase},
		"bad CSeq":    {Data: bytes.Replace(good.Data, []byte("CSeq: 1 INVITE"), []byte("CSeq: x INVITE"), 1), At: flowBase},
		"CSeq method": {Data: bytes.Replace(good.Data, []byte("CSeq: 1 INVITE"), []byte("CSeq: 1 BYE"), 1), At: flowBase},
	} {
		before := tr.Stats().Malformed
		if evs := tr.Observe(m); evs != nil {
			t.Errorf("%s: events %v", name, evs)
		}
		if tr.Stats().Malformed != before+1 {
			t.Errorf("%s: not counted as malformed", name)
		}
	}
	if tr.Stats().Calls != 0 {
		t.Error("malformed input is held")
	}
}

// trackerHolding is a tracker that holds at most maxCalls calls.
func trackerHolding(t *testing.T, maxCalls int) *Tracker {
	t.Helper()
	cfg := testConfig(t)
	cfg.MaxCalls = maxCalls
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// endBusy places an inbound call on each Call-ID, a second apart from flowBase, and ends it busy.
func endBusy(t *testing.T, tr *Tracker, ids ...string) {
	t.Helper()
	for i, id := range ids {
		at := flowBase.Add(time.Duration(i) * time.Second)
		tr.Observe(inboundInvite(id, at))
		if evs := tr.Observe(busyHere(id, at)); len(evs) != 2 {
			t.Fatalf("busy gave %v", evs)
		}
	}
}

func TestMaxCallsForgetsEndedCallsFirst(t *testing.T) {
	tr := trackerHolding(t, 2)
	endBusy(t, tr, "a@x", "b@x")
	// Both calls ended, Expire not called: a new call takes the place of the first.
	if evs := tr.Observe(inboundInvite("c@x", flowBase.Add(2*time.Second))); len(evs) != 1 {
		t.Fatalf("new call gave %v", evs)
	}
	if s := tr.Stats(); s.Calls != 2 || s.Dropped != 0 || s.Forgotten != 1 || tr.holds("a@x") {
		t.Fatalf("stats %+v, a@x held: %v", s, tr.holds("a@x"))
	}
}

// TestMaxCallsKeepsLiveCallsOverEndedOnes: a full tracker forgets an ended call before it
// evicts a live one, even one whose INVITE has had no response yet. At a proxy's rates the
// tracker is full of ended calls, and a new call arrives between every INVITE and its 100.
func TestMaxCallsKeepsLiveCallsOverEndedOnes(t *testing.T) {
	tr := trackerHolding(t, 3)
	endBusy(t, tr, "a@x", "b@x")
	at := flowBase.Add(2 * time.Second)
	for _, id := range []string{"fresh@x", "next@x"} {
		if evs := tr.Observe(inboundInvite(id, at)); len(evs) != 1 {
			t.Fatalf("%s: INVITE gave %v", id, evs)
		}
	}
	if s := tr.Stats(); s.Evicted != 0 || s.Dropped != 0 || s.Forgotten != 1 || !tr.holds("fresh@x") || !tr.holds("next@x") {
		t.Fatalf("stats %+v; fresh@x held %v, next@x held %v: want an ended call forgotten, none evicted",
			s, tr.holds("fresh@x"), tr.holds("next@x"))
	}
	// The call whose INVITE had no response yet goes on as if nothing happened.
	if evs := tr.Observe(ringing("fresh@x", at)); len(evs) != 0 {
		t.Fatalf("180 gave %v", evs)
	}
	busy := busyHere("fresh@x", at.Add(time.Second))
	if evs := tr.Observe(busy); len(evs) != 2 || evs[1].Type != event.CallEnded {
		t.Fatalf("486 gave %v", evs)
	}
}

// TestMaxCallsForgetsEndedCallsInOrder: under a sustained rate of calls that end faster than
// Grace forgets them, a full tracker makes room by forgetting the call that ended first, one per
// new call, and its queues stay bounded whether or not Expire runs meanwhile.
func TestMaxCallsForgetsEndedCallsInOrder(t *testing.T) {
	for _, expire := range []bool{false, true} {
		t.Run(map[bool]string{false: "no Expire", true: "Expire every 10 calls"}[expire], func(t *testing.T) {
			cfg := testConfig(t)
			cfg.MaxCalls = 100
			cfg.Grace = 30 * time.Second
			tr, err := NewTracker(cfg)
			if err != nil {
				t.Fatal(err)
			}
			const calls = 10_000
			for i := range calls {
				id := "busy-" + itoa(i)
				at := flowBase.Add(time.Duration(i) * 100 * time.Millisecond)
				tr.Observe(inboundInvite(id, at))
				busy := busyHere(id, at)
				if evs := tr.Observe(busy); len(evs) != 2 {
					t.Fatalf("call %d: busy gave %v", i, evs)
				}
				if expire && i%10 == 0 {
					tr.Expire(at)
				}
				if n := tr.Stats().Calls; n > cfg.MaxCalls {
					t.Fatalf("after %d calls %d held, more than %d", i+1, n, cfg.MaxCalls)
				}
				if n := len(tr.ended.items) - tr.ended.head; n > 2*cfg.MaxCalls+1024 {
					t.Fatalf("after %d calls the ended queue holds %d", i+1, n)
				}
				if n := len(tr.burials); n > 2*cfg.MaxCalls+1024 {
					t.Fatalf("after %d calls the burials heap holds %d", i+1, n)
				}
			}
			s := tr.Stats()
			if s.Dropped != 0 || s.Forgotten != uint64(calls-s.Calls) {
				t.Errorf("stats %+v: want none dropped, every call not held forgotten", s)
			}
			// The newest calls are the ones held.
			if !tr.holds("busy-"+itoa(calls-1)) || tr.holds("busy-"+itoa(calls-cfg.MaxCalls-1)) {
				t.Error("room was not made by forgetting the calls that ended first")
			}
		})
	}
}

// TestNextExpiryIsTheEarliestDeadline checks the deadline queue against a scan of every call,
// after every message of every flow and through the expiry that follows.
func TestNextExpiryIsTheEarliestDeadline(t *testing.T) {
	scan := func(tr *Tracker) time.Time {
		var next time.Time
		for _, c := range tr.calls {
			if d := c.deadline(tr); next.IsZero() || d.Before(next) {
				next = d
			}
		}
		for _, e := range tr.buried {
			if d := time.Unix(0, e.forgetAt); next.IsZero() || d.Before(next) {
				next = d
			}
		}
		return next
	}
	for _, path := range flowFiles(t) {
		tr := newTestTracker(t)
		for i, m := range loadFlow(t, path) {
			tr.Observe(m)
			if got, want := tr.NextExpiry(), scan(tr); !got.Equal(want) {
				t.Fatalf("%s, message %d: NextExpiry %v, want %v", path, i, got, want)
			}
		}
		for range 10 {
			next := tr.NextExpiry()
			if next.IsZero() {
				break
			}
			tr.Expire(next)
			if got, want := tr.NextExpiry(), scan(tr); !got.Equal(want) {
				t.Fatalf("%s, after Expire(%v): NextExpiry %v, want %v", path, next, got, want)
			}
		}
		if s := tr.Stats(); s.Calls != 0 {
			t.Errorf("%s: %d calls left after stepping through NextExpiry", path, s.Calls)
		}
	}
}

// TestInnerLegsWithoutTrunk checks that without a trunk configured, a B2BUA PBX's inner legs
// (to a phone for an inbound call, from a phone for an outbound one) are not calls of their own.
func TestInnerLegsWithoutTrunk(t *testing.T) {
	cfg := testConfig(t)
	cfg.Trunk = nil
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if evs := runFlow(tr, loadFlow(t, "testdata/flows/pbx_phone_leg_ignored.sip"), 1); len(evs) != 0 {
		t.Errorf("the PBX's leg to a phone gave %d events", len(evs))
	}
	// A phone's leg to the PBX for a call to the outside.
	m := inboundInvite("phone-out@x", flowBase)
	m.Data = bytes.ReplaceAll(m.Data, []byte("+12125550123"), []byte("101"))
	m.Data = bytes.ReplaceAll(m.Data, []byte("+15551230100"), []byte("912125550123"))
	m.Src = netip.MustParseAddrPort("10.0.0.31:5060")
	if evs := tr.Observe(m); len(evs) != 0 {
		t.Errorf("the phone's leg to the PBX gave %v", evs)
	}
	// The trunk leg of an inbound call is still a call.
	evs := runFlow(tr, loadFlow(t, "testdata/flows/inbound_answered_caller_bye.sip"), 1)
	if len(evs) != 3 || evs[0].Type != event.CallReceived {
		t.Errorf("the trunk leg gave %d events", len(evs))
	}
}

// TestCallIDTakenFromAnAnsweredCall checks that a new caller's INVITE on the Call-ID of a call
// still answered (its BYE lost) ends that call and starts a new one.
func TestCallIDTakenFromAnAnsweredCall(t *testing.T) {
	tr := newTestTracker(t)
	msgs := loadFlow(t, "testdata/flows/inbound_no_bye_call_timeout.sip")
	var evs []event.Event
	for _, m := range msgs {
		evs = append(evs, tr.Observe(m)...)
	}
	if len(evs) != 2 {
		t.Fatalf("answered call gave %d events", len(evs))
	}
	again := msgs[0]
	again.At = flowBase.Add(time.Hour)
	again.Data = bytes.ReplaceAll(again.Data, []byte("tag=c1"), []byte("tag=c9"))
	evs = tr.Observe(again)
	if len(evs) != 2 || evs[0].Type != event.CallEnded || evs[0].ProviderCallID != "in-no-bye@203.0.113.5" ||
		!evs[0].OccurredAt.Equal(again.At) || evs[1].Type != event.CallReceived || evs[1].ProviderCallID != "in-no-bye@203.0.113.5#2" {
		t.Fatalf("got %+v", evs)
	}
	for i := range evs {
		if err := evs[i].Validate(); err != nil {
			t.Error(err)
		}
	}
}

// BenchmarkFullTracker is a new call that ends at once, on a tracker already holding MaxCalls
// ended calls that Expire has not forgotten: the cost of making room, per call.
func BenchmarkFullTracker(b *testing.B) {
	cfg := testConfig(b)
	cfg.MaxCalls = 50_000
	tr, err := NewTracker(cfg)
	if err != nil {
		b.Fatal(err)
	}
	call := func(i int) {
		id := "busy-" + itoa(i)
		at := flowBase.Add(time.Duration(i) * time.Millisecond)
		tr.Observe(inboundInvite(id, at))
		busy := busyHere(id, at)
		tr.Observe(busy)
	}
	for i := range cfg.MaxCalls {
		call(i)
	}
	b.ResetTimer()
	for i := range b.N {
		call(cfg.MaxCalls + i)
	}
}

// A tracker that never fills keeps its queue of calls waiting for a first response bounded all
// the same: every call goes through it, and only makeRoom, which runs when the tracker is full,
// used to take them out again, so a quiet clinic's tracker held on to every call it ever saw.
func TestFreshQueueBoundedBelowMaxCalls(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxCalls = 1000
	tr, err := NewTracker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20_000 {
		id := "quiet-" + itoa(i)
		at := flowBase.Add(time.Duration(i) * time.Second)
		tr.Observe(inboundInvite(id, at))
		busy := busyHere(id, at)
		tr.Observe(busy)
		tr.Expire(at)
	}
	if n := tr.Stats().Calls; n >= cfg.MaxCalls {
		t.Fatalf("%d calls held: the tracker filled, and this test is about one that does not", n)
	}
	if n := len(tr.fresh.items) - tr.fresh.head; n > 2*tr.Stats().Calls+1024 {
		t.Errorf("the queue of calls waiting for a first response holds %d entries", n)
	}
}
