// Package netaddr is the one address type of the built-in translators' configuration: where a
// peer is (a PBX, a carrier trunk, an Asterisk manager) and where an observer listens. Each
// translator parses its address keys once, in its ParseConfig, with the default port of the key;
// the proxy, the tap and the AMI client take the parsed values and never read address text
// again, so a configuration the agent's start-up check accepts is one they can use.
//
// A peer address ([HostPort]) is an IPv4 address, an IPv6 address (in brackets when a port
// follows) or a host name, with an optional port. A listen address ([Listener]) is an IP address
// of this machine with an optional port and an optional udp:// or tcp:// transport; without one
// it listens on both, the two transports every SIP element implements (RFC 3261 section 18). A
// listen host name is refused: see [ParseListen].
package netaddr

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// HostPort is a peer's address from configuration. The zero value means "none".
type HostPort struct {
	// Host is an IP address in canonical text (IPv6 without brackets; an IPv4-mapped IPv6
	// address as IPv4), or a host name in lower case, punycoded, without a trailing dot.
	Host string
	// Port is from 1 to 65535.
	Port uint16
}

// IsZero reports whether h names no address.
func (h HostPort) IsZero() bool { return h == HostPort{} }

// String returns h as host:port, IPv6 in brackets; "" for the zero value.
func (h HostPort) String() string {
	if h.IsZero() {
		return ""
	}
	return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port)))
}

// AddrPort returns h as an IP address and port, and false when h's host is a name.
func (h HostPort) AddrPort() (netip.AddrPort, bool) {
	a, err := netip.ParseAddr(h.Host)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a, h.Port), true
}

// ParseHostPort reads a peer address: "host", "host:port", "192.0.2.10", "192.0.2.10:5080",
// "[2001:db8::1]:5080", "[2001:db8::1]" or a bare "2001:db8::1", where host is an IP address or a
// host name. A missing port is defaultPort, which must not be 0. It refuses, with an error that
// quotes s, an empty text, a URI ("sip:pbx", "udp://pbx:5060"), a user part or parameters, a
// port that is not a number from 1 to 65535, a malformed IP address and a host that is not a
// valid DNS name.
func ParseHostPort(s string, defaultPort uint16) (HostPort, error) {
	if defaultPort == 0 {
		return HostPort{}, errors.New("netaddr: the default port must not be 0")
	}
	t := strings.TrimSpace(s)
	switch {
	case t == "":
		return HostPort{}, errors.New("is empty; want host or host:port")
	case strings.Contains(t, "://"):
		return HostPort{}, fmt.Errorf("%q is a URL; want host or host:port, such as 192.0.2.10:5060", s)
	case isSIPURI(t):
		return HostPort{}, fmt.Errorf("%q is a SIP URI; want host or host:port, such as 192.0.2.10:5060", s)
	case strings.ContainsAny(t, "@;/?# \t"):
		return HostPort{}, fmt.Errorf("%q is not host:port (no user, parameters or path)", s)
	}
	host, port, err := splitPort(t, defaultPort)
	if err != nil {
		return HostPort{}, fmt.Errorf("%q: %w", s, err)
	}
	if port == 0 {
		return HostPort{}, fmt.Errorf("%q: port 0 is not a port to send to", s)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return HostPort{}, fmt.Errorf("%q: an IPv6 zone is not supported", s)
		}
		return HostPort{Host: a.Unmap().String(), Port: port}, nil
	}
	name, err := hostName(host)
	if err != nil {
		return HostPort{}, fmt.Errorf("%q: %w", s, err)
	}
	return HostPort{Host: name, Port: port}, nil
}

// isSIPURI reports whether t starts as a SIP URI does ("sip:" or "sips:" and not a port).
func isSIPURI(t string) bool {
	l := strings.ToLower(t)
	rest, ok := strings.CutPrefix(l, "sip:")
	if !ok {
		rest, ok = strings.CutPrefix(l, "sips:")
	}
	return ok && strings.Trim(rest, "0123456789") != ""
}

