package proxy

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/translators/sip/callmodel"
)

func TestMaxForwardsZeroIs483(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String())})
	trunk.send(r.udp, invite(trunk, r.udp, "mf0", "mf0", "0"))
	res := trunk.expectResponse(483, sip.INVITE)
	if res.Via() == nil || !strings.Contains(res.Via().Value(), "z9hG4bKmf0") {
		t.Errorf("483 Via: %v", res.Via())
	}
	pbx.silent(200 * time.Millisecond)
	if st := r.p.Stats(); st.TooManyHops != 1 || st.Forwarded != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestMaxForwardsDecremented(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String())})
	trunk.send(r.udp, invite(trunk, r.udp, "mf", "mf", "1"))
	req := pbx.expectRequest(sip.INVITE)
	if mf := req.MaxForwards(); mf == nil || mf.Val() != 0 {
		t.Errorf("Max-Forwards %v, want 0", mf)
	}
	vias := req.GetHeaders("Via")
	if len(vias) != 2 || !strings.Contains(vias[1].Value(), "received=127.0.0.1") && !strings.Contains(vias[1].Value(), "rport=") {
		t.Errorf("Via: %v", vias)
	}
	if rr := req.RecordRoute(); rr == nil || rr.Address.Port != int(r.udp.Port()) || !rr.Address.UriParams.Has("lr") {
		t.Errorf("Record-Route %v", rr)
	}
	trunk.expectResponse(100, sip.INVITE) // the proxy's own, hop by hop
}

// A PBX that sends the proxy's INVITE back to it (a loop through a misconfigured PBX) gets 482.
func TestLoopIs482(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String())})
	trunk.send(r.udp, invite(trunk, r.udp, "loop", "loop", "70"))
	req := pbx.expectRequest(sip.INVITE)
	// The PBX relays it back, unchanged but for its own Via.
	params := sip.NewParams()
	params.Add("branch", "z9hG4bKpbx1")
	req.PrependHeader(&sip.ViaHeader{ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: "UDP",
		Host: "127.0.0.1", Port: int(pbx.addr.Port()), Params: params})
	pbx.send(r.udp, req.String())
	res := pbx.expectResponse(482, sip.INVITE)
	if b, _ := res.Via().Params.Get("branch"); b != "z9hG4bKpbx1" {
		t.Errorf("482 to branch %q", b)
	}
	trunk.expectResponse(100, sip.INVITE)
	trunk.silent(200 * time.Millisecond) // the looped INVITE went nowhere
	if st := r.p.Stats(); st.Loops != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A 200 that races the CANCEL is relayed to the caller, and the ACK for it reaches the callee.
func TestCancelRacing2xxIsRelayed(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	rec := &recorder{}
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String()), Observe: rec.observe})
	trunk.send(r.udp, invite(trunk, r.udp, "race", "race", "70"))
	inv := pbx.expectRequest(sip.INVITE)
	trunk.expectResponse(100, sip.INVITE)
	pbx.respond(r.udp, inv, 180, "Ringing", "b1")
	trunk.expectResponse(180, sip.INVITE)

	trunk.send(r.udp, cancelFor(trunk, r.udp, "race", "race"))
	trunk.expectResponse(200, sip.CANCEL) // the proxy's own answer
	cancel := pbx.expectRequest(sip.CANCEL)
	ib, _ := inv.Via().Params.Get("branch")
	cb, _ := cancel.Via().Params.Get("branch")
	if ib != cb {
		t.Errorf("CANCEL branch %q, INVITE branch %q: the PBX cannot match them", cb, ib)
	}
	// The PBX had already answered: 200 to the INVITE, then 200 to the CANCEL.
	pbx.respond(r.udp, inv, 200, "OK", "b1")
	pbx.respond(r.udp, cancel, 200, "OK", "b1")
	ok := trunk.expectResponse(200, sip.INVITE)
	trunk.silent(200 * time.Millisecond) // the PBX's 200 to the CANCEL ends at the proxy

	rr := ok.GetHeaders("Record-Route")
	if len(rr) != 1 {
		t.Fatalf("Record-Route in 200: %v", rr)
	}
	trunk.send(r.udp, `ACK sip:201@`+pbx.addr.String()+` SIP/2.0
		Via: SIP/2.0/UDP `+trunk.addr.String()+`;branch=z9hG4bKraceack
		Route: `+rr[0].Value()+`
		From: "Alice" <sip:+15557654321@`+trunk.addr.String()+`>;tag=a1
		To: `+ok.To().Value()+`
		Call-ID: race
		CSeq: 1 ACK
		Max-Forwards: 70`)
	ack := pbx.expectRequest(sip.ACK)
	if ack.Route() != nil {
		t.Errorf("the proxy left its own Route in the ACK: %v", ack.Route())
	}
	if !testwait.Poll(2*time.Second, func() bool { return countObserved(rec, "ACK") == 1 }) {
		t.Errorf("ACK not observed")
	}
}

