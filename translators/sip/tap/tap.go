// Package tap is the SIP observer's passive mode (mode hep): a HEPv3 collector on UDP and TCP
// that receives copies of SIP messages from capture agents (Asterisk res_hep, FreeSWITCH's
// capture server, Kamailio and OpenSIPS siptrace, heplify) and hands them to the call model as
// callmodel.Message values, with no part in the call path.
//
// The tap decodes each packet (translators/sip/hep), drops what is not SIP, is malformed, or
// lacks the configured capture password, drops exact duplicates (the same bytes between the
// same two addresses, captured twice within the window), and puts what is left back in the order
// of the capture agents' timestamps through a bounded reorder window before calling Observe.
// Copies of one message seen on both sides of a proxy differ (Via, Max-Forwards) and are not
// duplicates here: telling them apart is the call model's job.
package tap

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callwire/callwire/translators/netaddr"
	"github.com/callwire/callwire/translators/sip/callmodel"
	"github.com/callwire/callwire/translators/sip/hep"
)

// Defaults for the zero values of Config.
const (
	// DefaultWindow is how long a message is held for messages captured before it to arrive.
	// Capture agents send each copy as it happens, so copies from one agent arrive in order
	// within a millisecond or two; 200 ms covers two agents on one LAN, a TCP sender's
	// buffering and a busy host's scheduling, and is still far below anything a person at
	// a desk would notice in a popup.
	DefaultWindow = 200 * time.Millisecond
	// DefaultMaxHeld is how many messages the window holds at most: 200 ms of 50,000
	// messages a second.
	DefaultMaxHeld = 10000
	// DefaultMaxConns is how many HEP-over-TCP connections are served at once.
	DefaultMaxConns = 256
	// MaxWindow is the longest reorder window accepted.
	MaxWindow = 10 * time.Second
)

// Config is what a Tap needs.
type Config struct {
	// Listen lists where to receive HEP (at least one), as netaddr.ParseListens reads a
	// configuration's listen addresses; port 0 picks a free port, see Addrs.
	Listen []netaddr.Listener
	// Window is the reorder window: how long each message is held so that messages captured
	// before it (by their HEP timestamps) can overtake it. 0 means DefaultWindow.
	Window time.Duration
	// MaxHeld bounds the messages held in the window; 0 means DefaultMaxHeld. When full,
	// the earliest held message is released early (Stats.Overflow).
	MaxHeld int
	// MaxConns bounds the HEP-over-TCP connections served at once; 0 means DefaultMaxConns.
	// A connection beyond it is closed at once (Stats.Refused).
	MaxConns int
	// AuthKey is the HEP capture password (chunk 0x0e). When set, a packet that does not carry
	// exactly this password is dropped (Stats.Unauthorized).
	AuthKey string
	// Observe receives every message, in HEP-timestamp order, from one goroutine (the one
	// running Run). Required. Messages it receives own their Data.
	Observe func(callmodel.Message)
	// Logger receives the tap's log lines; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports every problem of c at once, each naming its key; nil when c is usable.
func (c Config) Validate() error {
	var errs []error
	if len(c.Listen) == 0 {
		errs = append(errs, errors.New("listen: at least one udp:// or tcp:// address is required"))
	}
	for i, l := range c.Listen {
		if !l.Valid() {
			errs = append(errs, fmt.Errorf("listen[%d]: %q is not a udp or tcp listener on an IP address", i, l))
		}
	}
	if c.Window < 0 || c.Window > MaxWindow {
		errs = append(errs, fmt.Errorf("window: %v not in [0, %v]", c.Window, MaxWindow))
	}
	if c.MaxHeld < 0 {
		errs = append(errs, fmt.Errorf("max_held: %d is negative", c.MaxHeld))
	}
	if c.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("max_conns: %d is negative", c.MaxConns))
	}
	if len(c.AuthKey) > hep.MaxPacketLen-hep.HeaderLen-6 {
		errs = append(errs, errors.New("auth_key: longer than a HEP chunk can carry"))
	}
	if c.Observe == nil {
		errs = append(errs, errors.New("observe: a function is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sip tap config: %w", err)
	}
	return nil
}

// Stats counts what a Tap did. Every counter only grows, except Held and Conns.
type Stats struct {
	Packets      uint64 // HEP packets received (datagrams, or frames on TCP), whatever became of them
	Observed     uint64 // messages handed to Observe
	NotSIP       uint64 // well-formed packets whose payload type is not SIP (RTCP, logs, keep-alives)
	Malformed    uint64 // packets that are not HEPv3, or whose SIP payload is not a SIP message
	Unsupported  uint64 // HEPv1/v2 packets and compressed payloads
	Unauthorized uint64 // packets without the configured capture password
	Duplicates   uint64 // exact copies of a message captured within the window
	Late         uint64 // messages older than one already observed, observed at once
	Overflow     uint64 // messages released before their window ended because the window was full
	Dropped      uint64 // UDP packets dropped because Observe fell behind (the queue was full)
	Refused      uint64 // TCP connections closed at once because MaxConns were open
	Held         uint64 // messages in the window now
	Conns        uint64 // TCP connections open now
}

