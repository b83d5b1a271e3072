package proxy

import (
	"testing"

	"github.com/emiago/sipgo/sip"
)

// The copy of a 503 that the proxy relays as 500 leaves the response the observer reads as it
// was received.
func TestRelayCopyLeavesTheOriginal(t *testing.T) {
	p := sip.NewParser()
	resText := "SIP/2.0 503 Service Unavailable\r\n" +
		"Via: SIP/2.0/UDP 10.0.0.9:5060;branch=z9hG4bK-ours\r\n" +
		"Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-1;received=203.0.113.50;rport=5070\r\n" +
		"From: <sip:+15551234567@203.0.113.5>;tag=a\r\n" +
		"To: <sip:100@10.0.0.20>;tag=b\r\n" +
		"Call-ID: copy@x\r\n" +
		"CSeq: 1 INVITE\r\n" +
		"Content-Length: 0\r\n\r\n"
	msg, err := p.ParseSIP([]byte(resText))
	if err != nil {
		t.Fatal(err)
	}
	res := msg.(*sip.Response)
	before := res.String()
	relay := relayCopy(res)
	relay.RemoveHeader("Via")
	relay.AppendHeader(res.Via().Clone())
	relay.StatusCode = 500
	if got := res.String(); got != before || res.StatusCode != 503 {
		t.Errorf("relaying changed the response as received:\n%s\nwas\n%s", got, before)
	}
}
