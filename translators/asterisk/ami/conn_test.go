package ami_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/asterisk/ami"
	"github.com/callwire/callwire/translators/asterisk/ami/amitest"
	"github.com/callwire/callwire/translators/netaddr"
)

const (
	testUser   = "callwire"
	testSecret = "s3cret-never-logged"
)

// syncBuffer is a log sink the connection's goroutines may write to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// dial connects to srv and closes the connection at the end of the test.
func dial(t *testing.T, srv *amitest.Server, cfg ami.Config) *ami.Conn {
	t.Helper()
	cfg.Addr = hostPort(t, srv.Addr())
	c, err := ami.Dial(testCtx(t, 5*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func login(t *testing.T, c *ami.Conn) {
	t.Helper()
	if err := c.Login(testCtx(t, 5*time.Second), ami.Credentials{Username: testUser, Secret: testSecret, Events: "call,agent"}); err != nil {
		t.Fatal(err)
	}
}

// recv returns the next event or fails the test after a while.
func recv(t *testing.T, c *ami.Conn) ami.Message {
	t.Helper()
	select {
	case m, ok := <-c.Events():
		if !ok {
			t.Fatalf("events closed: %v", c.Err())
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return ami.Message{}
	}
}

func TestLogin(t *testing.T) {
	tests := []struct {
		name    string
		secret  string
		wantErr error
	}{
		{name: "accepted", secret: testSecret},
		{name: "refused", secret: "wrong-" + testSecret, wantErr: ami.ErrAuthentication},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret})
			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c := dial(t, srv, ami.Config{Logger: logger})
			if c.Version() != "7.0.3" {
				t.Errorf("version %q, want the banner's 7.0.3", c.Version())
			}
			err := c.Login(testCtx(t, 5*time.Second), ami.Credentials{Username: testUser, Secret: tt.secret})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("login: %v, want %v", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), tt.secret) {
				t.Errorf("the error shows the secret: %v", err)
			}
			if strings.Contains(logs.String(), tt.secret) {
				t.Errorf("the log shows the secret:\n%s", logs.String())
			}
			if tt.wantErr == nil && srv.Logins() != 1 {
				t.Errorf("server saw %d logins", srv.Logins())
			}
			acts := srv.Actions()
			if len(acts) == 0 || acts[0].Get("Action") != "Login" || acts[0].Get("Username") != testUser || acts[0].ActionID() == "" {
				t.Errorf("first action %v, want a Login with ActionID", acts)
			}
		})
	}
}

func TestActionsBeforeLoginAreRefused(t *testing.T) {
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret})
	c := dial(t, srv, ami.Config{})
	var ae *ami.ActionError
	if err := c.Ping(testCtx(t, 5*time.Second)); !errors.As(err, &ae) || ae.Message != "Permission denied" {
		t.Fatalf("ping before login: %v, want Permission denied", err)
	}
}

func TestPing(t *testing.T) {
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret})
	c := dial(t, srv, ami.Config{PingInterval: -1})
	login(t, c)
	for range 3 {
		if err := c.Ping(testCtx(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.Do(testCtx(t, 5*time.Second), ami.Action{Name: "Ping", ID: "mine"})
	if err != nil || resp.Get("Ping") != "Pong" || resp.ActionID() != "mine" {
		t.Fatalf("Do(Ping) = %v, %v", resp, err)
	}
}

func TestKeepAliveGivesUpOnAnUnansweredPing(t *testing.T) {
	var mu sync.Mutex
	answer := true
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret,
		Handle: func(a ami.Message) ([]ami.Message, bool) {
			mu.Lock()
			defer mu.Unlock()
			if a.Get("Action") == "Ping" && !answer {
				return nil, true // swallow it
			}
			return nil, false
		}})
	c := dial(t, srv, ami.Config{PingInterval: 20 * time.Millisecond, PingTimeout: 200 * time.Millisecond})
	login(t, c)
	select {
	case <-c.Done():
		t.Fatalf("connection ended while pings were answered: %v", c.Err())
	case <-time.After(200 * time.Millisecond):
	}
	mu.Lock()
	answer = false
	mu.Unlock()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("connection still up 5s after pings stopped being answered")
	}
	if !errors.Is(c.Err(), ami.ErrPingTimeout) {
		t.Fatalf("Err() = %v, want ErrPingTimeout", c.Err())
	}
	if _, ok := <-c.Events(); ok {
		t.Fatal("events not closed after the connection ended")
	}
}

