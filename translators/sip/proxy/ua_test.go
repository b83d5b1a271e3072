package proxy

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// ua is a bare SIP endpoint on a UDP socket: it sends text and reads parsed messages, so a test
// can play a trunk or a PBX message by message, down to the races sipp cannot script.
type ua struct {
	t    *testing.T
	conn *net.UDPConn
	addr netip.AddrPort
}

func newUA(t *testing.T) *ua {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &ua{t: t, conn: c, addr: c.LocalAddr().(*net.UDPAddr).AddrPort()}
}

// send writes a message, with its lines indented or not, CRLF line ends, and Content-Length.
func (u *ua) send(to netip.AddrPort, text string) {
	u.t.Helper()
	if _, err := u.conn.WriteToUDPAddrPort([]byte(wire(text)), to); err != nil {
		u.t.Fatal(err)
	}
}

// wire turns a test's message text into SIP: lines trimmed, CRLF, an empty line, Content-Length
// added when missing.
func wire(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		b.WriteString(strings.TrimSpace(l))
		b.WriteString("\r\n")
	}
	s := b.String()
	if !strings.Contains(strings.ToLower(s), "content-length:") {
		s += "Content-Length: 0\r\n"
	}
	return s + "\r\n"
}

// recv returns the next message, failing the test after two seconds.
func (u *ua) recv() sip.Message {
	u.t.Helper()
	m, err := u.tryRecv(2 * time.Second)
	if err != nil {
		u.t.Fatalf("ua %v: %v", u.addr, err)
	}
	return m
}

func (u *ua) tryRecv(d time.Duration) (sip.Message, error) {
	buf := make([]byte, maxDatagram)
	_ = u.conn.SetReadDeadline(time.Now().Add(d))
	n, _, err := u.conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		return nil, err
	}
	return sip.ParseMessage(buf[:n])
}

// expectResponse reads until a response with code arrives, skipping provisional ones it was not
// asked for.
func (u *ua) expectResponse(code int, method sip.RequestMethod) *sip.Response {
	u.t.Helper()
	for {
		m := u.recv()
		r, ok := m.(*sip.Response)
		if ok && r.StatusCode == code && r.CSeq().MethodName == method {
			return r
		}
		if ok && r.StatusCode < 200 && r.StatusCode < code {
			continue
		}
		u.t.Fatalf("ua %v: want %d %s, got %s", u.addr, code, method, startLine(m))
	}
}

// expectRequest reads until a request with method arrives.
func (u *ua) expectRequest(method sip.RequestMethod) *sip.Request {
	u.t.Helper()
	m := u.recv()
	r, ok := m.(*sip.Request)
	if !ok || r.Method != method {
		u.t.Fatalf("ua %v: want %s, got %s", u.addr, method, startLine(m))
	}
	return r
}

// silent checks nothing arrives for d.
func (u *ua) silent(d time.Duration) {
	u.t.Helper()
	m, err := u.tryRecv(d)
	if err == nil {
		u.t.Fatalf("ua %v: want nothing, got %s", u.addr, startLine(m))
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		u.t.Fatal(err)
	}
}

// respond answers req with a response copying Via, From, To (plus toTag), Call-ID, CSeq and
// Record-Route, the way a UAS does.
func (u *ua) respond(to netip.AddrPort, req *sip.Request, code int, reason, toTag string) {
	u.t.Helper()
	var b strings.Builder
	b.WriteString("SIP/2.0 " + itoa(code) + " " + reason + "\n")
	for _, h := range req.GetHeaders("Via") {
		b.WriteString("Via: " + h.Value() + "\n")
	}
	if code > 100 {
		for _, h := range req.GetHeaders("Record-Route") {
			b.WriteString("Record-Route: " + h.Value() + "\n")
		}
	}
	b.WriteString("From: " + req.From().Value() + "\n")
	toV := req.To().Value()
	if toTag != "" && !req.To().Params.Has("tag") {
		toV += ";tag=" + toTag
	}
	b.WriteString("To: " + toV + "\n")
	b.WriteString("Call-ID: " + req.CallID().Value() + "\n")
	b.WriteString("CSeq: " + req.CSeq().Value() + "\n")
	b.WriteString("Contact: <sip:201@" + u.addr.String() + ">\n")
	u.send(to, b.String())
}

func itoa(n int) string { return strconv.Itoa(n) }

// invite is an initial INVITE from u to the proxy at px.
func invite(u *ua, px netip.AddrPort, callID, branch string, maxForwards string) string {
	return `INVITE sip:+15551230100@` + px.String() + ` SIP/2.0
Via: SIP/2.0/UDP ` + u.addr.String() + `;branch=z9hG4bK` + branch + `;rport
From: "Alice" <sip:+15557654321@` + u.addr.String() + `>;tag=a1
To: <sip:+15551230100@` + px.String() + `>
Call-ID: ` + callID + `
CSeq: 1 INVITE
Contact: <sip:+15557654321@` + u.addr.String() + `>
Max-Forwards: ` + maxForwards
}

// cancelFor is the CANCEL for invite's request.
func cancelFor(u *ua, px netip.AddrPort, callID, branch string) string {
	return `CANCEL sip:+15551230100@` + px.String() + ` SIP/2.0
Via: SIP/2.0/UDP ` + u.addr.String() + `;branch=z9hG4bK` + branch + `;rport
From: "Alice" <sip:+15557654321@` + u.addr.String() + `>;tag=a1
To: <sip:+15551230100@` + px.String() + `>
Call-ID: ` + callID + `
CSeq: 1 CANCEL
Max-Forwards: 70`
}
