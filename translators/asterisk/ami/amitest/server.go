// Package amitest is an Asterisk manager server for tests, over real TCP on the loopback
// interface: it sends the banner, accepts a login, answers actions (Ping, Logoff, list actions
// from Config.Lists, anything else from Config.Handle) and replays events, such as the
// fixtures of real AMI streams under translators/asterisk/ami/testdata, to every logged-in
// session.
package amitest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/asterisk/ami"
)

// Config scripts a Server. The zero Config accepts nobody.
type Config struct {
	// Username and Secret are the one account the server accepts.
	Username string
	Secret   string
	// TLS, when set, makes the server speak TLS with this configuration.
	TLS *tls.Config
	// Version is sent in the banner (default "7.0.3", Asterisk 18 to 22).
	Version string
	// OnLogin are events sent to a session right after its successful login, in order.
	OnLogin []ami.Message
	// Lists answers list actions by name (case-insensitive), e.g. "CoreShowChannels": the
	// response announces the list, each item follows with the action's ActionID, then an event
	// named after the action with "Complete" appended, marked "EventList: Complete".
	Lists map[string][]ami.Message
	// Handle, when set, sees every action of a logged-in session first. It returns the messages
	// to send back (the action's ActionID is added to responses that lack one; events are
	// sent as they are) and true, or false to leave the
	// action to the server's own answers. Returning (nil, true) sends nothing, e.g. to leave a
	// Ping unanswered.
	Handle func(action ami.Message) ([]ami.Message, bool)
}

// Server is a running test manager. Its methods are safe for concurrent use.
type Server struct {
	cfg Config
	ln  net.Listener
	t   testing.TB

	mu       sync.Mutex
	sessions map[*session]struct{}
	logins   int
	actions  []ami.Message
	answered []ami.Message
	changed  chan struct{} // closed and replaced whenever logins or actions change
	wg       sync.WaitGroup
}

type session struct {
	nc       net.Conn
	wmu      sync.Mutex
	w        *ami.Writer
	loggedIn bool
}

// NewServer starts a Server on 127.0.0.1 with a free port; it stops at the end of the test.
func NewServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Version == "" {
		cfg.Version = "7.0.3"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("amitest: listen: %v", err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s := &Server{cfg: cfg, ln: ln, t: t, sessions: make(map[*session]struct{}), changed: make(chan struct{})}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.Close)
	return s
}

// Addr returns the server's "host:port".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops listening, ends every session and waits for the server's goroutines.
func (s *Server) Close() {
	_ = s.ln.Close()
	s.DropSessions()
	s.wg.Wait()
}

// DropSessions closes every open session without a word, as a restart of Asterisk or a broken
// network would; the server keeps listening.
func (s *Server) DropSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss := range s.sessions {
		_ = ss.nc.Close()
	}
}

// Logins returns how many logins have succeeded so far.
func (s *Server) Logins() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins
}

// Actions returns a copy of every action received so far, in order (Secret values included:
// the test chose them).
func (s *Server) Actions() []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ami.Message, len(s.actions))
	for i, a := range s.actions {
		out[i] = a.Clone()
	}
	return out
}

// Answered returns a copy of every action whose answer has been sent, in order. What the test
// emits after it sees an action here reaches the session after that action's answer, as it
// would from Asterisk, which answers in order on the one connection.
func (s *Server) Answered() []ami.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ami.Message, len(s.answered))
	for i, a := range s.answered {
		out[i] = a.Clone()
	}
	return out
}

// WaitLogins waits until at least n logins have succeeded, or ctx ends.
func (s *Server) WaitLogins(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := s.logins, s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("amitest: %d of %d logins: %w", got, n, ctx.Err())
		}
	}
}

// Emit sends msgs, in order, to every logged-in session; a session that is slow to read makes
// Emit wait (TCP backpressure, as with Asterisk). It returns the first write error.
func (s *Server) Emit(msgs ...ami.Message) error {
	s.mu.Lock()
	var targets []*session
	for ss := range s.sessions {
		if ss.loggedIn {
			targets = append(targets, ss)
		}
	}
	s.mu.Unlock()
	var first error
	for _, ss := range targets {
		if err := ss.send(msgs...); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		ss := &session{nc: nc, w: ami.NewWriter(nc)}
		s.mu.Lock()
		s.sessions[ss] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(ss)
	}
}

