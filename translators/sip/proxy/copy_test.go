package proxy

import (
	"testing"

	"github.com/emiago/sipgo/sip"
)

// The copies the proxy changes and forwards leave the message the observer reads as it was
// received, whatever the proxy does to them.
func TestCopiesLeaveTheOriginal(t *testing.T) {
	p := sip.NewParser()
	reqText := "INVITE sip:100@10.0.0.20 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-1;rport\r\n" +
		"Via: SIP/2.0/UDP 198.51.100.7:5060;branch=z9hG4bK-0\r\n" +
		"Route: <sip:10.0.0.9;lr>\r\n" +
		"Max-Forwards: 70\r\n" +
		"From: <sip:+15551234567@203.0.113.5>;tag=a\r\n" +
		"To: <sip:100@10.0.0.20>\r\n" +
		"Call-ID: copy@x\r\n" +
		"CSeq: 1 INVITE\r\n" +
		"Content-Length: 0\r\n\r\n"
	msg, err := p.ParseSIP([]byte(reqText))
	if err != nil {
		t.Fatal(err)
	}
	req := msg.(*sip.Request)
	before, via := req.String(), req.Via()
	fwd := forwardCopy(req)
	fwd.Via().Params.Add("received", "203.0.113.50")
	fwd.Via().Params.Add("rport", "5070")
	fwd.RemoveHeader("Route")
	mf := sip.MaxForwardsHeader(69)
	fwd.ReplaceHeader(&mf)
	fwd.PrependHeader(&sip.RecordRouteHeader{Address: sip.Uri{Scheme: "sip", Host: "10.0.0.9"}})
	fwd.PrependHeader(&sip.ViaHeader{ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: "UDP", Host: "10.0.0.9", Port: 5060, Params: sip.NewParams()})
	fwd.AppendHeader(sip.NewHeader("X-Extra", "1"))
	fwd.SetDestination("10.0.0.20:5060")
	if got := req.String(); got != before || req.Via() != via || req.Destination() == "10.0.0.20:5060" {
		t.Errorf("forwarding changed the request as received:\n%s\nwas\n%s", got, before)
	}
	if fwd.String() == before {
		t.Error("the copy did not change")
	}

	resText := "SIP/2.0 503 Service Unavailable\r\n" +
		"Via: SIP/2.0/UDP 10.0.0.9:5060;branch=z9hG4bK-ours\r\n" +
		"Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-1;received=203.0.113.50;rport=5070\r\n" +
		"From: <sip:+15551234567@203.0.113.5>;tag=a\r\n" +
		"To: <sip:100@10.0.0.20>;tag=b\r\n" +
		"Call-ID: copy@x\r\n" +
		"CSeq: 1 INVITE\r\n" +
		"Content-Length: 0\r\n\r\n"
	msg, err = p.ParseSIP([]byte(resText))
	if err != nil {
		t.Fatal(err)
	}
	res := msg.(*sip.Response)
	before = res.String()
	relay := relayCopy(res)
	relay.RemoveHeader("Via")
	relay.AppendHeader(res.Via().Clone())
	relay.StatusCode = 500
	if got := res.String(); got != before || res.StatusCode != 503 {
		t.Errorf("relaying changed the response as received:\n%s\nwas\n%s", got, before)
	}
}
