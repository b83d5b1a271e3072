package ringcentral

import (
	"bytes"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/callwire/callwire/internal/testclock"
	"github.com/callwire/callwire/internal/testwait"
)

// The pings of these tests follow RFC 6455 (https://www.rfc-editor.org/rfc/rfc6455, "The
// WebSocket Protocol"): a Ping may come at any time, also between the fragments of a message
// (§5.4, §5.5), with up to 125 bytes of application data (§5.5); the Pong answering it carries
// the same application data (§5.5.2, §5.5.3) and, from a client, is masked (§5.3). RingCentral's
// gateway pings its clients and closes a connection whose Pong does not come within 10 seconds
// ("Keeping WebSocket connections alive",
// https://developers.ringcentral.com/guide/notifications/websockets/heart-beats, source
// ringcentral/ringcentral-api-docs docs/notifications/websockets/heart-beats.md).

// pings are the Ping payloads the tests send: none, a short one, and the largest a control frame
// may carry.
var pings = []struct {
	name    string
	payload []byte
}{
	{"without payload", nil},
	{"with a payload", []byte("are you there")},
	{"with 125 bytes, the most a control frame carries", bytes.Repeat([]byte{'p'}, 125)},
}

// clockConn is a TCP connection whose write deadline is kept against the test's clock, not the
// machine's, so that a test can let time pass (an idle connection) without waiting for it. A
// write at or after the deadline fails as the kernel's would: "write tcp ...: i/o timeout".
type clockConn struct {
	net.Conn
	now func() time.Time

	mu sync.Mutex
	wd time.Time
}

func (c *clockConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wd = t
	c.mu.Unlock()
	return nil
}

func (c *clockConn) SetReadDeadline(time.Time) error { return nil }

func (c *clockConn) SetDeadline(t time.Time) error { return c.SetWriteDeadline(t) }

func (c *clockConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	wd := c.wd
	c.mu.Unlock()
	if !wd.IsZero() && !c.now().Before(wd) {
		return 0, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.ErrDeadlineExceeded}
	}
	return c.Conn.Write(b)
}

// tcpPair is a connected loopback TCP pair: the client end (on clock's time) and the server end.
func tcpPair(t *testing.T, clock *testclock.Clock) (*clockConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-accepted
	if sc == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { cc.Close(); sc.Close() })
	return &clockConn{Conn: cc, now: clock.Now}, sc
}

// readClientFrame reads one frame the client sent, unmasked; it fails the test if the frame was
// not masked, as RFC 6455 §5.3 requires of a client.
func readClientFrame(t *testing.T, r io.Reader) ws.Frame {
	t.Helper()
	f, err := ws.ReadFrame(r)
	if err != nil {
		t.Fatalf("read the client's frame: %v", err)
	}
	if !f.Header.Masked {
		t.Fatalf("the client's %v frame is not masked", f.Header.OpCode)
	}
	return ws.UnmaskFrameInPlace(f)
}

// TestPongAfterIdle is the failure of the issue: the gateway pings a connection that has been
// idle longer than a write takes (here 30 s of the test's clock after the subscription was
// sent), and the Pong must still go out, with the Ping's payload, and the message after the
// Ping be read. The Ping comes alone, or between the two fragments of a message.
func TestPongAfterIdle(t *testing.T) {
	for _, p := range pings {
		for _, fragmented := range []bool{false, true} {
			name := p.name
			if fragmented {
				name += ", between fragments"
			}
			t.Run(name, func(t *testing.T) {
				clock := testclock.New(time.Now())
				cc, sc := tcpPair(t, clock)
				c := newConn(cc, cc, clock.Now)

				// The client's last write: the subscription.
				if err := c.send(wsMeta{Type: msgClientRequest, MessageID: "1", Method: "POST", Path: "/restapi/v1.0/subscription/"}, nil); err != nil {
					t.Fatal(err)
				}
				if f := readClientFrame(t, sc); f.Header.OpCode != ws.OpText {
					t.Fatalf("the subscription came as %v", f.Header.OpCode)
				}
				clock.Advance(30 * time.Second)

				msg := `[{"type":"Heartbeat","messageId":"2","status":200}]`
				var frames bytes.Buffer
				if fragmented {
					half := len(msg) / 2
					_ = ws.WriteFrame(&frames, ws.NewFrame(ws.OpText, false, []byte(msg[:half])))
					_ = ws.WriteFrame(&frames, ws.NewPingFrame(p.payload))
					_ = ws.WriteFrame(&frames, ws.NewFrame(ws.OpContinuation, true, []byte(msg[half:])))
				} else {
					_ = ws.WriteFrame(&frames, ws.NewPingFrame(p.payload))
					_ = ws.WriteFrame(&frames, ws.NewTextFrame([]byte(msg)))
				}
				if _, err := sc.Write(frames.Bytes()); err != nil {
					t.Fatal(err)
				}

				got, err := c.read()
				if err != nil {
					t.Fatalf("read after the ping: %v", err)
				}
				if string(got) != msg {
					t.Errorf("read %q, want %q", got, msg)
				}
				pong := readClientFrame(t, sc)
				if pong.Header.OpCode != ws.OpPong || !pong.Header.Fin {
					t.Fatalf("answer %v (fin %t), want a whole Pong", pong.Header.OpCode, pong.Header.Fin)
				}
				if !bytes.Equal(pong.Payload, p.payload) {
					t.Errorf("pong payload %q, want the ping's %q", pong.Payload, p.payload)
				}
			})
		}
	}
}