func (ss *session) send(msgs ...ami.Message) error {
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	for _, m := range msgs {
		if err := ss.w.WriteMessage(m); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) serve(ss *session) {
	defer s.wg.Done()
	defer func() {
		_ = ss.nc.Close()
		s.mu.Lock()
		delete(s.sessions, ss)
		s.mu.Unlock()
	}()
	ss.wmu.Lock()
	err := ss.w.WriteBanner(s.cfg.Version)
	ss.wmu.Unlock()
	if err != nil {
		return
	}
	r := ami.NewReader(ss.nc)
	for {
		a, err := r.ReadMessage()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.actions = append(s.actions, a.Clone())
		s.notify()
		loggedIn := ss.loggedIn
		s.mu.Unlock()
		ok := s.answer(ss, a, loggedIn)
		s.mu.Lock()
		s.answered = append(s.answered, a.Clone())
		s.notify()
		s.mu.Unlock()
		if !ok {
			return
		}
	}
}

// answer sends the reply to action a; false ends the session.
func (s *Server) answer(ss *session, a ami.Message, loggedIn bool) bool {
	id := a.ActionID()
	name := a.Get("Action")
	reply := func(msgs ...ami.Message) bool {
		for i := range msgs {
			if _, ok := msgs[i].Lookup("ActionID"); !ok && id != "" && msgs[i].IsResponse() && !msgs[i].IsEvent() {
				msgs[i] = msgs[i].Clone()
				msgs[i].Add("ActionID", id)
			}
		}
		return ss.send(msgs...) == nil
	}
	switch {
	case strings.EqualFold(name, "Login"):
		if a.Get("Username") != s.cfg.Username || a.Get("Secret") != s.cfg.Secret || s.cfg.Username == "" {
			reply(ami.NewMessage("Response", "Error", "Message", "Authentication failed"))
			return false // Asterisk hangs up on a failed login
		}
		// The session counts as logged in before the answer goes out: a client that has its
		// answer may call Emit at once, and must get what it emits.
		s.mu.Lock()
		ss.loggedIn = true
		s.logins++
		s.notify()
		s.mu.Unlock()
		if !reply(ami.NewMessage("Response", "Success", "Message", "Authentication accepted")) {
			return false
		}
		return ss.send(s.cfg.OnLogin...) == nil
	case !loggedIn:
		return reply(ami.NewMessage("Response", "Error", "Message", "Permission denied"))
	}
	if s.cfg.Handle != nil {
		if msgs, ok := s.cfg.Handle(a.Clone()); ok {
			return reply(msgs...)
		}
	}
	switch {
	case strings.EqualFold(name, "Ping"):
		ts := strconv.FormatFloat(float64(time.Now().UnixMicro())/1e6, 'f', 6, 64)
		return reply(ami.NewMessage("Response", "Success", "Ping", "Pong", "Timestamp", ts))
	case strings.EqualFold(name, "Logoff"):
		reply(ami.NewMessage("Response", "Goodbye", "Message", "Thanks for all the fish."))
		return false
	}
	for listName, items := range s.cfg.Lists {
		if !strings.EqualFold(name, listName) {
			continue
		}
		msgs := []ami.Message{ami.NewMessage("Response", "Success", "EventList", "start",
			"Message", listName+" will follow")}
		for _, it := range items {
			it = it.Clone()
			it.Add("ActionID", id)
			msgs = append(msgs, it)
		}
		msgs = append(msgs, ami.NewMessage("Event", listName+"Complete", "EventList", "Complete",
			"ListItems", strconv.Itoa(len(items)), "ActionID", id))
		return reply(msgs...)
	}
	return reply(ami.NewMessage("Response", "Error", "Message", "Invalid/unknown command"))
}

// LoadFixture reads a file of AMI messages in wire form (see ../testdata/README.md).
func LoadFixture(path string) ([]ami.Message, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load ami fixture: %w", err)
	}
	defer f.Close()
	r := ami.NewReader(f)
	var out []ami.Message
	for {
		m, err := r.ReadMessage()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("load ami fixture %s, message %d: %w", path, len(out)+1, err)
		}
		out = append(out, m)
	}
}