// Tap is a running or runnable HEP collector. Its methods are safe for concurrent use.
type Tap struct {
	cfg       Config
	endpoints []netaddr.Listener
	log       *slog.Logger
	ready     chan struct{}

	mu    sync.Mutex
	addrs []net.Addr

	once sync.Once

	packets, observed, notSIP, malformed, unsupported, unauthorized atomic.Uint64
	duplicates, late, overflow, dropped, refused, held, conns       atomic.Uint64
}

// New validates cfg and returns a Tap ready to Run; it opens no socket.
func New(cfg Config) (*Tap, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MaxHeld == 0 {
		cfg.MaxHeld = DefaultMaxHeld
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	t := &Tap{cfg: cfg, log: cfg.Logger.With("observer", "hep"), ready: make(chan struct{})}
	t.endpoints = append([]netaddr.Listener(nil), cfg.Listen...)
	return t, nil
}

// Ready is closed once Run listens on every address of Config.Listen.
func (t *Tap) Ready() <-chan struct{} { return t.ready }

// Addrs returns the addresses the tap listens on, in the order of Config.Listen (a
// *net.UDPAddr or *net.TCPAddr each), or nil before Ready is closed.
func (t *Tap) Addrs() []net.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]net.Addr(nil), t.addrs...)
}

// Stats returns the tap's counters.
func (t *Tap) Stats() Stats {
	return Stats{
		Packets: t.packets.Load(), Observed: t.observed.Load(), NotSIP: t.notSIP.Load(),
		Malformed: t.malformed.Load(), Unsupported: t.unsupported.Load(), Unauthorized: t.unauthorized.Load(),
		Duplicates: t.duplicates.Load(), Late: t.late.Load(), Overflow: t.overflow.Load(),
		Dropped: t.dropped.Load(), Refused: t.refused.Load(), Held: t.held.Load(), Conns: t.conns.Load(),
	}
}

// arrival is one decoded message on its way from a listener to the window.
type arrival struct {
	msg callmodel.Message
	at  time.Time // when it arrived, on the tap's clock
}

// queueLen is the capacity of the channel between the listeners and the window.
const queueLen = 4096

// Run listens on every address of Config.Listen and calls Observe until ctx ends. It returns
// an error when it cannot listen, and nil on a clean stop, after observing every message still
// held. A Tap runs once: a second call returns an error.
func (t *Tap) Run(ctx context.Context) error {
	first := false
	t.once.Do(func() { first = true })
	if !first {
		return errors.New("sip tap: already run")
	}
	var lc net.ListenConfig
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	var udps []net.PacketConn
	var tcps []net.Listener
	addrs := make([]net.Addr, 0, len(t.endpoints))
	for _, e := range t.endpoints {
		switch e.Transport {
		case netaddr.UDP:
			pc, err := lc.ListenPacket(ctx, "udp", e.Addr.String())
			if err != nil {
				closeAll()
				return fmt.Errorf("sip tap: listen udp %s: %w", e.Addr, err)
			}
			if uc, ok := pc.(*net.UDPConn); ok {
				_ = uc.SetReadBuffer(4 << 20) // a burst must not overflow the kernel's default buffer
			}
			closers = append(closers, func() { _ = pc.Close() })
			udps = append(udps, pc)
			addrs = append(addrs, pc.LocalAddr())
		case netaddr.TCP:
			l, err := lc.Listen(ctx, "tcp", e.Addr.String())
			if err != nil {
				closeAll()
				return fmt.Errorf("sip tap: listen tcp %s: %w", e.Addr, err)
			}
			closers = append(closers, func() { _ = l.Close() })
			tcps = append(tcps, l)
			addrs = append(addrs, l.Addr())
		}
	}
	t.mu.Lock()
	t.addrs = addrs
	t.mu.Unlock()
	for _, a := range addrs {
		t.log.Info("sip tap listening", "network", a.Network(), "addr", a.String())
	}

	in := make(chan arrival, queueLen)
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, pc := range udps {
		wg.Go(func() { t.serveUDP(pc, in) })
	}
	conns := &connSet{m: make(map[net.Conn]struct{})}
	for _, l := range tcps {
		wg.Go(func() { t.serveTCP(lctx, l, conns, in, &wg) })
	}
	close(t.ready)

	ws := &windowState{r: newReorder(t.cfg.Window, t.cfg.MaxHeld)}
	ws.emit = func(m callmodel.Message) {
		t.observed.Add(1)
		t.cfg.Observe(m)
	}
	t.loop(ctx, in, ws)

	stop()
	closeAll()
	conns.closeAll()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// A TCP connection may be blocked sending to in: keep taking until every listener is gone,
	// then what is left in the queue.
	var tail []arrival
wait:
	for {
		select {
		case a := <-in:
			tail = append(tail, a)
		case <-done:
			break wait
		}
	}
	for len(in) > 0 {
		tail = append(tail, <-in)
	}
	for _, a := range tail {
		t.accept(ws, a)
	}
	ws.r.drain(ws.emit)
	t.held.Store(0)
	t.log.Info("sip tap stopped", "observed", t.observed.Load(), "packets", t.packets.Load())
	return nil
}

