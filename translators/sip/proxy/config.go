package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/callwire/callwire/translators/netaddr"
	"github.com/callwire/callwire/translators/sip/callmodel"
)

// DefaultMaxTransactions bounds the transactions the proxy holds at once (see
// Config.MaxTransactions).
const DefaultMaxTransactions = 200_000

// Config is the proxy's configuration. The zero value is not valid: Listen, PBX and Trunk are
// required.
type Config struct {
	// Listen is where the proxy listens (at least one), as netaddr.ParseListens reads a
	// configuration's listen addresses. Port 0 takes a free port (see Proxy.Addrs); 0.0.0.0 or
	// :: listens on every interface.
	Listen []netaddr.Listener
	// PBX is the clinic's PBX. A message comes from the PBX when its source IP and port are the
	// PBX's; over TCP, whose source ports are ephemeral, the PBX's IP with any port. A host name
	// is resolved once, when Run starts.
	PBX netaddr.HostPort
	// Trunk is where initial requests from the PBX go (the carrier). A host name is resolved
	// once, when Run starts.
	Trunk netaddr.HostPort
	// Observe, when not nil, is called for every message the proxy forwards, after it was
	// forwarded, with Src where it came from, Dst the next hop it was sent to, Transport, At its
	// receive time, Data its text as received, and SIP the message as forwarded: this proxy's
	// Via added or removed, its Route entries removed, Record-Route added, Max-Forwards
	// decremented, everything else, the status code included, as received. The proxy never
	// changes either afterwards.
	// Observe is called on the forwarding path, from whichever goroutine forwarded the message
	// (several at once), so it must be safe for concurrent use and must not block: the message's
	// next one waits for it. An Observe that has work to do queues the message and drops it when
	// its queue is full, as the sip translator's pipeline does. A panic in Observe is recovered,
	// logged and counted; the call goes on. Nil turns observing off.
	Observe func(callmodel.Message)
	// Advertise is the host (IP or name) the proxy writes in its Via and Record-Route headers.
	// Empty: the listener's IP, or, for a listener on 0.0.0.0 or [::], the local IP the system
	// routes to the PBX from.
	Advertise string
	// MaxTransactions bounds the proxy's memory: beyond this many open transactions a new
	// request is forwarded without state (no retransmission by the proxy, no 408, its CANCEL
	// forwarded without state) and counted in Stats.Stateless. 0 means DefaultMaxTransactions.
	MaxTransactions int
	// Logger receives the proxy's log lines; nil means slog.Default(). Run logs each address it
	// listens on ("sip proxy listening") once it listens on all of them. Forwarding logs nothing at
	// info level; faults (a message that does not parse, an unroutable request, an Observe
	// panic) are logged at warn level, at most once per second each.
	Logger *slog.Logger
}

// Validate reports every problem of c at once, each naming its key: listen[i], pbx, trunk,
// advertise, max_transactions.
func (c Config) Validate() error {
	var errs []error
	if len(c.Listen) == 0 {
		errs = append(errs, errors.New("listen: at least one address is required"))
	}
	for i, l := range c.Listen {
		if !l.Valid() {
			errs = append(errs, fmt.Errorf("listen[%d]: %q is not a udp or tcp listener on an IP address", i, l))
		}
	}
	if c.PBX.IsZero() || c.PBX.Port == 0 {
		errs = append(errs, errors.New("pbx: required (host and port)"))
	}
	if c.Trunk.IsZero() || c.Trunk.Port == 0 {
		errs = append(errs, errors.New("trunk: required (host and port)"))
	}
	if c.Advertise != "" && (strings.ContainsAny(c.Advertise, " :/;<>") && !isIP(c.Advertise)) {
		errs = append(errs, fmt.Errorf("advertise: %q is not a host", c.Advertise))
	}
	if c.MaxTransactions < 0 {
		errs = append(errs, fmt.Errorf("max_transactions: %d is negative", c.MaxTransactions))
	}
	return errors.Join(errs...)
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return err == nil
}