// Two 200s from forked branches (different To tags) both reach the caller.
func TestForked2xxBothRelayed(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String())})
	trunk.send(r.udp, invite(trunk, r.udp, "fork", "fork", "70"))
	inv := pbx.expectRequest(sip.INVITE)
	pbx.respond(r.udp, inv, 200, "OK", "fork-a")
	pbx.respond(r.udp, inv, 200, "OK", "fork-b")
	tags := map[string]bool{}
	for range 2 {
		res := trunk.expectResponse(200, sip.INVITE)
		tag, _ := res.To().Params.Get("tag")
		tags[tag] = true
	}
	if !tags["fork-a"] || !tags["fork-b"] {
		t.Errorf("200s relayed for tags %v", tags)
	}
}

// The ACK for a non-2xx final response goes hop by hop under the INVITE's branch.
func TestAckForNon2xxHopByHop(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String())})
	trunk.send(r.udp, invite(trunk, r.udp, "busy", "busy", "70"))
	inv := pbx.expectRequest(sip.INVITE)
	pbx.respond(r.udp, inv, 486, "Busy Here", "bz")
	res := trunk.expectResponse(486, sip.INVITE)
	trunk.send(r.udp, `ACK sip:+15551230100@`+r.udp.String()+` SIP/2.0
		Via: SIP/2.0/UDP `+trunk.addr.String()+`;branch=z9hG4bKbusy;rport
		From: "Alice" <sip:+15557654321@`+trunk.addr.String()+`>;tag=a1
		To: `+res.To().Value()+`
		Call-ID: busy
		CSeq: 1 ACK
		Max-Forwards: 70`)
	ack := pbx.expectRequest(sip.ACK)
	ib, _ := inv.Via().Params.Get("branch")
	ab, _ := ack.Via().Params.Get("branch")
	if ib != ab {
		t.Errorf("ACK branch %q, INVITE branch %q", ab, ib)
	}
}

// A request the PBX never answers is retransmitted over UDP, and the caller then gets 408.
func TestRetransmitsUntilAnswered(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String())})
	trunk.send(r.udp, invite(trunk, r.udp, "rtx", "rtx", "70"))
	first := pbx.expectRequest(sip.INVITE)
	again := pbx.expectRequest(sip.INVITE) // T1 later
	if first.Via().Value() != again.Via().Value() {
		t.Errorf("retransmission differs: %v vs %v", first.Via(), again.Via())
	}
	// The caller's own retransmission is absorbed: answered 100 again, not forwarded.
	trunk.expectResponse(100, sip.INVITE)
	trunk.send(r.udp, invite(trunk, r.udp, "rtx", "rtx", "70"))
	trunk.expectResponse(100, sip.INVITE)
	pbx.respond(r.udp, first, 180, "Ringing", "x")
	trunk.expectResponse(180, sip.INVITE)
	pbx.silent(1200 * time.Millisecond) // no more retransmissions after a response
	if st := r.p.Stats(); st.Absorbed < 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestUnparseableDroppedAndCounted(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String())})
	trunk.send(r.udp, "this is not SIP at all")
	trunk.send(r.udp, "INVITE sip:x@y SIP/2.0\nVia: nonsense\nCall-ID: c") // missing From/To/CSeq
	c, err := net.DialTimeout("tcp", r.tcp.String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("GARBAGE GARBAGE\r\n\r\n"))
	if !testwait.Poll(2*time.Second, func() bool { return r.p.Stats().Malformed >= 3 }) {
		t.Errorf("stats %+v, want 3 malformed", r.p.Stats())
	}
	pbx.silent(100 * time.Millisecond)
	// Still routing.
	trunk.send(r.udp, invite(trunk, r.udp, "after", "after", "70"))
	pbx.expectRequest(sip.INVITE)
}

