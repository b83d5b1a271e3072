package tap

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/netaddr"
	"github.com/callwire/callwire/translators/sip/callmodel"
	"github.com/callwire/callwire/translators/sip/hep"
)

func TestValidate(t *testing.T) {
	observe := func(callmodel.Message) {}
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error, all of them; none: valid
	}{
		{"minimal", Config{Listen: mustListen("udp://127.0.0.1:9060"), Observe: observe}, nil},
		{"both transports", Config{Listen: mustListen("udp://0.0.0.0:9060", "tcp://[::]:9060"), Window: time.Second, MaxHeld: 5, Observe: observe}, nil},
		{"nothing", Config{}, []string{"listen:", "observe:"}},
		{"every problem at once", Config{Listen: []netaddr.Listener{{Transport: "sctp", Addr: netip.MustParseAddrPort("0.0.0.0:9060")}, {Transport: "udp"}},
			Window: -1, MaxHeld: -1, MaxConns: -2},
			[]string{"listen[0]", "listen[1]", "window:", "max_held:", "max_conns:", "observe:"}},
		{"window too long", Config{Listen: mustListen("udp://:9060"), Window: time.Minute, Observe: observe}, []string{"window:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if _, err := New(tt.cfg); err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: nil, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if _, err := New(tt.cfg); err == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
}

// sink collects what a Tap observes.
type sink struct {
	mu   sync.Mutex
	msgs []callmodel.Message
	ch   chan struct{}
}

func newSink() *sink { return &sink{ch: make(chan struct{}, 1)} }

func (s *sink) observe(m callmodel.Message) {
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

func (s *sink) got() []callmodel.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]callmodel.Message(nil), s.msgs...)
}

// waitFor waits until the sink holds n messages, bounded by ctx.
func (s *sink) waitFor(ctx context.Context, t *testing.T, n int) []callmodel.Message {
	t.Helper()
	for {
		if got := s.got(); len(got) >= n {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("observed %d messages, want %d: %v", len(s.got()), n, ctx.Err())
		case <-s.ch:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// startTap runs a tap on free local ports with cfg's other settings, and stops it at the end of
// the test, checking that Run returned nil.
func startTap(t *testing.T, cfg Config) (*Tap, *sink) {
	t.Helper()
	s := newSink()
	if cfg.Listen == nil {
		cfg.Listen = mustListen("udp://127.0.0.1:0", "tcp://127.0.0.1:0")
	}
	cfg.Observe = s.observe
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	tp, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- tp.Run(ctx) }()
	select {
	case <-tp.Ready():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("tap not ready after 5s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return 5s after its context ended")
		}
	})
	return tp, s
}

func addrOf(t *testing.T, tp *Tap, network string) string {
	t.Helper()
	for _, a := range tp.Addrs() {
		if a.Network() == network {
			return a.String()
		}
	}
	t.Fatalf("tap listens on no %s address: %v", network, tp.Addrs())
	return ""
}

const invite = "INVITE sip:1001@192.0.2.10 SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK%d\r\nCall-ID: c%d@192.0.2.1\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"