// TestWritesDoNotInterleave sends messages from one goroutine while another reads and answers
// pings, as the heartbeat sender and the reader do: every frame the server reads is whole (a
// text message or a Pong with its ping's payload), in the order each writer wrote its own.
func TestWritesDoNotInterleave(t *testing.T) {
	clock := testclock.New(time.Now())
	cc, sc := tcpPair(t, clock)
	c := newConn(cc, cc, clock.Now)
	const n = 200
	// The server pings n times, then sends one message the reader stops at.
	go func() {
		var frames bytes.Buffer
		for i := range n {
			_ = ws.WriteFrame(&frames, ws.NewPingFrame([]byte(strings.Repeat("x", i%126))))
		}
		_ = ws.WriteFrame(&frames, ws.NewTextFrame([]byte(`[{"type":"Heartbeat","messageId":"end"}]`)))
		_, _ = sc.Write(frames.Bytes())
	}()
	readErr := make(chan error, 1)
	go func() { _, err := c.read(); readErr <- err }()
	for range n {
		if err := c.send(wsMeta{Type: msgHeartbeat, MessageID: newMessageID()}, nil); err != nil {
			t.Fatal(err)
		}
	}
	texts, pongs := 0, 0
	for texts < n || pongs < n {
		f := readClientFrame(t, sc)
		switch f.Header.OpCode {
		case ws.OpText:
			if _, _, err := decodeMessage(f.Payload); err != nil {
				t.Fatalf("text frame %d is not a whole message: %v", texts, err)
			}
			texts++
		case ws.OpPong:
			if want := strings.Repeat("x", pongs%126); string(f.Payload) != want {
				t.Fatalf("pong %d carries %q, want %q", pongs, f.Payload, want)
			}
			pongs++
		default:
			t.Fatalf("unexpected %v frame", f.Header.OpCode)
		}
	}
	if err := <-readErr; err != nil {
		t.Fatal(err)
	}
}

// TestLivePings runs the live path against the fake gateway pinging as a real server does: once
// while the client waits for its first message, then, once subscribed, while nothing else comes
// and between the fragments of notifications, with and without payload. Every Ping gets its
// Pong, with its payload, in order; the connection stays up (one socket, one subscription) and
// the call's events are exactly the scenario's.
func TestLivePings(t *testing.T) {
	f := newFakeRC(t)
	rec := &recorder{}
	stop := run(t, config(f, t.TempDir(), true), rec)
	testwait.Until(t, 20*time.Second, "the subscription", func() bool { s, _, _, _ := f.counts(); return s == 1 })

	want := [][]byte{[]byte("are you there")}
	notes := scenario(t, "normal_call")
	for i, p := range pings {
		f.ping(t, p.payload) // idle
		f.pushFragmented(t, notes[i], p.payload)
		want = append(want, p.payload, p.payload)
	}
	pushAll(f, notes[len(pings):])
	waitForEnd(t, rec, normalCall)
	testwait.Until(t, 20*time.Second, "every pong", func() bool { return len(f.pongPayloads()) >= len(want) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	got := f.pongPayloads()
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("pong payloads\n got %q\nwant %q", got, want)
	}
	matchGolden(t, "normal_call", eventsOf(rec.events(), normalCall))
	if subscribed, wsTokens, _, _ := f.counts(); subscribed != 1 || wsTokens != 1 {
		t.Errorf("%d subscriptions, %d WebSocket tokens: the connection was replaced, want it kept", subscribed, wsTokens)
	}
}
