package callmodel

import (
	"net/netip"
	"time"

	"github.com/emiago/sipgo/sip"
)

// Message is one SIP message as an observer saw it on the wire: what the proxy received and
// where it forwarded it, or what a HEP capture agent copied. The call model reads nothing but
// Message values, so both observer modes feed it the same way.
type Message struct {
	// SIP is the message already parsed, as the proxy has it. When nil, Data is parsed.
	SIP sip.Message
	// Data is the message's text as it was seen on the wire. When nil, the text an event
	// carries in raw is rendered from SIP.
	Data []byte
	// Transport is the lower-case transport the message travelled on: "udp", "tcp", "tls",
	// "ws", "wss" or "sctp".
	Transport string
	// Src is where the message came from.
	Src netip.AddrPort
	// Dst is where the message went: for a proxy, the next hop it forwarded the message to;
	// for a capture, the destination the capture agent recorded.
	Dst netip.AddrPort
	// At is when the message was seen, on the observer's clock (the HEP timestamp of a
	// capture). The call model reads no clock of its own: every time in an event comes from At,
	// or from the time given to Expire.
	At time.Time
}
