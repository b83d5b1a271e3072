package proxy

import (
	"github.com/emiago/sipgo/sip"

	"context"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/netaddr"
	"github.com/callwire/callwire/translators/sip/callmodel"
)

// running is a proxy started for a test.
type running struct {
	p    *Proxy
	udp  netip.AddrPort // first UDP listener
	tcp  netip.AddrPort // first TCP listener
	done chan error
}

// start runs a proxy on 127.0.0.1 (UDP and TCP, ports chosen free) until the test ends.
func start(t testing.TB, cfg Config) *running {
	return startWith(t, cfg, nil)
}

// startWith is start with a change made to the proxy before it runs.
func startWith(t testing.TB, cfg Config, edit func(*Proxy)) *running {
	t.Helper()
	if cfg.Listen == nil {
		cfg.Listen = mustListen("udp://127.0.0.1:0", "tcp://127.0.0.1:0")
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(p)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := &running{p: p, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not stop")
		}
	})
	select {
	case <-p.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("proxy not ready")
	}
	addrs := p.Addrs()
	if len(addrs) == 0 {
		t.Fatalf("proxy did not listen: %v", <-r.done)
	}
	for _, a := range addrs {
		scheme, hp, _ := strings.Cut(a, "://")
		ap := netip.MustParseAddrPort(hp)
		switch {
		case scheme == "udp" && !r.udp.IsValid():
			r.udp = ap
		case scheme == "tcp" && !r.tcp.IsValid():
			r.tcp = ap
		}
	}
	return r
}

func local(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// recorder collects observed messages.
type recorder struct {
	mu   sync.Mutex
	msgs []callmodel.Message
}

func (r *recorder) observe(m callmodel.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
}

func (r *recorder) all() []callmodel.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]callmodel.Message(nil), r.msgs...)
}

// scenario is the path of a sipp scenario: this package's own (proxy_*.xml, in testdata), or one
// of the observer's flows (../testdata/sipp).
func scenario(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join("..", "testdata", "sipp")
	if strings.HasPrefix(name, "proxy_") {
		dir = "testdata"
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func startLine(m sip.Message) string {
	switch x := m.(type) {
	case *sip.Request:
		return x.StartLine()
	case *sip.Response:
		return x.StartLine()
	}
	return "?"
}

// mustHP parses a test's peer address.
func mustHP(s string) netaddr.HostPort {
	h, err := netaddr.ParseHostPort(s, 5060)
	if err != nil {
		panic(err)
	}
	return h
}

// mustListen parses a test's listen addresses.
func mustListen(s ...string) []netaddr.Listener {
	ls, err := netaddr.ParseListens("listen", s, 5060)
	if err != nil {
		panic(err)
	}
	return ls
}