// sipPacket returns an encoded HEP packet carrying a SIP message numbered n, captured ms
// milliseconds after t0.
func sipPacket(t testing.TB, n, ms int, mod func(*hep.Packet)) []byte {
	t.Helper()
	at := t0.Add(time.Duration(ms) * time.Millisecond)
	p := hep.Packet{
		Family: hep.FamilyIPv4, IPProtocol: hep.IPProtoUDP,
		Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.10"),
		SrcPort: 5060, DstPort: 5062,
		Seconds: uint32(at.Unix()), Micros: uint32(at.Nanosecond() / 1000),
		ProtoType: hep.ProtoSIP, CaptureID: 7,
		Payload: fmt.Appendf(nil, invite, n, n),
	}
	if mod != nil {
		mod(&p)
	}
	b, err := hep.Encode(&p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sendUDP(t *testing.T, addr string, pkts ...[]byte) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, p := range pkts {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
}

func callIDs(ms []callmodel.Message) []string {
	var out []string
	for _, m := range ms {
		for l := range strings.SplitSeq(string(m.Data), "\r\n") {
			if v, ok := strings.CutPrefix(l, "Call-ID: "); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// TestUDPOrderAndFields sends HEP datagrams out of timestamp order, with a duplicate and
// packets to drop, and checks what is observed, field by field.
func TestUDPOrderAndFields(t *testing.T) {
	tp, s := startTap(t, Config{Window: 300 * time.Millisecond})
	sendUDP(t, addrOf(t, tp, "udp"),
		sipPacket(t, 3, 30, nil),
		sipPacket(t, 1, 10, nil),
		sipPacket(t, 1, 11, nil), // the same message from a second agent
		[]byte("not hep at all"),
		sipPacket(t, 9, 5, func(p *hep.Packet) { p.ProtoType = 5; p.Payload = []byte{0x80, 0xc8} }), // RTCP
		sipPacket(t, 9, 5, func(p *hep.Packet) { p.Payload = []byte("hello") }),                     // says SIP, is not
		sipPacket(t, 2, 20, func(p *hep.Packet) {
			p.IPProtocol = hep.IPProtoTCP
			p.Src, p.Dst = netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("::ffff:192.0.2.10")
		}),
	)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got := s.waitFor(ctx, t, 3)
	if ids := callIDs(got); strings.Join(ids, " ") != "c1@192.0.2.1 c2@192.0.2.1 c3@192.0.2.1" {
		t.Errorf("observed Call-IDs %q, want c1, c2, c3 in timestamp order", ids)
	}
	want := []callmodel.Message{
		{Transport: "udp", Src: netip.MustParseAddrPort("192.0.2.1:5060"), Dst: netip.MustParseAddrPort("192.0.2.10:5062"), At: t0.Add(10 * time.Millisecond)},
		{Transport: "tcp", Src: netip.MustParseAddrPort("[2001:db8::1]:5060"), Dst: netip.MustParseAddrPort("192.0.2.10:5062"), At: t0.Add(20 * time.Millisecond)},
		{Transport: "udp", Src: netip.MustParseAddrPort("192.0.2.1:5060"), Dst: netip.MustParseAddrPort("192.0.2.10:5062"), At: t0.Add(30 * time.Millisecond)},
	}
	for i, w := range want {
		g := got[i]
		if g.Transport != w.Transport || g.Src != w.Src || g.Dst != w.Dst || !g.At.Equal(w.At) || g.SIP != nil {
			t.Errorf("message %d: %s %v→%v at %v, want %s %v→%v at %v", i, g.Transport, g.Src, g.Dst, g.At, w.Transport, w.Src, w.Dst, w.At)
		}
		if !strings.HasPrefix(string(g.Data), "INVITE sip:1001@192.0.2.10 SIP/2.0\r\n") {
			t.Errorf("message %d: data %q", i, g.Data)
		}
	}
	waitStats(ctx, t, tp, func(st Stats) bool { return st.Packets == 7 })
	st := tp.Stats()
	if st.Observed != 3 || st.Duplicates != 1 || st.Malformed != 2 || st.NotSIP != 1 || st.Late != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
}

func waitStats(ctx context.Context, t *testing.T, tp *Tap, ok func(Stats) bool) {
	t.Helper()
	for !ok(tp.Stats()) {
		select {
		case <-ctx.Done():
			t.Fatalf("stats %+v: %v", tp.Stats(), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestTCPManyConnections sends HEP over several TCP connections at once, packets split across
// writes and several packets in one write, and checks every message is observed in timestamp
// order.
func TestTCPManyConnections(t *testing.T) {
	tp, s := startTap(t, Config{Window: 300 * time.Millisecond})
	addr := addrOf(t, tp, "tcp")
	const conns, per = 8, 25
	var wg sync.WaitGroup
	for c := range conns {
		wg.Go(func() {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			var stream []byte
			for i := range per {
				n := c*per + i
				stream = append(stream, sipPacket(t, n, n, nil)...)
			}
			// odd-sized writes: packets split across writes and several in one
			for len(stream) > 0 {
				k := min(len(stream), 97+c*13)
				if _, err := conn.Write(stream[:k]); err != nil {
					t.Error(err)
					return
				}
				stream = stream[k:]
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got := s.waitFor(ctx, t, conns*per)
	for i := 1; i < len(got); i++ {
		if got[i].At.Before(got[i-1].At) {
			t.Fatalf("message %d at %v observed after one at %v", i, got[i].At, got[i-1].At)
		}
	}
	if st := tp.Stats(); st.Observed != conns*per || st.Packets != conns*per || st.Late != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestTCPBadStreamClosed: a connection that stops being HEPv3 is closed and counted; the
// packets before it are observed, and other connections go on.
func TestTCPBadStreamClosed(t *testing.T) {
	tp, s := startTap(t, Config{Window: 10 * time.Millisecond})
	addr := addrOf(t, tp, "tcp")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream := append(sipPacket(t, 1, 1, nil), "GET / HTTP/1.1\r\n\r\n"...)
	if _, err := conn.Write(stream); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the tap wrote to a HEP connection")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the tap did not close a connection that is not HEPv3")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s.waitFor(ctx, t, 1)
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Write(sipPacket(t, 2, 2, nil)); err != nil {
		t.Fatal(err)
	}
	s.waitFor(ctx, t, 2)
	if st := tp.Stats(); st.Malformed != 1 {
		t.Errorf("stats %+v, want 1 malformed", st)
	}
}

func TestAuthKey(t *testing.T) {
	tp, s := startTap(t, Config{Window: 10 * time.Millisecond, AuthKey: "s3cret"})
	sendUDP(t, addrOf(t, tp, "udp"),
		sipPacket(t, 1, 1, nil),
		sipPacket(t, 2, 2, func(p *hep.Packet) { p.AuthKey = []byte("wrong") }),
		sipPacket(t, 3, 3, func(p *hep.Packet) { p.AuthKey = []byte("s3cret") }),
	)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got := s.waitFor(ctx, t, 1)
	waitStats(ctx, t, tp, func(st Stats) bool { return st.Packets == 3 })
	if ids := callIDs(s.got()); len(ids) != 1 || ids[0] != "c3@192.0.2.1" || len(got) != 1 {
		t.Errorf("observed %q, want only c3", ids)
	}
	if st := tp.Stats(); st.Unauthorized != 2 {
		t.Errorf("stats %+v, want 2 unauthorized", st)
	}
}

// TestUnsupported: HEPv2 and compressed payloads are counted apart from malformed packets.
func TestUnsupported(t *testing.T) {
	tp, _ := startTap(t, Config{Window: 10 * time.Millisecond})
	compressed := sipPacket(t, 1, 1, nil)
	// rewrite the payload chunk's type (0x0f) into the compressed payload type (0x10)
	for off := hep.HeaderLen; off < len(compressed); {
		typ := binary.BigEndian.Uint16(compressed[off+2:])
		n := int(binary.BigEndian.Uint16(compressed[off+4:]))
		if typ == hep.ChunkPayload {
			binary.BigEndian.PutUint16(compressed[off+2:], hep.ChunkCompressedPayload)
		}
		off += n
	}
	sendUDP(t, addrOf(t, tp, "udp"), []byte{2, 16, 2, 17, 0x13, 0xc4, 0x13, 0xc4}, compressed)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	waitStats(ctx, t, tp, func(st Stats) bool { return st.Packets == 2 })
	if st := tp.Stats(); st.Unsupported != 2 || st.Observed != 0 {
		t.Errorf("stats %+v, want 2 unsupported", st)
	}
}

// TestStopObservesWhatIsHeld: a clean stop observes every message still in the window.
func TestStopObservesWhatIsHeld(t *testing.T) {
	s := newSink()
	tp, err := New(Config{Listen: mustListen("udp://127.0.0.1:0"), Window: 5 * time.Second, Observe: s.observe,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- tp.Run(ctx) }()
	<-tp.Ready()
	sendUDP(t, tp.Addrs()[0].String(), sipPacket(t, 2, 2, nil), sipPacket(t, 1, 1, nil))
	wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer wcancel()
	waitStats(wctx, t, tp, func(st Stats) bool { return st.Held == 2 })
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ids := callIDs(s.got()); strings.Join(ids, " ") != "c1@192.0.2.1 c2@192.0.2.1" {
		t.Errorf("observed at stop %q", ids)
	}
	if err := tp.Run(t.Context()); err == nil {
		t.Error("a second Run returned nil")
	}
}

// TestListenError: Run reports an address it cannot listen on.
func TestListenError(t *testing.T) {
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tp, err := New(Config{Listen: mustListen("udp://" + busy.LocalAddr().String()), Observe: func(callmodel.Message) {},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := tp.Run(ctx); err == nil || !strings.Contains(err.Error(), "listen udp") {
		t.Errorf("Run = %v, want a listen error", err)
	}
}

// TestKamailioFixtures replays the committed Kamailio captures (one call, in and out of the
// proxy) over UDP in reverse order and checks they come out in capture order, none dropped:
// the copies in and out of the proxy differ and are not duplicates.
func TestKamailioFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "hep", "testdata", "kamailio-*.hep"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var pkts [][]byte
	for i := len(files) - 1; i >= 0; i-- {
		b, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		pkts = append(pkts, b)
	}
	tp, s := startTap(t, Config{Window: 300 * time.Millisecond})
	sendUDP(t, addrOf(t, tp, "udp"), pkts...)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	got := s.waitFor(ctx, t, len(files))
	for i, m := range got {
		want, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		p, _ := hep.Decode(want)
		if string(m.Data) != string(p.Payload) || m.Src != p.SrcAddrPort() || m.Dst != p.DstAddrPort() || !m.At.Equal(p.Time()) || m.Transport != "udp" {
			t.Errorf("message %d is not %s: %s %v→%v at %v", i, filepath.Base(files[i]), m.Transport, m.Src, m.Dst, m.At)
		}
	}
	if st := tp.Stats(); st.Duplicates != 0 || st.Late != 0 || st.Observed != uint64(len(files)) {
		t.Errorf("stats %+v", st)
	}
}

// TestMaxConns: a TCP connection beyond MaxConns is closed at once and counted; the open ones
// keep working.
func TestMaxConns(t *testing.T) {
	tp, s := startTap(t, Config{Window: 10 * time.Millisecond, MaxConns: 1})
	addr := addrOf(t, tp, "tcp")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c1, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	waitStats(ctx, t, tp, func(st Stats) bool { return st.Conns == 1 })
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c2.Read(make([]byte, 1)); err == nil {
		t.Error("the tap wrote to a HEP connection")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("a connection over MaxConns was not closed")
	}
	if _, err := c1.Write(sipPacket(t, 1, 1, nil)); err != nil {
		t.Fatal(err)
	}
	s.waitFor(ctx, t, 1)
	if st := tp.Stats(); st.Refused != 1 || st.Conns != 1 {
		t.Errorf("stats %+v, want 1 refused, 1 open", st)
	}
}

// TestFloodStaysBounded floods the tap over UDP with a small window bound and a slow Observe:
// the window never holds more than its bound, and every packet received is either observed or
// counted as dropped.
func TestFloodStaysBounded(t *testing.T) {
	const maxHeld, n = 50, 5000
	s := newSink()
	seen := 0
	slow := func(m callmodel.Message) {
		seen++ // only the Run goroutine calls Observe
		if seen == 1 || seen%500 == 0 {
			time.Sleep(50 * time.Millisecond) // Observe falls behind now and then
		}
		s.observe(m)
	}
	tp, err := New(Config{Listen: mustListen("udp://127.0.0.1:0"), Window: time.Second, MaxHeld: maxHeld, Observe: slow,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- tp.Run(ctx) }()
	<-tp.Ready()
	conn, err := net.Dial("udp", tp.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range n {
		if _, err := conn.Write(sipPacket(t, i, i, nil)); err != nil {
			t.Fatal(err)
		}
		if st := tp.Stats(); st.Held > maxHeld {
			t.Fatalf("%d held, bound %d", st.Held, maxHeld)
		}
	}
	// Let the tap take in what the kernel still buffers: nothing tells how much that is, so this
	// waits until 100ms of real time bring no new packet.
	wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer wcancel()
	last := uint64(0)
	for {
		time.Sleep(100 * time.Millisecond)
		p := tp.Stats().Packets
		if p == last || wctx.Err() != nil {
			break
		}
		last = p
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := tp.Stats()
	if st.Packets == 0 || st.Observed+st.Dropped != st.Packets || st.Held != 0 {
		t.Errorf("stats %+v: observed + dropped should be every packet, none held", st)
	}
	if st.Overflow == 0 {
		t.Errorf("stats %+v: a flood through a window of %d released nothing early", st, maxHeld)
	}
	t.Logf("sent %d: %+v", n, st)
}

// mustListen parses a test's listen addresses.
func mustListen(s ...string) []netaddr.Listener {
	ls, err := netaddr.ParseListens("listen", s, 9060)
	if err != nil {
		panic(err)
	}
	return ls
}
