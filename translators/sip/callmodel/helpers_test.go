package callmodel

import (
	"strings"
	"testing"

	"github.com/emiago/sipgo/sip"
)

// sipMessage is a parsed SIP message as the readings take it.
type sipMessage interface {
	sip.Message
	Headers() []sip.Header
}

// parseSIP parses, with newParser, a SIP message written with LF line ends (turned into CRLF) from start line
// and headers; body, when not empty, follows the blank line and sets Content-Length.
func parseSIP(t testing.TB, head, body string) sipMessage {
	t.Helper()
	head = strings.TrimSpace(head)
	lines := strings.Split(head, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	text := strings.Join(lines, "\r\n") + "\r\n"
	if body != "" {
		text += "Content-Length: " + itoa(len(body)) + "\r\n"
	}
	text += "\r\n" + body
	m, err := newParser().ParseSIP([]byte(text))
	if err != nil {
		t.Fatalf("parse test message: %v\n%s", err, text)
	}
	switch m := m.(type) {
	case *sip.Request:
		return m
	case *sip.Response:
		return m
	}
	t.Fatalf("unexpected message type %T", m)
	return nil
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// invite is a minimal INVITE head; extra headers follow the mandatory ones.
func invite(extra ...string) string {
	return "INVITE sip:+15551230100@pbx.example SIP/2.0\n" +
		"Via: SIP/2.0/UDP 198.51.100.1:5060;branch=z9hG4bK776asdhds\n" +
		"Max-Forwards: 70\n" +
		"To: <sip:+15551230100@pbx.example>\n" +
		"Call-ID: a84b4c76e66710@198.51.100.1\n" +
		"CSeq: 314159 INVITE\n" +
		strings.Join(extra, "\n")
}

// ok200 is a minimal 200 OK head to an INVITE; extra headers follow the mandatory ones.
func ok200(extra ...string) string {
	return "SIP/2.0 200 OK\n" +
		"Via: SIP/2.0/UDP 198.51.100.1:5060;branch=z9hG4bK776asdhds\n" +
		"From: <sip:+15557654321@carrier.example>;tag=1928301774\n" +
		"To: <sip:+15551230100@pbx.example>;tag=a6c85cf\n" +
		"Call-ID: a84b4c76e66710@198.51.100.1\n" +
		"CSeq: 314159 INVITE\n" +
		strings.Join(extra, "\n")
}

// holds reports whether the tracker holds a call on the Call-ID, buried or not.
func (t *Tracker) holds(callID string) bool {
	if t.calls[callID] != nil {
		return true
	}
	_, ok := t.buried[t.keyOf(callID)]
	return ok
}
