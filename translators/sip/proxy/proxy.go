package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/callwire/callwire/translators/netaddr"
)

// udpSocketBuffer is the socket buffer asked for on UDP listeners (the system may cap it).
const udpSocketBuffer = 4 << 20

// Stats are the proxy's counters since New. They only grow.
type Stats struct {
	Received        uint64 // SIP messages parsed
	Forwarded       uint64 // messages sent on to a next hop (requests and responses)
	Absorbed        uint64 // retransmissions and 100 Trying answered or ended hop by hop
	Replied         uint64 // responses the proxy made itself (100, 200 to CANCEL, 408, 482, 483)
	Malformed       uint64 // messages that did not parse, or lack a header SIP requires; dropped
	Unroutable      uint64 // messages with no next hop (a response not for this proxy, an unknown host, a send error)
	TooManyHops     uint64 // requests answered 483
	Loops           uint64 // requests answered 482
	Timeouts        uint64 // transactions the next hop never answered (answered 408 upstream)
	ObserveFailures uint64 // Observe calls that panicked
	Stateless       uint64 // requests forwarded without state because MaxTransactions were open
}

type counters struct {
	received, forwarded, absorbed, replied, malformed, unroutable, tooManyHops, loops, timeouts,
	observeFailures, stateless atomic.Uint64
}

// Proxy is a record-routing SIP proxy between a trunk and a PBX. Create it with New, start it
// with Run.
type Proxy struct {
	cfg    Config
	log    *slog.Logger
	listen []netaddr.Listener
	parser *sip.Parser

	started atomic.Bool
	ready   chan struct{}
	addrs   []string

	// Set by Run before ready closes; read-only afterwards.
	pbx, trunk netip.AddrPort
	udp        []*udpListener
	tcpPort    int    // port of the first TCP listener, 0 without one
	tcpHost    string // advertised host of the first TCP listener
	ours       map[string]bool
	ourPorts   map[int]bool
	ctx        context.Context

	resolve func(context.Context, string) (netip.Addr, error) // resolveHost; tests point every host at loopback

	conns   connTable
	txs     txTable
	c       counters
	limiter logLimiter
	wg      sync.WaitGroup
}

// New checks cfg and returns a proxy ready to Run.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sip proxy config: %w", err)
	}
	p := &Proxy{cfg: cfg, log: cfg.Logger, parser: sip.NewParser(), ready: make(chan struct{}), resolve: resolveHost}
	if p.log == nil {
		p.log = slog.Default()
	}
	p.listen = append([]netaddr.Listener(nil), cfg.Listen...)
	p.txs.m = make(map[string]*tx)
	p.txs.max = cfg.MaxTransactions
	if p.txs.max == 0 {
		p.txs.max = DefaultMaxTransactions
	}
	p.conns.m = make(map[netip.AddrPort]*tcpConn)
	return p, nil
}

// Stats returns a snapshot of the proxy's counters.
func (p *Proxy) Stats() Stats {
	return Stats{
		Received: p.c.received.Load(), Forwarded: p.c.forwarded.Load(), Absorbed: p.c.absorbed.Load(),
		Replied: p.c.replied.Load(), Malformed: p.c.malformed.Load(), Unroutable: p.c.unroutable.Load(),
		TooManyHops: p.c.tooManyHops.Load(), Loops: p.c.loops.Load(), Timeouts: p.c.timeouts.Load(),
		ObserveFailures: p.c.observeFailures.Load(),
		Stateless:       p.c.stateless.Load(),
	}
}

// Ready is closed once Run listens on every address (or has failed to).
func (p *Proxy) Ready() <-chan struct{} { return p.ready }

// Addrs returns the bound addresses, in Listen's order and form ("udp://127.0.0.1:40312"),
// once Ready is closed; nil before, or when Run failed to listen.
func (p *Proxy) Addrs() []string {
	select {
	case <-p.ready:
		return p.addrs
	default:
		return nil
	}
}