// splitPort splits t into its host and port, the port defaultPort when t names none. A bare
// IPv6 address (more than one colon, no brackets) has no port.
func splitPort(t string, defaultPort uint16) (string, uint16, error) {
	if strings.HasPrefix(t, "[") {
		if strings.HasSuffix(t, "]") {
			h := t[1 : len(t)-1]
			return h, defaultPort, bracketed(h)
		}
		h, p, err := net.SplitHostPort(t)
		if err != nil {
			return "", 0, errors.New("is not [IPv6 address]:port")
		}
		if err := bracketed(h); err != nil {
			return "", 0, err
		}
		n, err := parsePort(p)
		return h, n, err
	}
	switch strings.Count(t, ":") {
	case 0:
		return t, defaultPort, nil
	case 1:
		h, p, _ := strings.Cut(t, ":")
		if h == "" {
			return "", 0, errors.New("has no host")
		}
		n, err := parsePort(p)
		return h, n, err
	default:
		if _, err := netip.ParseAddr(t); err != nil {
			return "", 0, errors.New("is not an IPv6 address (write an IPv6 address with a port as [address]:port)")
		}
		return t, defaultPort, nil
	}
}

// bracketed checks what stands in brackets: an IPv6 address and nothing else, as RFC 3986
// section 3.2.2 writes one (a host name or an IPv4 address is written without them).
func bracketed(h string) error {
	if a, err := netip.ParseAddr(h); err != nil || !a.Is6() {
		return fmt.Errorf("%q in brackets is not an IPv6 address", h)
	}
	return nil
}

