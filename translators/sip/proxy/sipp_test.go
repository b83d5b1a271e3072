package proxy

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/callwire/callwire/translators/sip/callmodel"

	"github.com/callwire/callwire/translators/sip/internal/siptest"
)

// pairCase is one sipp pair run through the proxy.
type pairCase struct {
	name      string
	uac, uas  string
	calls     int
	transport siptest.Transport
	outbound  bool // the UAC plays the PBX: its initial requests must go to the trunk (the UAS)
	noObserve bool // translation off: Observe nil, messages changed in place
}

func TestSippThroughProxy(t *testing.T) {
	sipp, _ := siptest.Programs(t)
	cases := []pairCase{
		{name: "basic/udp", uac: "basic_uac.xml", uas: "basic_uas.xml", calls: 20, transport: siptest.UDP},
		{name: "basic/tcp", uac: "basic_uac.xml", uas: "basic_uas.xml", calls: 20, transport: siptest.TCP},
		{name: "basic/outbound/udp", uac: "basic_uac.xml", uas: "basic_uas.xml", calls: 5, transport: siptest.UDP, outbound: true},
		{name: "basic/outbound/tcp", uac: "basic_uac.xml", uas: "basic_uas.xml", calls: 5, transport: siptest.TCP, outbound: true},
		{name: "cancel/udp", uac: "proxy_cancel_uac.xml", uas: "proxy_cancel_uas.xml", calls: 5, transport: siptest.UDP},
		{name: "cancel/tcp", uac: "proxy_cancel_uac.xml", uas: "proxy_cancel_uas.xml", calls: 5, transport: siptest.TCP},
		// re-INVITE from the trunk, UPDATE from the PBX, REFER from the trunk, BYE from the PBX.
		{name: "dialog/udp", uac: "proxy_dialog_uac.xml", uas: "proxy_dialog_uas.xml", calls: 5, transport: siptest.UDP},
		{name: "dialog/tcp", uac: "proxy_dialog_uac.xml", uas: "proxy_dialog_uas.xml", calls: 5, transport: siptest.TCP},
		{name: "basic/unobserved/udp", uac: "basic_uac.xml", uas: "basic_uas.xml", calls: 5, transport: siptest.UDP, noObserve: true},
		{name: "dialog/unobserved/tcp", uac: "proxy_dialog_uac.xml", uas: "proxy_dialog_uas.xml", calls: 5, transport: siptest.TCP, noObserve: true},
		{name: "dialog/outbound/udp", uac: "proxy_dialog_uac.xml", uas: "proxy_dialog_uas.xml", calls: 5, transport: siptest.UDP, outbound: true},
	}
	// The cases run side by side: their peers take ports from a range of this test's own, out of
	// the kernel's ephemeral range, so no peer's port is another's or an outgoing connection's.
	ports, err := siptest.NewPorts(30600, 31099)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runPair(t, sipp, ports, c)
		})
	}
}

func runPair(t *testing.T, sipp string, ports *siptest.Ports, c pairCase) {
	t.Helper()
	pair := siptest.Prepare(t, siptest.Pair{UAC: scenario(t, c.uac), UAS: scenario(t, c.uas), Calls: c.calls,
		Transport: c.transport, Rate: 20, Timeout: 20 * time.Second, Ports: ports})
	cfg := Config{PBX: mustHP(local(pair.UASPort)), Trunk: mustHP(local(pair.UACPort))}
	if c.outbound {
		cfg.PBX, cfg.Trunk = cfg.Trunk, cfg.PBX
	}
	rec := &recorder{}
	if !c.noObserve {
		cfg.Observe = rec.observe
	}
	r := start(t, cfg)
	if c.transport == siptest.TCP {
		pair.Target = r.tcp.String()
	} else {
		pair.Target = r.udp.String()
	}
	res := siptest.Run(t.Context(), t, sipp, pair)
	if !res.OK(c.calls) {
		t.Fatalf("%s: not every call succeeded: uac %+v uas %+v; proxy %+v", c.name, res.UAC, res.UAS, r.p.Stats())
	}
	st := r.p.Stats()
	if st.Malformed != 0 || st.Unroutable != 0 || st.ObserveFailures != 0 {
		t.Errorf("stats %+v", st)
	}
	if !c.noObserve {
		checkObserved(t, c, pair, rec.all())
	}
}

// checkObserved checks that each observed message names the side it came from and the side it
// went to, its transport and its receive time, and that the in-dialog requests of the callee
// (the PBX side) were seen going to the caller.
func checkObserved(t *testing.T, c pairCase, pair siptest.Pair, msgs []callmodel.Message) {
	t.Helper()
	uac, uas := netip.MustParseAddrPort(local(pair.UACPort)), netip.MustParseAddrPort(local(pair.UASPort))
	if len(msgs) == 0 {
		t.Fatal("nothing observed")
	}
	begin := time.Now().Add(-time.Minute)
	toUAS := 0
	methods := map[string]int{}
	for i, m := range msgs {
		if m.Transport != c.transport.Name() {
			t.Errorf("msg %d: transport %q, want %q", i, m.Transport, c.transport.Name())
		}
		if m.At.Before(begin) || m.At.After(time.Now()) {
			t.Errorf("msg %d: At %v out of the run", i, m.At)
		}
		if m.SIP == nil {
			t.Fatalf("msg %d: no SIP", i)
		}
		switch c.transport {
		case siptest.UDP:
			if !(m.Src == uac && m.Dst == uas || m.Src == uas && m.Dst == uac) {
				t.Errorf("msg %d (%s): src %v dst %v, want between %v and %v", i, startLine(m.SIP), m.Src, m.Dst, uac, uas)
			}
		default: // TCP: the UAC's source port is ephemeral
			if m.Src.Addr() != uac.Addr() || m.Dst.Addr() != uac.Addr() || m.Src == m.Dst {
				t.Errorf("msg %d (%s): src %v dst %v", i, startLine(m.SIP), m.Src, m.Dst)
			}
		}
		if m.Dst == uas {
			toUAS++
		}
		if r, ok := m.SIP.(*sip.Request); ok {
			methods[string(r.Method)]++
			if (r.Method == sip.UPDATE || r.Method == sip.BYE) && strings.Contains(c.uac, "dialog") && m.Dst == uas {
				t.Errorf("msg %d: the callee's %s went to the callee", i, r.Method)
			}
		}
	}
	if toUAS == 0 {
		t.Errorf("no message observed going to the UAS %v", uas)
	}
	want := map[string][]string{
		"basic":  {"INVITE", "ACK", "BYE"},
		"cancel": {"INVITE", "CANCEL", "ACK"},
		"dialog": {"INVITE", "ACK", "UPDATE", "REFER", "BYE"},
	}[strings.SplitN(c.name, "/", 2)[0]]
	for _, w := range want {
		if methods[w] < c.calls {
			t.Errorf("observed %d %s, want at least %d (all: %v)", methods[w], w, c.calls, methods)
		}
	}
}