func seqEvent(i int) ami.Message {
	return ami.NewMessage("Event", "UserEvent", "Privilege", "user,all", "UserEvent", "Load",
		"Seq", strconv.Itoa(i), "Variable", "a="+strconv.Itoa(i), "Variable", "b=x")
}

// TestEventOrderUnderLoad: 100,000 events, none lost, none reordered, whether the consumer is
// slower than the queue (backpressure to the socket) or idle while the server writes (the
// socket is drained into the queue).
func TestEventOrderUnderLoad(t *testing.T) {
	const n = 100_000
	tests := []struct {
		name      string
		maxQueued int
		idleFirst bool
	}{
		{name: "small queue, backpressure", maxQueued: 16},
		{name: "consumer idle while the server writes", maxQueued: n, idleFirst: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret})
			c := dial(t, srv, ami.Config{MaxQueuedEvents: tt.maxQueued, PingInterval: -1})
			login(t, c)
			batch := make([]ami.Message, n)
			for i := range batch {
				batch[i] = seqEvent(i)
			}
			emitted := make(chan error, 1)
			go func() { emitted <- srv.Emit(batch...) }()
			if tt.idleFirst {
				select {
				case err := <-emitted:
					emitted <- err // for the check below
				case <-time.After(20 * time.Second):
					t.Fatal("the server could not write 100k events while the consumer was idle: the socket is not drained")
				}
			}
			for i := range n {
				m := recv(t, c)
				if got := m.Get("Seq"); got != strconv.Itoa(i) {
					t.Fatalf("event %d has Seq %s", i, got)
				}
				if v := m.GetAll("Variable"); len(v) != 2 || v[0] != "a="+strconv.Itoa(i) {
					t.Fatalf("event %d lost its repeated keys: %q", i, v)
				}
				if i%10_000 == 0 {
					time.Sleep(5 * time.Millisecond) // a consumer that stalls now and then
				}
			}
			if err := <-emitted; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDoListCorrelation(t *testing.T) {
	chans := []ami.Message{
		ami.NewMessage("Event", "CoreShowChannel", "Channel", "PJSIP/101-00000001", "Linkedid", "1700000000.1"),
		ami.NewMessage("Event", "CoreShowChannel", "Channel", "PJSIP/trunk-00000002", "Linkedid", "1700000000.1"),
	}
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret,
		Handle: func(a ami.Message) ([]ami.Message, bool) {
			if a.Get("Action") != "CoreShowChannels" {
				return nil, false
			}
			id := a.ActionID()
			// Live events and an event of another action arrive in the middle of the list.
			return []ami.Message{
				ami.NewMessage("Response", "Success", "ActionID", id, "EventList", "start", "Message", "Channels will follow"),
				ami.NewMessage("Event", "Newchannel", "Channel", "PJSIP/102-00000003"),
				withID(chans[0], id),
				ami.NewMessage("Event", "OriginateResponse", "ActionID", "someone-else", "Response", "Success"),
				withID(chans[1], id),
				ami.NewMessage("Event", "Hangup", "Channel", "PJSIP/102-00000003"),
				ami.NewMessage("Event", "CoreShowChannelsComplete", "ActionID", id, "EventList", "Complete", "ListItems", "2"),
			}, true
		}})
	c := dial(t, srv, ami.Config{PingInterval: -1})
	login(t, c)
	l, err := c.DoList(testCtx(t, 5*time.Second), ami.Action{Name: "CoreShowChannels"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 2 || l.Items[0].Get("Channel") != "PJSIP/101-00000001" || l.Items[1].Get("Channel") != "PJSIP/trunk-00000002" {
		t.Fatalf("list items %v", l.Items)
	}
	if l.Complete.Get("ListItems") != "2" || l.Response.Get("EventList") != "start" {
		t.Fatalf("response %v, complete %v", l.Response, l.Complete)
	}
	for _, want := range []string{"Newchannel", "OriginateResponse", "Hangup"} {
		if got := recv(t, c).Event(); got != want {
			t.Fatalf("live event %q, want %q", got, want)
		}
	}

	// The server's own list answer, and a list action it refuses.
	srv2 := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret,
		Lists: map[string][]ami.Message{"CoreShowChannels": chans}})
	c2 := dial(t, srv2, ami.Config{PingInterval: -1})
	login(t, c2)
	l, err = c2.DoList(testCtx(t, 5*time.Second), ami.Action{Name: "CoreShowChannels"})
	if err != nil || len(l.Items) != 2 {
		t.Fatalf("DoList = %v items, %v", len(l.Items), err)
	}
	var ae *ami.ActionError
	if _, err := c2.DoList(testCtx(t, 5*time.Second), ami.Action{Name: "QueueStatus"}); !errors.As(err, &ae) {
		t.Fatalf("unknown list action: %v, want an ActionError", err)
	}
}