// parsePort reads a decimal port from 0 to 65535.
func parsePort(p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || p == "" || p[0] == '+' {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return uint16(n), nil
}

// hostName checks a DNS host name with the IDNA lookup rules (RFC 5891, through
// golang.org/x/net/idna) and returns it punycoded in lower case without a trailing dot. An
// underscore is accepted besides letters, digits and hyphens, as container and service names
// carry them and the system resolver looks them up (RFC 2181 section 11 puts no limit on the
// characters of a DNS label). A name whose last label is all digits is a mistyped IPv4 address
// (RFC 3696 section 2: a top-level label is never all-numeric).
func hostName(h string) (string, error) {
	h = strings.TrimSuffix(h, ".")
	bad := fmt.Errorf("%q is neither an IP address nor a host name", h)
	underscore := strings.Contains(h, "_")
	if !utf8.ValidString(h) || (underscore && !isASCII(h)) {
		return "", bad
	}
	p := idna.New(idna.MapForLookup(), idna.BidiRule(), idna.VerifyDNSLength(true), idna.StrictDomainName(true))
	a, err := p.ToASCII(strings.ReplaceAll(h, "_", "u"))
	if err != nil || a == "" {
		return "", bad
	}
	// What the profile maps must come out as a name that maps to itself.
	if again, err := p.ToASCII(a); err != nil || again != a {
		return "", bad
	}
	if underscore {
		// An ASCII name comes back only lower-cased; put its underscores back.
		a = strings.ToLower(h)
	}
	last := a[strings.LastIndexByte(a, '.')+1:]
	if strings.Trim(last, "0123456789") == "" {
		return "", fmt.Errorf("%q is not a valid IP address", h)
	}
	return a, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// The transports a listener serves.
const (
	UDP = "udp"
	TCP = "tcp"
)

// Listener is one socket to listen on.
type Listener struct {
	// Transport is UDP or TCP.
	Transport string
	// Addr is an IP address of this machine (0.0.0.0 or :: for every interface) and a port
	// (0: any free port, for tests).
	Addr netip.AddrPort
	// Entry is the index, in the list ParseListens read, of the entry l came from (an entry
	// without a transport gives two listeners); 0 from ParseListen.
	Entry int
}

// String returns l as transport://ip:port, IPv6 in brackets.
func (l Listener) String() string { return l.Transport + "://" + l.Addr.String() }

// Valid reports whether l can be listened on as it stands: a UDP or TCP transport on an IP
// address without a zone. What ParseListen returns is valid; a Listener built by hand in code is
// checked by the observer it is given to.
func (l Listener) Valid() bool {
	return (l.Transport == UDP || l.Transport == TCP) && l.Addr.Addr().IsValid() && l.Addr.Addr().Zone() == ""
}

// ParseListen reads a listen address: "udp://ip:port", "tcp://ip:port", "udp://ip" or
// "tcp://ip" (port defaultPort), or the same without a transport ("ip:port", "ip"), which
// listens on UDP and TCP both (RFC 3261 section 18: every SIP element implements both). ip is
// an IPv4 address or an IPv6 address in brackets; 0.0.0.0 and [::] listen on every interface, and so
// does an empty host ("udp://:5060"). The transport is read without regard to case. Port 0
// takes any free port.
//
// A host name is refused, not resolved: a listener binds to an address of this machine, the
// proxy knows its own messages by the addresses it is bound to, and a name could resolve to an
// address that is not this machine's, or to another one after the next change in DNS. The name
// the proxy writes in its headers is `advertise`.
func ParseListen(s string, defaultPort uint16) ([]Listener, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return nil, errors.New("is empty; want udp://ip:port or tcp://ip:port")
	}
	transports := []string{UDP, TCP}
	if scheme, rest, ok := strings.Cut(t, "://"); ok {
		switch strings.ToLower(scheme) {
		case UDP:
			transports = []string{UDP}
		case TCP:
			transports = []string{TCP}
		default:
			return nil, fmt.Errorf("%q: transport %q is not udp or tcp", s, scheme)
		}
		t = rest
	}
	if strings.ContainsAny(t, "@;/?# \t") {
		return nil, fmt.Errorf("%q is not a listen address such as udp://0.0.0.0:5060 (no user, parameters or path)", s)
	}
	var host string
	port := defaultPort
	switch {
	case strings.HasPrefix(t, "["):
		if strings.HasSuffix(t, "]") {
			host = t[1 : len(t)-1]
			break
		}
		h, p, err := net.SplitHostPort(t)
		if err != nil {
			return nil, fmt.Errorf("%q: want [IPv6 address]:port", s)
		}
		if port, err = parsePort(p); err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		host = h
	case strings.Count(t, ":") > 1:
		return nil, fmt.Errorf("%q: write an IPv6 address in brackets, such as udp://[::]:5060", s)
	case strings.Contains(t, ":"):
		h, p, _ := strings.Cut(t, ":")
		var err error
		if port, err = parsePort(p); err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		host = h
	default:
		host = t
	}
	if strings.HasPrefix(t, "[") {
		if err := bracketed(host); err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
	}
	var ip netip.Addr
	if host == "" {
		ip = netip.IPv4Unspecified()
	} else {
		a, err := netip.ParseAddr(host)
		switch {
		case err != nil:
			if _, nerr := hostName(host); nerr == nil {
				return nil, fmt.Errorf("%q: %q is a host name; listen takes an IP address of this machine (0.0.0.0 or [::] for every interface); the name the proxy gives in its headers is advertise", s, host)
			}
			return nil, fmt.Errorf("%q: %q is not an IP address", s, host)
		case a.Zone() != "":
			return nil, fmt.Errorf("%q: an IPv6 zone is not supported", s)
		}
		ip = a.Unmap()
	}
	out := make([]Listener, 0, len(transports))
	for _, tr := range transports {
		out = append(out, Listener{Transport: tr, Addr: netip.AddrPortFrom(ip, port)})
	}
	return out, nil
}

// ParseListens reads every listen address of a configuration key with ParseListen, reporting
// each bad entry as key[i], all at once; each Listener's Entry is the i it came from. Two entries on the same transport and port (other than
// 0) are refused when they are the same address or either listens on every interface (0.0.0.0,
// [::] or an empty host): the second could not bind, as the system gives the port to the first.
func ParseListens(key string, list []string, defaultPort uint16) ([]Listener, error) {
	var out []Listener
	var errs []error
	for i, s := range list {
		ls, err := ParseListen(s, defaultPort)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", key, i, err))
			continue
		}
	next:
		for _, l := range ls {
			l.Entry = i
			for _, o := range out {
				if clash(l, o) {
					errs = append(errs, fmt.Errorf("%s[%d]: %s cannot listen beside %s of %s[%d]", key, i, l, o, key, o.Entry))
					continue next
				}
			}
			out = append(out, l)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// clash reports whether a and b would take the same socket.
func clash(a, b Listener) bool {
	if a.Transport != b.Transport || a.Addr.Port() == 0 || a.Addr.Port() != b.Addr.Port() {
		return false
	}
	return a.Addr.Addr() == b.Addr.Addr() || a.Addr.Addr().IsUnspecified() || b.Addr.Addr().IsUnspecified()
}
