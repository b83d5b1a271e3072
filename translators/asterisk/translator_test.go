package asterisk

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/sdk/translator/translatortest"
	"github.com/callwire/callwire/translators/asterisk/ami"
	"github.com/callwire/callwire/translators/asterisk/ami/amitest"
)

const (
	testUser   = "callwire"
	testSecret = "s3cret-never-logged"
)

// collector is an Emitter that keeps what it is given.
type collector struct {
	mu     sync.Mutex
	events []event.Event
	change chan struct{}
}

func newCollector() *collector { return &collector{change: make(chan struct{})} }

func (c *collector) Emit(_ context.Context, e event.Event) error {
	if err := e.Validate(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
	close(c.change)
	c.change = make(chan struct{})
	return nil
}

// wait returns the events once there are at least n, or fails the test.
func (c *collector) wait(t *testing.T, ctx context.Context, n int) []event.Event {
	t.Helper()
	for {
		c.mu.Lock()
		got, ch := append([]event.Event(nil), c.events...), c.change
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%d of %d events before the deadline:\n%s", len(got), n, summary(got))
		}
	}
}

// channels is what the test server lists for CoreShowChannels: it can change during a test.
type channels struct {
	mu   sync.Mutex
	list []ami.Message
}

func (c *channels) set(ms ...ami.Message) {
	c.mu.Lock()
	c.list = ms
	c.mu.Unlock()
}

func (c *channels) handle(a ami.Message) ([]ami.Message, bool) {
	if !strings.EqualFold(a.Get("Action"), "CoreShowChannels") {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := a.ActionID()
	out := []ami.Message{ami.NewMessage("Response", "Success", "EventList", "start", "Message", "Channels will follow", "ActionID", id)}
	for _, m := range c.list {
		m = m.Clone()
		m.Add("ActionID", id)
		out = append(out, m)
	}
	return append(out, ami.NewMessage("Event", "CoreShowChannelsComplete", "EventList", "Complete",
		"ListItems", "0", "ActionID", id)), true
}

// coreShowChannel is the list item Asterisk writes for a channel that is up, made from an event
// of that channel.
func coreShowChannel(m ami.Message) ami.Message {
	out := ami.NewMessage("Event", "CoreShowChannel")
	for _, k := range []string{"Channel", "ChannelState", "ChannelStateDesc", "CallerIDNum", "CallerIDName",
		"ConnectedLineNum", "ConnectedLineName", "Language", "AccountCode", "Context", "Exten", "Priority",
		"Uniqueid", "Linkedid"} {
		out.Add(k, m.Get(k))
	}
	out.Add("Application", "Dial")
	out.Add("Duration", "00:00:05")
	return out
}

func serverConfig(ch *channels) amitest.Config {
	return amitest.Config{Username: testUser, Secret: testSecret, Handle: ch.handle}
}

func configFor(addr string) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal([]byte(testConfig), &m); err != nil {
		panic(err)
	}
	m["address"] = addr
	m["reconnect_min"] = "20ms"
	m["reconnect_max"] = "100ms"
	b, _ := json.Marshal(m)
	return b
}

// start runs a translator against srv until the test ends.
func start(t *testing.T, srv *amitest.Server, out translator.Emitter) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	tr := &Translator{Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return epoch }}
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, configFor(srv.Addr()), out) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				err = errors.New("Run did not return within 5s of its context ending")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ids are the events' providerEventIds in order.
func ids(evs []event.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ProviderEventID
	}
	return out
}

// TestReplayOverTCP replays every fixture through a test manager over TCP into a running
// translator: the events are those of the model fed directly, in the same order.
func TestReplayOverTCP(t *testing.T) {
	for _, fx := range fixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			msgs := load(t, fx.path)
			want := translate(testTracker(t), msgs)
			var ch channels
			srv := amitest.NewServer(t, serverConfig(&ch))
			col := newCollector()
			stop := start(t, srv, col)
			ctx := testCtx(t)
			if err := srv.WaitLogins(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := srv.Emit(msgs...); err != nil {
				t.Fatal(err)
			}
			got := col.wait(t, ctx, len(want))
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if g, w := strings.Join(ids(got), "\n"), strings.Join(ids(want), "\n"); g != w {
				t.Errorf("over TCP:\n%s\nwant:\n%s", g, w)
			}
			login := srv.Actions()[0]
			if login.Get("Events") != DefaultEvents || login.Get("Username") != testUser {
				t.Errorf("login %v, want user %s with events %s", login, testUser, DefaultEvents)
			}
		})
	}
}