// windowState is the Run goroutine's own: the reorder window and where it releases to.
type windowState struct {
	r    *reorder
	emit func(callmodel.Message)
}

// loop runs the reorder window until ctx ends.
func (t *Tap) loop(ctx context.Context, in <-chan arrival, ws *windowState) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wake := time.Hour
		if at, ok := ws.r.next(); ok {
			wake = time.Until(at)
		}
		timer.Reset(wake)
		select {
		case <-ctx.Done():
			return
		case a := <-in:
			t.accept(ws, a)
		case now := <-timer.C:
			ws.r.release(now, ws.emit)
		}
		t.held.Store(uint64(ws.r.held()))
	}
}

// accept gives one arrival to the window and counts the outcome.
func (t *Tap) accept(ws *windowState, a arrival) {
	switch ws.r.push(a.msg, a.at, ws.emit) {
	case duplicate:
		t.duplicates.Add(1)
	case late:
		t.late.Add(1)
	case overflow:
		t.overflow.Add(1)
	}
}

// serveUDP reads datagrams until pc is closed.
func (t *Tap) serveUDP(pc net.PacketConn, in chan<- arrival) {
	buf := make([]byte, hep.MaxPacketLen+1)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.log.Warn("sip tap: udp read", "err", err)
			}
			return
		}
		m, ok := t.packet(buf[:n], from)
		if !ok {
			continue
		}
		select {
		case in <- arrival{msg: m, at: time.Now()}:
		default:
			t.dropped.Add(1)
		}
	}
}

// connSet tracks open TCP connections so that Run can close them when it stops.
type connSet struct {
	mu     sync.Mutex
	m      map[net.Conn]struct{}
	closed bool
}

func (s *connSet) add(c net.Conn, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.m) >= limit {
		return false
	}
	s.m[c] = struct{}{}
	return true
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c)
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.m {
		_ = c.Close()
	}
}

// serveTCP accepts connections until l is closed, serving each on its own goroutine.
func (t *Tap) serveTCP(ctx context.Context, l net.Listener, conns *connSet, in chan<- arrival, wg *sync.WaitGroup) {
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				t.log.Warn("sip tap: tcp accept", "err", err)
			}
			return
		}
		if !conns.add(c, t.cfg.MaxConns) {
			t.refused.Add(1)
			t.log.Warn("sip tap: tcp connection refused, too many open", "remote", c.RemoteAddr().String(), "max_conns", t.cfg.MaxConns)
			_ = c.Close()
			continue
		}
		t.conns.Add(1)
		wg.Go(func() {
			defer func() {
				conns.remove(c)
				_ = c.Close()
				t.conns.Add(^uint64(0))
			}()
			t.serveConn(ctx, c, in)
		})
	}
}

// serveConn reads HEP packets framed by their length field until the stream ends, breaks its
// framing, or ctx ends. A TCP sender is slowed down, not dropped, when Observe falls behind.
func (t *Tap) serveConn(ctx context.Context, c net.Conn, in chan<- arrival) {
	r, err := hep.NewReader(c, hep.MaxPacketLen)
	if err != nil {
		t.log.Error("sip tap: hep reader", "err", err)
		return
	}
	for {
		b, err := r.Next()
		if err != nil {
			switch {
			case errors.Is(err, hep.ErrMalformed):
				t.packets.Add(1)
				t.malformed.Add(1)
				t.log.Warn("sip tap: tcp stream is not HEPv3, closing it", "remote", c.RemoteAddr().String(), "err", err)
			case errors.Is(err, hep.ErrUnsupported):
				t.packets.Add(1)
				t.unsupported.Add(1)
				t.log.Warn("sip tap: tcp stream is not HEPv3, closing it", "remote", c.RemoteAddr().String(), "err", err)
			}
			return
		}
		m, ok := t.packet(b, c.RemoteAddr())
		if !ok {
			continue
		}
		select {
		case in <- arrival{msg: m, at: time.Now()}:
		case <-ctx.Done():
			return
		}
	}
}

