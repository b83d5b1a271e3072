package proxy

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/callwire/callwire/translators/netaddr"
)

func TestValidate(t *testing.T) {
	ok := Config{Listen: mustListen("udp://0.0.0.0:5060", "tcp://[::]:5060"), PBX: mustHP("10.0.0.20:5060"), Trunk: mustHP("sip.carrier.example:5060")}
	cases := []struct {
		name string
		edit func(*Config)
		want []string // substrings of the error; none: valid
	}{
		{"valid", func(*Config) {}, nil},
		{"empty", func(c *Config) { *c = Config{} }, []string{"listen: at least one", "pbx: required", "trunk: required"}},
		{"bad listen entries", func(c *Config) {
			c.Listen = append(c.Listen, netaddr.Listener{Transport: "sctp", Addr: c.Listen[0].Addr}, netaddr.Listener{Transport: "udp"})
		},
			[]string{"listen[2]: ", "not a udp or tcp listener", "listen[3]: "}},
		{"bad pbx and trunk", func(c *Config) { c.PBX, c.Trunk = netaddr.HostPort{Host: "10.0.0.20"}, netaddr.HostPort{} }, []string{"pbx: ", "trunk: ", "required"}},
		{"bad advertise", func(c *Config) { c.Advertise = "a b" }, []string{"advertise: "}},
		{"negative max", func(c *Config) { c.MaxTransactions = -1 }, []string{"max_transactions: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			cfg.Listen = append([]netaddr.Listener(nil), ok.Listen...)
			c.edit(&cfg)
			err := cfg.Validate()
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: nil, want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, err := New(cfg); err == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}

func TestRunFailsWhenListenerCannotStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p, err := New(Config{Listen: mustListen("tcp://" + l.Addr().String()), PBX: mustHP("127.0.0.1:5060"), Trunk: mustHP("127.0.0.1:5061")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := p.Run(ctx); err == nil || !strings.Contains(err.Error(), "listen tcp://") {
		t.Fatalf("Run: %v, want a listen error", err)
	}
	if p.Addrs() != nil {
		t.Errorf("Addrs after a failed Run: %v", p.Addrs())
	}
	if err := p.Run(ctx); err == nil {
		t.Error("second Run: nil error")
	}
}

func TestRunStopsCleanly(t *testing.T) {
	p, err := New(Config{Listen: mustListen("udp://127.0.0.1:0", "tcp://127.0.0.1:0"), PBX: mustHP("127.0.0.1:5060"), Trunk: mustHP("127.0.0.1:5061")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	<-p.Ready()
	if a := p.Addrs(); len(a) != 2 || !strings.HasPrefix(a[0], "udp://127.0.0.1:") || !strings.HasPrefix(a[1], "tcp://127.0.0.1:") {
		t.Fatalf("Addrs %v", a)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestFromPBX(t *testing.T) {
	mk := func(pbx, trunk string) *Proxy {
		return &Proxy{pbx: netip.MustParseAddrPort(pbx), trunk: netip.MustParseAddrPort(trunk)}
	}
	req := func(viaPort int) *sip.Request {
		r := sip.NewRequest(sip.INVITE, sip.Uri{Scheme: "sip", Host: "x"})
		r.AppendHeader(&sip.ViaHeader{ProtocolName: "SIP", ProtocolVersion: "2.0", Transport: "TCP", Host: "10.0.0.20", Port: viaPort, Params: sip.NewParams()})
		return r
	}
	cases := []struct {
		name       string
		pbx, trunk string
		src        peer
		viaPort    int
		want       bool
	}{
		{"udp same address", "10.0.0.20:5060", "192.0.2.1:5060", peer{network: "udp", addr: netip.MustParseAddrPort("10.0.0.20:5060")}, 5060, true},
		{"udp other port", "10.0.0.20:5060", "192.0.2.1:5060", peer{network: "udp", addr: netip.MustParseAddrPort("10.0.0.20:5062")}, 5060, false},
		{"tcp ephemeral port", "10.0.0.20:5060", "192.0.2.1:5060", peer{network: "tcp", addr: netip.MustParseAddrPort("10.0.0.20:40123")}, 0, true},
		{"tcp other ip", "10.0.0.20:5060", "192.0.2.1:5060", peer{network: "tcp", addr: netip.MustParseAddrPort("10.0.0.21:5060")}, 5060, false},
		{"tcp shared ip, via names pbx port", "127.0.0.1:5060", "127.0.0.1:5070", peer{network: "tcp", addr: netip.MustParseAddrPort("127.0.0.1:40123")}, 5060, true},
		{"tcp shared ip, via names trunk port", "127.0.0.1:5060", "127.0.0.1:5070", peer{network: "tcp", addr: netip.MustParseAddrPort("127.0.0.1:40123")}, 5070, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := mk(c.pbx, c.trunk).fromPBX(req(c.viaPort), c.src); got != c.want {
				t.Errorf("fromPBX = %v, want %v", got, c.want)
			}
		})
	}
}
