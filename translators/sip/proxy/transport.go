package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/emiago/sipgo/sip"
)

// maxDatagram is the largest UDP datagram read.
const maxDatagram = 65535

// tcpDialTimeout bounds connecting to a next hop over TCP.
const tcpDialTimeout = 3 * time.Second

// tcpIdle closes a TCP connection that carried nothing for this long (RFC 5626 keep-alives
// count), so that connections from peers that vanished do not pile up.
const tcpIdle = 10 * time.Minute

type udpListener struct {
	pc   net.PacketConn
	host string // advertised
	port int
}

// peer is one end of a hop: the transport, the address, and for TCP the connection when known.
type peer struct {
	network string // "udp" or "tcp"
	addr    netip.AddrPort
	conn    *tcpConn
}

// readUDP reads datagrams until the listener closes.
func (p *Proxy) readUDP(u *udpListener) {
	buf := make([]byte, maxDatagram)
	uc, _ := u.pc.(*net.UDPConn)
	for {
		n, src, err := uc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.warn("udp_read", "sip proxy: udp read", "error", err)
			continue
		}
		at := time.Now()
		data := buf[:n]
		if len(bytes.Trim(data, "\r\n\x00 \t")) == 0 {
			continue // keep-alive
		}
		data = bytes.Clone(data)
		msg, err := p.parser.ParseSIP(data)
		if err != nil {
			p.c.malformed.Add(1)
			p.warn("malformed", "sip proxy: dropped a message that does not parse", "transport", "udp", "src", src.String(), "error", err, "bytes", n)
			continue
		}
		p.handle(msg, data, peer{network: "udp", addr: unmap(src)}, at)
	}
}

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }

// acceptTCP accepts connections until the listener closes.
func (p *Proxy) acceptTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.warn("tcp_accept", "sip proxy: tcp accept", "error", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		tc := p.conns.add(c)
		if tc == nil {
			_ = c.Close()
			return
		}
		p.wg.Go(func() { p.readTCP(tc) })
	}
}

// tcpConn is one TCP connection, accepted or dialled; writes are serialized.
type tcpConn struct {
	net.Conn
	remote netip.AddrPort
	mu     sync.Mutex
}

func (c *tcpConn) write(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Write(b)
	return err
}

// readTCP reads a SIP stream until the connection ends. A stream that does not parse has no
// message boundary left to resync on: it is counted and the connection closed.
func (p *Proxy) readTCP(c *tcpConn) {
	defer p.conns.remove(c)
	par := p.parser.NewSIPStream()
	defer par.Close()
	buf := make([]byte, 64*1024)
	for {
		_ = c.SetReadDeadline(time.Now().Add(tcpIdle))
		n, err := c.Read(buf)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				p.log.Debug("sip proxy: tcp read", "remote", c.remote.String(), "error", err)
			}
			return
		}
		at := time.Now()
		src := peer{network: "tcp", addr: c.remote, conn: c}
		err = par.ParseSIPStream(buf[:n], func(m sip.Message) {
			var data []byte
			if p.observing() {
				// A stream yields parsed messages, not their text: the observer gets the
				// message as received rendered before the proxy changes it to forward it.
				data = render(m)
			}
			p.handle(m, data, src, at)
		})
		if err != nil && !errors.Is(err, sip.ErrParseSipPartial) {
			p.c.malformed.Add(1)
			p.warn("malformed", "sip proxy: closed a TCP connection whose stream does not parse", "src", c.remote.String(), "error", err)
			return
		}
	}
}

// connTable holds the open TCP connections by remote address.
type connTable struct {
	mu     sync.Mutex
	m      map[netip.AddrPort]*tcpConn
	closed bool
}

func (t *connTable) add(c net.Conn) *tcpConn {
	ra := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	tc := &tcpConn{Conn: c, remote: unmap(ra)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.m[tc.remote] = tc
	return tc
}

func (t *connTable) get(a netip.AddrPort) *tcpConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[a]
}

func (t *connTable) remove(c *tcpConn) {
	_ = c.Close()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[c.remote] == c {
		delete(t.m, c.remote)
	}
}

func (t *connTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for _, c := range t.m {
		_ = c.Close()
	}
}

// send writes a rendered message to a peer: over UDP from the first UDP listener (the port the
// proxy advertises), over TCP on the peer's connection, else on an open connection to its
// address, else on a new one.
func (p *Proxy) send(to peer, b []byte) error {
	switch to.network {
	case "udp":
		if len(p.udp) == 0 {
			return errors.New("no udp listener")
		}
		uc := p.udp[0].pc.(*net.UDPConn)
		_, err := uc.WriteToUDPAddrPort(b, to.addr)
		return err
	case "tcp":
		c := to.conn
		if c == nil {
			c = p.conns.get(to.addr)
		}
		if c == nil {
			var err error
			if c, err = p.dial(to.addr); err != nil {
				return err
			}
		}
		if err := c.write(b); err != nil {
			p.conns.remove(c)
			return fmt.Errorf("tcp write to %s: %w", to.addr, err)
		}
		return nil
	}
	return fmt.Errorf("transport %q not served", to.network)
}

func (p *Proxy) dial(a netip.AddrPort) (*tcpConn, error) {
	d := net.Dialer{Timeout: tcpDialTimeout}
	c, err := d.DialContext(p.ctx, "tcp", a.String())
	if err != nil {
		return nil, fmt.Errorf("tcp connect %s: %w", a, err)
	}
	tc := p.conns.add(c)
	if tc == nil {
		_ = c.Close()
		return nil, errors.New("proxy stopping")
	}
	p.wg.Go(func() { p.readTCP(tc) })
	return tc, nil
}

// render writes msg's wire form, into a buffer grown once for headers of up to 1 KiB and the
// body (growing it as the message is written cost more than the copy of the message itself).
func render(msg sip.Message) []byte {
	var b bytes.Buffer
	b.Grow(1024 + len(msg.Body()))
	msg.StringWrite(&b)
	return b.Bytes()
}