func withID(m ami.Message, id string) ami.Message {
	m = m.Clone()
	m.Add("ActionID", id)
	return m
}

func TestConcurrentActions(t *testing.T) {
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret})
	c := dial(t, srv, ami.Config{PingInterval: -1})
	login(t, c)
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			if err := c.Ping(testCtx(t, 5*time.Second)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSessionDroppedDeliversWhatWasRead(t *testing.T) {
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret})
	c := dial(t, srv, ami.Config{PingInterval: -1})
	login(t, c)
	if err := srv.Emit(seqEvent(0), seqEvent(1), seqEvent(2)); err != nil {
		t.Fatal(err)
	}
	// Wait until the events were read off the socket, then drop the session.
	if err := c.Ping(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	srv.DropSessions()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("drop not noticed")
	}
	if !errors.Is(c.Err(), io.ErrUnexpectedEOF) {
		t.Errorf("Err() = %v, want io.ErrUnexpectedEOF", c.Err())
	}
	for i := range 3 {
		if got := recv(t, c).Get("Seq"); got != strconv.Itoa(i) {
			t.Fatalf("event %d: Seq %s", i, got)
		}
	}
	if _, ok := <-c.Events(); ok {
		t.Fatal("events not closed")
	}
	if err := c.Ping(testCtx(t, time.Second)); err == nil {
		t.Fatal("ping on a dropped connection succeeded")
	}
	if err := c.Close(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(c.Err(), io.ErrUnexpectedEOF) {
		t.Errorf("after Close, Err() = %v; want the reason it ended before", c.Err())
	}
}

func TestClose(t *testing.T) {
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret})
	c := dial(t, srv, ami.Config{PingInterval: 10 * time.Millisecond})
	login(t, c)
	if err := srv.Emit(seqEvent(0)); err != nil { // never consumed
		t.Fatal(err)
	}
	if err := c.Close(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(testCtx(t, 5*time.Second)); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if !errors.Is(c.Err(), ami.ErrClosed) {
		t.Errorf("Err() = %v, want ErrClosed", c.Err())
	}
	for range c.Events() { // closed, possibly after what was already handed over
	}
	if err := c.Ping(testCtx(t, time.Second)); !errors.Is(err, ami.ErrClosed) {
		t.Errorf("ping after close: %v, want ErrClosed", err)
	}
	var logoff bool
	for _, a := range srv.Actions() {
		logoff = logoff || a.Get("Action") == "Logoff"
	}
	if !logoff {
		t.Error("Close did not log off")
	}
}

func TestDoHonoursContext(t *testing.T) {
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret,
		Handle: func(a ami.Message) ([]ami.Message, bool) {
			return nil, a.Get("Action") == "Status" // never answered
		}})
	c := dial(t, srv, ami.Config{PingInterval: -1})
	login(t, c)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, ami.Action{Name: "Status"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want DeadlineExceeded", err)
	}
	if err := c.Ping(testCtx(t, 5*time.Second)); err != nil {
		t.Fatalf("connection unusable after a timed-out action: %v", err)
	}
	if _, err := c.Do(testCtx(t, time.Second), ami.Action{Name: "Ping\r\nAction: Logoff"}); !errors.Is(err, ami.ErrInvalidField) {
		t.Fatalf("injected action: %v, want ErrInvalidField", err)
	}
}