// packet decodes one HEP packet and makes it a Message owning its bytes, counting what it drops.
func (t *Tap) packet(b []byte, from net.Addr) (callmodel.Message, bool) {
	t.packets.Add(1)
	m, why := convert(b, t.cfg.AuthKey)
	switch why {
	case dropNone:
		return m, true
	case dropNotSIP:
		t.notSIP.Add(1)
	case dropMalformed:
		t.malformed.Add(1)
		t.log.Debug("sip tap: malformed packet", "from", from.String())
	case dropUnsupported:
		if t.unsupported.Add(1) == 1 {
			t.log.Warn("sip tap: unsupported HEP packet (HEPv1/v2 or compressed); configure the agent for uncompressed HEPv3", "from", from.String())
		}
	case dropUnauthorized:
		if t.unauthorized.Add(1) == 1 {
			t.log.Warn("sip tap: packet without the capture password", "from", from.String())
		}
	}
	return callmodel.Message{}, false
}

// dropReason is why convert refused a packet.
type dropReason int

const (
	dropNone dropReason = iota
	dropNotSIP
	dropMalformed
	dropUnsupported
	dropUnauthorized
)

// convert decodes one HEP packet into a Message owning a copy of its payload. It checks the
// capture password when authKey is set, and that a SIP payload starts like a SIP message.
func convert(b []byte, authKey string) (callmodel.Message, dropReason) {
	p, err := hep.Decode(b)
	switch {
	case errors.Is(err, hep.ErrUnsupported):
		return callmodel.Message{}, dropUnsupported
	case err != nil:
		return callmodel.Message{}, dropMalformed
	}
	if authKey != "" && subtle.ConstantTimeCompare(p.AuthKey, []byte(authKey)) != 1 {
		return callmodel.Message{}, dropUnauthorized
	}
	if !p.IsSIP() {
		return callmodel.Message{}, dropNotSIP
	}
	if !looksLikeSIP(p.Payload) {
		return callmodel.Message{}, dropMalformed
	}
	return callmodel.Message{
		Data:      bytes.Clone(p.Payload),
		Transport: transport(&p),
		Src:       addrPort(p.Src, p.SrcPort),
		Dst:       addrPort(p.Dst, p.DstPort),
		At:        p.Time(),
	}, dropNone
}

// addrPort unmaps an IPv4-mapped IPv6 address, as some agents send IPv4 in IPv6 chunks.
func addrPort(a netip.Addr, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(a.Unmap(), port)
}

// looksLikeSIP reports whether b starts with a SIP start line: "SIP/2.0 <code> ..." or
// "<METHOD> <uri> SIP/2.0", ended by CRLF (or LF).
func looksLikeSIP(b []byte) bool {
	line, _, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return false
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	if rest, ok := bytes.CutPrefix(line, []byte("SIP/2.0 ")); ok {
		return len(rest) >= 3 && isDigit(rest[0]) && isDigit(rest[1]) && isDigit(rest[2])
	}
	method, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(method) == 0 || !bytes.HasSuffix(rest, []byte(" SIP/2.0")) || len(rest) <= len(" SIP/2.0") {
		return false
	}
	for _, c := range method {
		if (c < 'A' || c > 'Z') && c != '-' && c != '_' && c != '.' && c != '!' && c != '%' && c != '*' && c != '+' && c != '`' && c != '\'' && c != '~' && (c < 'a' || c > 'z') && !isDigit(c) {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// transport names the transport a captured message travelled on: the HEP IP protocol, refined
// by the top Via of the message on a stream (TLS, WS and WSS run over TCP). With no protocol
// chunk, the top Via decides; with neither, UDP.
func transport(p *hep.Packet) string {
	via := viaTransport(p.Payload)
	switch p.IPProtocol {
	case hep.IPProtoUDP:
		return "udp"
	case hep.IPProtoSCTP:
		return "sctp"
	case hep.IPProtoTCP:
		switch via {
		case "tls", "ws", "wss":
			return via
		}
		return "tcp"
	}
	switch via {
	case "udp", "tcp", "tls", "ws", "wss", "sctp":
		return via
	}
	return "udp"
}

// viaTransport returns the lower-case transport of the first Via header ("Via:" or "v:"), or "".
func viaTransport(b []byte) string {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			return "" // end of headers
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		name = bytes.TrimSpace(name)
		if !bytes.EqualFold(name, []byte("via")) && !bytes.EqualFold(name, []byte("v")) {
			continue
		}
		// SIP/2.0/UDP host...
		value = bytes.TrimSpace(value)
		proto, _, _ := bytes.Cut(value, []byte(" "))
		i := bytes.LastIndexByte(proto, '/')
		if i < 0 {
			return ""
		}
		return strings.ToLower(string(bytes.TrimSpace(proto[i+1:])))
	}
	return ""
}