// Each Observe call carries where the message came from, where it went, the transport, the
// receive time, the message as forwarded and its text as received; a 503 the proxy relays as 500
// is observed as the 503 it was.
func TestObserveFields(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	rec := &recorder{}
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String()), Observe: rec.observe})
	before := time.Now()
	trunk.send(r.udp, invite(trunk, r.udp, "obs", "obs", "70"))
	inv := pbx.expectRequest(sip.INVITE)
	pbx.respond(r.udp, inv, 180, "Ringing", "o1")
	trunk.expectResponse(180, sip.INVITE)
	pbx.respond(r.udp, inv, 503, "Service Unavailable", "o1")
	trunk.expectResponse(500, sip.INVITE)
	after := time.Now()
	var msgs []callmodel.Message
	testwait.Poll(2*time.Second, func() bool { msgs = rec.all(); return len(msgs) == 3 })
	if len(msgs) != 3 {
		t.Fatalf("observed %d messages, want 3", len(msgs))
	}
	want := []struct {
		line     string
		src, dst string
	}{
		{"INVITE sip:+15551230100@" + r.udp.String() + " SIP/2.0", trunk.addr.String(), pbx.addr.String()},
		{"SIP/2.0 180 Ringing", pbx.addr.String(), trunk.addr.String()},
		{"SIP/2.0 503 Service Unavailable", pbx.addr.String(), trunk.addr.String()},
	}
	p := sip.NewParser()
	for i, w := range want {
		m := msgs[i]
		if startLine(m.SIP) != w.line || m.Src.String() != w.src || m.Dst.String() != w.dst || m.Transport != "udp" {
			t.Errorf("msg %d: %q %v -> %v %s; want %q %s -> %s udp", i, startLine(m.SIP), m.Src, m.Dst, m.Transport, w.line, w.src, w.dst)
		}
		if m.At.Before(before) || m.At.After(after) {
			t.Errorf("msg %d: At %v not within the exchange", i, m.At)
		}
		if len(m.Data) == 0 {
			t.Errorf("msg %d: no Data", i)
		}
	}
	// SIP as forwarded: the proxy's Via on top, its Record-Route, Max-Forwards decremented;
	// Data as received: one Via, no Record-Route, Max-Forwards untouched.
	in := msgs[0].SIP.(*sip.Request)
	if n := len(in.GetHeaders("Via")); n != 2 || in.RecordRoute() == nil || in.MaxForwards().Val() != 69 {
		t.Errorf("observed INVITE is not as forwarded: %s", in.String())
	}
	if got, err := p.ParseSIP(msgs[0].Data); err != nil {
		t.Errorf("observed INVITE's text does not parse: %v", err)
	} else if req := got.(*sip.Request); len(req.GetHeaders("Via")) != 1 || req.RecordRoute() != nil || req.MaxForwards().Val() != 70 {
		t.Errorf("observed INVITE's text is not as received: %s", msgs[0].Data)
	}
	if res := msgs[1].SIP.(*sip.Response); len(res.GetHeaders("Via")) != 1 {
		t.Errorf("observed 180 is not as forwarded: %s", res.String())
	}
	if got, err := p.ParseSIP(msgs[1].Data); err != nil || len(got.GetHeaders("Via")) != 2 {
		t.Errorf("observed 180's text is not as received (%v): %s", err, msgs[1].Data)
	}
}