func TestDialTLS(t *testing.T) {
	hs := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate and a client trusting it
	defer hs.Close()
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret, TLS: hs.TLS})
	clientTLS := hs.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	clientTLS.ServerName = "example.com" // in httptest's certificate
	c := dial(t, srv, ami.Config{TLS: clientTLS, PingInterval: -1})
	login(t, c)
	if err := c.Ping(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestDialErrors(t *testing.T) {
	if _, err := ami.Dial(testCtx(t, time.Second), ami.Config{DialTimeout: -1}); err == nil ||
		!strings.Contains(err.Error(), "addr needs a host and a port") || !strings.Contains(err.Error(), "dial timeout") {
		t.Errorf("config error %v, want every problem named", err)
	}
	// A server that never sends its banner.
	srv := amitest.NewServer(t, amitest.Config{})
	srv.Close()
	if _, err := ami.Dial(testCtx(t, 2*time.Second), ami.Config{Addr: hostPort(t, srv.Addr())}); err == nil {
		t.Error("dial to a closed port succeeded")
	}
}

// rawServer accepts one connection and writes script to it, then holds it open until the test
// ends.
func rawServer(t *testing.T, script string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		_, _ = io.WriteString(nc, script)
		_, _ = io.Copy(io.Discard, nc) // until the client hangs up
	}()
	return ln.Addr().String()
}

func TestMalformedStreamsFailLoudly(t *testing.T) {
	t.Run("foreign banner", func(t *testing.T) {
		addr := rawServer(t, "SSH-2.0-OpenSSH_9.6\r\n")
		if _, err := ami.Dial(testCtx(t, 5*time.Second), ami.Config{Addr: hostPort(t, addr)}); !errors.Is(err, ami.ErrBanner) {
			t.Fatalf("err %v, want ErrBanner", err)
		}
	})
	t.Run("no banner before the deadline", func(t *testing.T) {
		addr := rawServer(t, "")
		if _, err := ami.Dial(testCtx(t, 5*time.Second), ami.Config{Addr: hostPort(t, addr), DialTimeout: 100 * time.Millisecond}); err == nil {
			t.Fatal("dial without a banner succeeded")
		}
	})
	t.Run("malformed event ends the connection, not the event alone", func(t *testing.T) {
		addr := rawServer(t, "Asterisk Call Manager/7.0.3\r\nEvent: A\r\n\r\nEvent: B\r\nno colon\r\n\r\nEvent: C\r\n\r\n")
		c, err := ami.Dial(testCtx(t, 5*time.Second), ami.Config{Addr: hostPort(t, addr), PingInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(testCtx(t, 5*time.Second))
		if got := recv(t, c).Event(); got != "A" {
			t.Fatalf("first event %q", got)
		}
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("connection still up after a malformed event")
		}
		var se *ami.SyntaxError
		if !errors.As(c.Err(), &se) {
			t.Fatalf("Err() = %v, want a SyntaxError", c.Err())
		}
		if m, ok := <-c.Events(); ok {
			t.Fatalf("event %v after the malformed one", m)
		}
	})
	t.Run("oversize line", func(t *testing.T) {
		addr := rawServer(t, "Asterisk Call Manager/7.0.3\r\nEvent: "+strings.Repeat("x", 300)+"\r\n\r\n")
		c, err := ami.Dial(testCtx(t, 5*time.Second), ami.Config{Addr: hostPort(t, addr), PingInterval: -1, Limits: ami.Limits{MaxLineBytes: 128}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(testCtx(t, 5*time.Second))
		<-c.Done()
		if !errors.Is(c.Err(), ami.ErrLineTooLong) {
			t.Fatalf("Err() = %v, want ErrLineTooLong", c.Err())
		}
	})
}

// hostPort parses a test server's host:port.
func hostPort(t *testing.T, s string) netaddr.HostPort {
	t.Helper()
	h, err := netaddr.ParseHostPort(s, 5038)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