// TestReconnectMidCall drops the manager session in the middle of a call, real recordings from
// Asterisk 20 among them, answered or still ringing; the translator logs in again, finds the
// call's channels still up in CoreShowChannels, and the call's events come out each once, none
// lost.
func TestReconnectMidCall(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		cutAt      string // the event before which the session drops
		nth        int    // which of them (0: the first)
	}{
		{"synthetic hold, answered", "testdata/synthetic/hold.ami", "BridgeEnter", 0},
		{"hold, answered", "ami/testdata/asterisk-20-hold.ami", "BridgeEnter", 0},
		{"hold, on hold", "ami/testdata/asterisk-20-hold.ami", "Unhold", 0},
		{"ring group, ringing", "ami/testdata/asterisk-20-ring-group.ami", "DialBegin", 1},
		{"ring group, answered", "ami/testdata/asterisk-20-ring-group.ami", "BridgeEnter", 0},
		{"blind transfer, before the transfer", "ami/testdata/asterisk-20-blind-transfer.ami", "BlindTransfer", 0},
		{"queue, caller waiting", "ami/testdata/asterisk-20-queue-abandon.ami", "QueueCallerAbandon", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := load(t, tc.path)
			want := translate(testTracker(t), msgs)
			cut := nthIndex(t, msgs, tc.cutAt, tc.nth)
			before := len(translate(testTracker(t), msgs[:cut]))
			var ch channels
			srv := amitest.NewServer(t, serverConfig(&ch))
			col := newCollector()
			stop := start(t, srv, col)
			ctx := testCtx(t)
			if err := srv.WaitLogins(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if err := srv.Emit(msgs[:cut]...); err != nil {
				t.Fatal(err)
			}
			col.wait(t, ctx, before)
			var up []ami.Message
			for _, name := range channelsUp(msgs[:cut]) {
				up = append(up, coreShowChannel(lastOf(msgs[:cut], name)))
			}
			if len(up) == 0 {
				t.Fatal("no channel up at the cut: the test would not test a reconnect mid-call")
			}
			ch.set(up...)
			srv.DropSessions()
			if err := srv.WaitLogins(ctx, 2); err != nil {
				t.Fatal(err)
			}
			waitAction(t, ctx, srv, "CoreShowChannels", 2)
			if err := srv.Emit(msgs[cut:]...); err != nil {
				t.Fatal(err)
			}
			col.wait(t, ctx, len(want))
			// Nothing can signal that a duplicate will never come: real time for one to show.
			time.Sleep(100 * time.Millisecond)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			got := col.wait(t, ctx, len(want))
			if g, w := strings.Join(ids(got), "\n"), strings.Join(ids(want), "\n"); g != w {
				t.Errorf("with a reconnect:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

// nthIndex is the index of the nth (from 0) event named ev in msgs.
func nthIndex(t *testing.T, msgs []ami.Message, ev string, nth int) int {
	t.Helper()
	for i, m := range msgs {
		if m.Event() == ev {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
	t.Fatalf("no %s event", ev)
	return 0
}

// channelsUp are the channels msgs show created and not hung up, in the order they were created.
func channelsUp(msgs []ami.Message) []string {
	var up []string
	for _, m := range msgs {
		switch m.Event() {
		case "Newchannel":
			up = append(up, m.Get("Channel"))
		case "Hangup":
			up = slices.DeleteFunc(up, func(c string) bool { return c == m.Get("Channel") })
		}
	}
	return up
}

// TestReconnectCallEndedMeanwhile: the call hangs up while the translator is disconnected;
// CoreShowChannels no longer lists it, so the translator ends it as of the resync.
func TestReconnectCallEndedMeanwhile(t *testing.T) {
	msgs := load(t, "testdata/synthetic/hold.ami")
	cut := indexOf(t, msgs, "BridgeEnter")
	var ch channels
	srv := amitest.NewServer(t, serverConfig(&ch))
	col := newCollector()
	stop := start(t, srv, col)
	ctx := testCtx(t)
	if err := srv.WaitLogins(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.Emit(msgs[:cut]...); err != nil {
		t.Fatal(err)
	}
	col.wait(t, ctx, 2)
	srv.DropSessions()
	got := col.wait(t, ctx, 3)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	last := got[len(got)-1]
	if len(got) != 3 || last.Type != event.CallEnded || last.Disposition != event.DispositionAnswered || last.ProviderEventID != "1700000000.11/ended" {
		t.Errorf("after the call ended unseen:\n%s", summary(got))
	}
}

// TestRestartMidCall is a translator killed in the middle of a call and started afresh: the new
// one learns the call from CoreShowChannels and reports it with the ids the first one used, so
// the core stores nothing twice; the events after the restart are all there.
func TestRestartMidCall(t *testing.T) {
	msgs := load(t, "testdata/synthetic/hold.ami")
	want := translate(testTracker(t), msgs)
	cut := indexOf(t, msgs, "Hold")
	var ch channels
	srv := amitest.NewServer(t, serverConfig(&ch))
	ctx := testCtx(t)
	first := newCollector()
	stop := start(t, srv, first)
	if err := srv.WaitLogins(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := srv.Emit(msgs[:cut]...); err != nil {
		t.Fatal(err)
	}
	before := first.wait(t, ctx, 2)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	ch.set(coreShowChannel(lastOf(msgs[:cut], "PJSIP/carrier-00000001")), coreShowChannel(lastOf(msgs[:cut], "PJSIP/201-00000002")))
	second := newCollector()
	start(t, srv, second)
	if err := srv.WaitLogins(ctx, 2); err != nil {
		t.Fatal(err)
	}
	waitAction(t, ctx, srv, "CoreShowChannels", 2)
	if err := srv.Emit(msgs[cut:]...); err != nil {
		t.Fatal(err)
	}
	after := second.wait(t, ctx, len(want)) // the two learnt again, then the rest
	seen := map[string]bool{}
	for _, e := range append(before, after...) {
		seen[e.ProviderEventID] = true
	}
	for _, w := range want {
		if !seen[w.ProviderEventID] {
			t.Errorf("lost across the restart: %s", w.ProviderEventID)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct ids across the restart, want %d:\n%s", len(seen), len(want), summary(append(before, after...)))
	}
}

func indexOf(t *testing.T, msgs []ami.Message, ev string) int {
	t.Helper()
	for i, m := range msgs {
		if m.Event() == ev {
			return i
		}
	}
	t.Fatalf("no %s event", ev)
	return 0
}

// lastOf is the last event of channel among msgs.
func lastOf(msgs []ami.Message, channel string) ami.Message {
	var out ami.Message
	for _, m := range msgs {
		if m.Get("Channel") == channel {
			out = m
		}
	}
	return out
}

// waitAction waits until the server has answered n actions named name: what the test emits
// after it reaches the translator after those answers.
func waitAction(t *testing.T, ctx context.Context, srv *amitest.Server, name string, n int) {
	t.Helper()
	for {
		c := 0
		for _, a := range srv.Answered() {
			if strings.EqualFold(a.Get("Action"), name) {
				c++
			}
		}
		if c >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d %s actions", c, n, name)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestContract runs the contract check of every translator on a replay of the ring group.
func TestContract(t *testing.T) {
	msgs := load(t, "ami/testdata/ring-group.ami")
	want := translate(testTracker(t), msgs)
	var ch channels
	cfg := serverConfig(&ch)
	cfg.OnLogin = msgs
	srv := amitest.NewServer(t, cfg)
	got := translatortest.Check(t, New(), translatortest.Options{Config: configFor(srv.Addr()), Want: len(want), RefuseFirst: true})
	if len(got) != len(want) {
		t.Errorf("%d events, want %d:\n%s", len(got), len(want), summary(got))
	}
}

// TestLoginRefused: a wrong secret is retried with backoff and reported by Health, never
// logged.
func TestLoginRefused(t *testing.T) {
	srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: "another"})
	var logs syncBuffer
	tr := &Translator{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx, configFor(srv.Addr()), newCollector()) }()
	testwait.Until(t, 5*time.Second, "a second login attempt", func() bool {
		n := 0
		for _, a := range srv.Actions() {
			if a.Get("Action") == "Login" {
				n++
			}
		}
		return n >= 2
	})
	if err := tr.Health(ctx); err == nil || !strings.Contains(err.Error(), "authentication") {
		t.Errorf("health %v, want the refused login", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	if strings.Contains(logs.String(), testSecret) {
		t.Errorf("the log shows the secret:\n%s", logs.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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