// Over TCP, whose stream parser yields no text, the observer still gets the message's text as
// received.
func TestObserveTCPDataAsReceived(t *testing.T) {
	trunk := newUA(t)
	pbx, err := net.Listen("tcp", "127.0.0.1:0") // the proxy forwards on TCP what came on TCP
	if err != nil {
		t.Fatal(err)
	}
	defer pbx.Close()
	got := make(chan string, 1)
	go func() {
		c, err := pbx.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 4096)
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _ := c.Read(b)
		got <- string(b[:n])
	}()
	rec := &recorder{}
	r := start(t, Config{PBX: mustHP(pbx.Addr().String()), Trunk: mustHP(trunk.addr.String()), Observe: rec.observe})
	c, err := net.DialTimeout("tcp", r.tcp.String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	text := strings.ReplaceAll(strings.Replace(invite(trunk, r.udp, "tcp-obs", "tcpobs", "70"), "SIP/2.0/UDP", "SIP/2.0/TCP", 1), "\n", "\r\n") +
		"\r\nContent-Length: 0\r\n\r\n"
	if _, err := c.Write([]byte(text)); err != nil {
		t.Fatal(err)
	}
	if fwd := <-got; !strings.HasPrefix(fwd, "INVITE ") {
		t.Fatalf("the PBX got %q, want the INVITE", fwd)
	}
	var msgs []callmodel.Message
	if !testwait.Poll(2*time.Second, func() bool { msgs = rec.all(); return len(msgs) == 1 }) {
		t.Fatalf("observed %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.Transport != "tcp" {
		t.Errorf("transport %q, want tcp", m.Transport)
	}
	msg, err := sip.NewParser().ParseSIP(m.Data)
	if err != nil {
		t.Fatalf("observed text does not parse: %v\n%s", err, m.Data)
	}
	if req := msg.(*sip.Request); len(req.GetHeaders("Via")) != 1 || req.RecordRoute() != nil || req.MaxForwards().Val() != 70 {
		t.Errorf("observed text is not the INVITE as received:\n%s", m.Data)
	}
}

func countObserved(rec *recorder, method string) int {
	n := 0
	for _, m := range rec.all() {
		if r, ok := m.SIP.(*sip.Request); ok && string(r.Method) == method {
			n++
		}
	}
	return n
}

// Beyond MaxTransactions, requests still reach the PBX, without state, and are counted.
func TestMaxTransactionsForwardsWithoutState(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String()), MaxTransactions: 1})
	trunk.send(r.udp, invite(trunk, r.udp, "m1", "m1", "70"))
	pbx.expectRequest(sip.INVITE)
	trunk.send(r.udp, invite(trunk, r.udp, "m2", "m2", "70"))
	second := pbx.expectRequest(sip.INVITE)
	if second.CallID().Value() != "m2" {
		t.Fatalf("got %s", second.CallID().Value())
	}
	pbx.respond(r.udp, second, 486, "Busy Here", "m2")
	trunk.expectResponse(486, sip.INVITE) // relayed by its Via
	if st := r.p.Stats(); st.Stateless != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A CANCEL that arrives before the PBX has sent any provisional response waits for one (RFC 3261
// section 9.1), and a 487 then reaches the caller.
func TestCancelWaitsForProvisional(t *testing.T) {
	trunk, pbx := newUA(t), newUA(t)
	r := start(t, Config{PBX: mustHP(pbx.addr.String()), Trunk: mustHP(trunk.addr.String())})
	trunk.send(r.udp, invite(trunk, r.udp, "early", "early", "70"))
	inv := pbx.expectRequest(sip.INVITE)
	trunk.send(r.udp, cancelFor(trunk, r.udp, "early", "early"))
	trunk.expectResponse(200, sip.CANCEL)
	// Nothing but retransmissions of the INVITE before a provisional response.
	if m, err := pbx.tryRecv(150 * time.Millisecond); err == nil {
		if req, ok := m.(*sip.Request); !ok || req.Method != sip.INVITE {
			t.Fatalf("PBX got %s before any provisional response", startLine(m))
		}
	}
	pbx.respond(r.udp, inv, 180, "Ringing", "e1")
	var cancel *sip.Request
	for cancel == nil {
		m := pbx.recv()
		switch req, _ := m.(*sip.Request); {
		case req != nil && req.Method == sip.CANCEL:
			cancel = req
		case req != nil && req.Method == sip.INVITE: // a retransmission sent before the 180
		default:
			t.Fatalf("PBX got %s, want CANCEL", startLine(m))
		}
	}
	pbx.respond(r.udp, cancel, 200, "OK", "e1")
	pbx.respond(r.udp, inv, 487, "Request Terminated", "e1")
	trunk.expectResponse(180, sip.INVITE)
	trunk.expectResponse(487, sip.INVITE)
}
