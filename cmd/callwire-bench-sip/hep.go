package main

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/callwire/callwire/translators/numbering"
	"github.com/callwire/callwire/translators/sip/callmodel"
	"github.com/callwire/callwire/translators/sip/hep"
)

var (
	carrier = netip.MustParseAddrPort("203.0.113.5:5060")
	pbxAddr = netip.MustParseAddrPort("10.0.0.20:5060")
)

// basicCall returns the seven messages of an answered inbound call, as (src, dst, text).
func basicCall(n int) [][3]string {
	id := fmt.Sprintf("bench-%d@203.0.113.5", n)
	from := fmt.Sprintf("\"Caller %d\" <sip:+1212555%04d@203.0.113.5>;tag=f%d", n, n%10000, n)
	to := "<sip:+15551230100@10.0.0.20>"
	sdp := "v=0\r\no=- 1 1 IN IP4 198.51.100.7\r\ns=-\r\nc=IN IP4 198.51.100.7\r\nt=0 0\r\nm=audio 20000 RTP/AVP 0\r\na=sendrecv\r\n"
	via := fmt.Sprintf("Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-%d\r\n", n)
	head := func(first, toHdr, cseq, extra, body string) string {
		ct := ""
		if body != "" {
			ct = "Content-Type: application/sdp\r\n"
		}
		return fmt.Sprintf("%s\r\n%sFrom: %s\r\nTo: %s\r\nCall-ID: %s\r\nCSeq: %s\r\n%s%sContent-Length: %d\r\n\r\n%s",
			first, via, from, toHdr, id, cseq, extra, ct, len(body), body)
	}
	toTag := to + fmt.Sprintf(";tag=t%d", n)
	c, p := carrier.String(), pbxAddr.String()
	return [][3]string{
		{c, p, head("INVITE sip:+15551230100@10.0.0.20 SIP/2.0", to, "1 INVITE", "Max-Forwards: 70\r\nContact: <sip:c@203.0.113.5>\r\n", sdp)},
		{p, c, head("SIP/2.0 100 Trying", to, "1 INVITE", "", "")},
		{p, c, head("SIP/2.0 180 Ringing", toTag, "1 INVITE", "Contact: <sip:201@10.0.0.20>\r\n", "")},
		{p, c, head("SIP/2.0 200 OK", toTag, "1 INVITE", "Contact: <sip:201@10.0.0.20>\r\n", sdp)},
		{c, p, head("ACK sip:201@10.0.0.20 SIP/2.0", toTag, "1 ACK", "Max-Forwards: 70\r\n", "")},
		{c, p, head("BYE sip:201@10.0.0.20 SIP/2.0", toTag, "2 BYE", "Max-Forwards: 70\r\n", "")},
		{p, c, head("SIP/2.0 200 OK", toTag, "2 BYE", "", "")},
	}
}

func newTracker() (*callmodel.Tracker, error) {
	plan, err := numbering.New(numbering.Config{DefaultCountry: "US", Numbers: []string{"+15551230100"}})
	if err != nil {
		return nil, err
	}
	return callmodel.NewTracker(callmodel.Config{Plan: plan, PBX: []netip.AddrPort{pbxAddr}})
}

// benchHEP encodes the messages of calls basic calls as HEPv3 datagrams, then, rounds times,
// decodes and translates them all with a fresh call model, and returns datagrams per second.
func benchHEP(calls, rounds int) ([]float64, error) {
	start := time.Unix(1795400000, 0)
	var grams [][]byte
	for n := range calls {
		for i, m := range basicCall(n) {
			at := start.Add(time.Duration(n)*time.Millisecond + time.Duration(i)*100*time.Microsecond)
			src, dst := netip.MustParseAddrPort(m[0]), netip.MustParseAddrPort(m[1])
			b, err := hep.Encode(&hep.Packet{Family: hep.FamilyIPv4, IPProtocol: hep.IPProtoUDP, Src: src.Addr(), Dst: dst.Addr(),
				SrcPort: src.Port(), DstPort: dst.Port(), Seconds: uint32(at.Unix()), Micros: uint32(at.Nanosecond() / 1000),
				ProtoType: hep.ProtoSIP, Payload: []byte(m[2])})
			if err != nil {
				return nil, err
			}
			grams = append(grams, b)
		}
	}
	var rates []float64
	for range rounds {
		tr, err := newTracker()
		if err != nil {
			return nil, err
		}
		events := 0
		t0 := time.Now()
		for _, g := range grams {
			p, err := hep.Decode(g)
			if err != nil {
				return nil, err
			}
			events += len(tr.Observe(callmodel.Message{Data: p.Payload, Transport: "udp", Src: p.SrcAddrPort(), Dst: p.DstAddrPort(), At: p.Time()}))
		}
		el := time.Since(t0)
		if events != 3*calls {
			return nil, fmt.Errorf("hep: %d events for %d calls, want %d", events, calls, 3*calls)
		}
		rates = append(rates, float64(len(grams))/el.Seconds())
	}
	return rates, nil
}

// modelMemory returns the call model's heap bytes per 1,000 calls held, measured with calls of
// them: answered calls in progress (ended false), or calls that ended and wait out their grace
// (ended true; at a proxy's rates most calls held are those).
func modelMemory(calls int, ended bool) (float64, error) {
	tr, err := newTracker()
	if err != nil {
		return 0, err
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	at := time.Unix(1795400000, 0)
	for n := range calls {
		msgs := basicCall(n)
		if !ended {
			msgs = msgs[:5] // answered and acknowledged, not ended
		}
		for _, m := range msgs {
			tr.Observe(callmodel.Message{Data: []byte(m[2]), Transport: "udp", Src: netip.MustParseAddrPort(m[0]), Dst: netip.MustParseAddrPort(m[1]), At: at})
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := tr.Stats().Calls; got != calls {
		return 0, fmt.Errorf("memory: the model holds %d calls, want %d", got, calls)
	}
	runtime.KeepAlive(tr)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(calls) * 1000, nil
}