// Run resolves the PBX and trunk addresses, listens on every Listen address and proxies until
// ctx ends. It returns nil on a clean stop and an error when an address cannot be resolved or a
// listener cannot start. A Proxy runs once.
func (p *Proxy) Run(ctx context.Context) (err error) {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("sip proxy: Run called twice")
	}
	readyOnce := sync.OnceFunc(func() { close(p.ready) })
	defer readyOnce()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.ctx = ctx

	if p.pbx, err = resolveHostPort(ctx, p.cfg.PBX); err != nil {
		return fmt.Errorf("sip proxy: pbx: %w", err)
	}
	if p.trunk, err = resolveHostPort(ctx, p.cfg.Trunk); err != nil {
		return fmt.Errorf("sip proxy: trunk: %w", err)
	}
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	p.ours, p.ourPorts = map[string]bool{}, map[int]bool{}
	var tcpLs []net.Listener
	var addrs []string
	var lc net.ListenConfig
	for _, la := range p.listen {
		host := p.advertiseFor(la.Addr.Addr())
		p.ours[host] = true
		p.addOurIPs(la.Addr.Addr())
		switch la.Transport {
		case netaddr.UDP:
			pc, err := lc.ListenPacket(ctx, "udp", la.Addr.String())
			if err != nil {
				return fmt.Errorf("sip proxy: listen %s: %w", la, err)
			}
			closers = append(closers, func() { _ = pc.Close() })
			if uc, ok := pc.(*net.UDPConn); ok {
				// Bursts of datagrams wait in the kernel rather than being dropped.
				_ = uc.SetReadBuffer(udpSocketBuffer)
				_ = uc.SetWriteBuffer(udpSocketBuffer)
			}
			ap := pc.LocalAddr().(*net.UDPAddr).AddrPort()
			p.udp = append(p.udp, &udpListener{pc: pc, host: host, port: int(ap.Port())})
			p.ourPorts[int(ap.Port())] = true
			addrs = append(addrs, "udp://"+netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String())
		case netaddr.TCP:
			l, err := lc.Listen(ctx, "tcp", la.Addr.String())
			if err != nil {
				return fmt.Errorf("sip proxy: listen %s: %w", la, err)
			}
			closers = append(closers, func() { _ = l.Close() })
			ap := l.Addr().(*net.TCPAddr).AddrPort()
			if p.tcpPort == 0 {
				p.tcpPort, p.tcpHost = int(ap.Port()), host
			}
			p.ourPorts[int(ap.Port())] = true
			tcpLs = append(tcpLs, l)
			addrs = append(addrs, "tcp://"+netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String())
		}
	}
	p.addrs = addrs
	readyOnce()
	for _, a := range addrs {
		p.log.Info("sip proxy listening", "addr", a)
	}

	for _, u := range p.udp {
		p.wg.Go(func() { p.readUDP(u) })
	}
	for _, l := range tcpLs {
		p.wg.Go(func() { p.acceptTCP(l) })
	}
	<-ctx.Done()
	for _, c := range closers {
		c()
	}
	closers = nil
	p.conns.closeAll()
	p.txs.stopAll()
	p.wg.Wait()
	return nil
}

// advertiseFor is the host the proxy writes in Via and Record-Route for a listener on ip.
func (p *Proxy) advertiseFor(ip netip.Addr) string {
	if p.cfg.Advertise != "" {
		return p.cfg.Advertise
	}
	if !ip.IsUnspecified() {
		return ip.Unmap().String()
	}
	// The local address the system routes to the PBX from; connecting a UDP socket sends nothing.
	if c, err := net.Dial("udp", p.pbx.String()); err == nil {
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap().String()
	}
	return "127.0.0.1"
}

// addOurIPs records the addresses a Route URI may name this proxy by: the listener's IP, or
// every interface address for a listener on an unspecified address.
func (p *Proxy) addOurIPs(ip netip.Addr) {
	if !ip.IsUnspecified() {
		p.ours[ip.Unmap().String()] = true
		return
	}
	as, _ := net.InterfaceAddrs()
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				p.ours[ip.Unmap().String()] = true
			}
		}
	}
}

// isOurs reports whether host:port (port 0: 5060) names this proxy.
func (p *Proxy) isOurs(host string, port int) bool {
	if port == 0 {
		port = 5060
	}
	if !p.ourPorts[port] {
		return false
	}
	if len(host) > 1 && host[0] == '[' {
		host = host[1 : len(host)-1]
	}
	if p.ours[host] {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && p.ours[a.Unmap().String()]
}

// resolveHostPort resolves hp to one address (IPv4 preferred).
func resolveHostPort(ctx context.Context, hp netaddr.HostPort) (netip.AddrPort, error) {
	ip, err := resolveHost(ctx, hp.Host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(ip, hp.Port), nil
}

// resolveHost returns host's address: host itself when it is an IP literal, else its first
// IPv4 address from the system resolver (IPv6 when it has none), bounded by two seconds.
func resolveHost(ctx context.Context, host string) (netip.Addr, error) {
	if len(host) > 1 && host[0] == '[' {
		host = host[1 : len(host)-1]
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolve %q: %w", host, err)
	}
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			return ip.Unmap(), nil
		}
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("resolve %q: no address", host)
	}
	return ips[0], nil
}

// logLimiter lets one log line of each kind through per second, so that a flood of bad
// messages cannot turn into a flood of log lines.
type logLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (l *logLimiter) allow(kind string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	if now.Sub(l.last[kind]) < time.Second {
		return false
	}
	l.last[kind] = now
	return true
}

// warn logs a fault at warn level, rate limited per kind.
func (p *Proxy) warn(kind, msg string, args ...any) {
	if p.limiter.allow(kind, time.Now()) {
		p.log.Warn(msg, args...)
	}
}
