package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/sip/callmodel"
)

// FuzzHandle feeds arbitrary datagrams through the proxy's parse-and-route path: it must never
// panic, whatever the bytes. Every host a message names resolves to loopback, so nothing leaves
// the machine.
func FuzzHandle(f *testing.F) {
	trunk, pbx := netip.MustParseAddrPort("127.0.0.1:9"), netip.MustParseAddrPort("127.0.0.1:7")
	r := startWith(f, Config{PBX: mustHP(pbx.String()), Trunk: mustHP(trunk.String()), Observe: func(callmodel.Message) {},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, func(p *Proxy) {
		p.resolve = func(context.Context, string) (netip.Addr, error) { return netip.MustParseAddr("127.0.0.1"), nil }
	})
	px := r.udp.String()
	for _, s := range []string{
		"INVITE sip:+15551230100@" + px + " SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK1;rport\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
		"BYE sip:201@127.0.0.1:7 SIP/2.0\r\nVia: SIP/2.0/TCP 127.0.0.1:9;branch=z9hG4bK2\r\nRoute: <sip:" + px + ";lr>\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>;tag=2\r\nCall-ID: x\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n",
		"CANCEL sip:+15551230100@" + px + " SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>\r\nCall-ID: x\r\nCSeq: 1 CANCEL\r\nContent-Length: 0\r\n\r\n",
		"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP " + px + ";branch=z9hG4bKcw00.11\r\nVia: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>;tag=2\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n",
		"ACK sip:x@y SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:9\r\nFrom: x\r\nTo: y\r\nCall-ID: z\r\nCSeq: 1 ACK\r\nMax-Forwards: 0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	p := r.p
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := p.parser.ParseSIP(data)
		if err != nil {
			return
		}
		p.handle(msg, data, peer{network: "udp", addr: trunk}, time.Now())
	})
}
