package sdktest

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a target until told otherwise: a network outage on demand,
// for tests of what happens when the core, a database or a broker goes away.
type Proxy struct {
	t      testing.TB
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	hung  bool
	conns []net.Conn
}

// NewProxy listens on a free port of 127.0.0.1 and forwards every connection to target
// (host:port). It is cut when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sdktest: proxy: %v", err)
	}
	p := &Proxy{t: t, addr: ln.Addr().String(), target: target}
	p.serve(ln)
	t.Cleanup(p.Cut)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// URL returns raw (a URL such as postgres://... or redis://...) with its host replaced by the
// proxy's, failing the test when raw has no host.
func (p *Proxy) URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		p.t.Fatalf("sdktest: proxy: %q is not a URL with a host", raw)
	}
	u.Host = p.addr
	return u.String()
}

// Cut is the target going away: every connection is closed and new ones are refused.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore is the target coming back: the proxy listens again on the same address and forwards
// new connections (it also ends a Hang).
func (p *Proxy) Restore() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("sdktest: proxy restore: %v", err)
	}
	p.mu.Lock()
	p.hung = false
	p.mu.Unlock()
	p.serve(ln)
}

// Hang is the target accepting connections but never answering: connections old and new stay
// open, what is sent is swallowed, and nothing comes back.
func (p *Proxy) Hang() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hung = true
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			hung := p.hung
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			if hung {
				go io.Copy(io.Discard, c)
				continue
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, up)
			p.mu.Unlock()
			go p.pipe(up, c)
			go p.pipe(c, up)
		}
	}()
}

// pipe copies from src to dst until either ends; while the proxy hangs it swallows what src
// sends.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			hung := p.hung
			p.mu.Unlock()
			if !hung {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					src.Close()
					return
				}
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// String describes the proxy for test logs.
func (p *Proxy) String() string { return fmt.Sprintf("proxy %s -> %s", p.addr, p.target) }
