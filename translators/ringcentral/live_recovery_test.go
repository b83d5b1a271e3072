package ringcentral

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testclock"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
)

// The recovery these tests expect is RingCentral's "Recovering a WebSocket session"
// (https://developers.ringcentral.com/guide/notifications/websockets/session-recovery; source
// ringcentral/ringcentral-api-docs docs/notifications/websockets/session-recovery.md): within
// the recovery window a reconnect names the session's context token (wsc) and, when the gateway
// answers recoveryState "Successful", keeps its subscription and gets the notifications sent
// meanwhile; when it answers "Failed", the session's subscriptions are made anew on the same
// connection and the notifications of the gap are lost. RingCentral's own clients do the same
// (ringcentral/ringcentral-extensible packages/extensions/ws/src/index.ts, MIT: wsc=<token> only
// within recoveryTimeout of the loss, subscribe again when recoveryState is "Failed"). The fake
// gateway's side is described in fake_test.go.

// logBuffer is a log the test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// liveRun is one run's live path and call-log poll against f, sharing one sign-in, with the live
// path's clock the test's.
type liveRun struct {
	rec   *recorder
	log   *logBuffer
	clock *testclock.Clock
	poll  *poller
}

// startLive starts the live path of a run against f; it stops when the test ends.
func startLive(t *testing.T, f *fakeRC) *liveRun {
	t.Helper()
	lr := &liveRun{rec: &recorder{}, log: &logBuffer{}, clock: testclock.New(time.Now())}
	logger := slog.New(slog.NewTextHandler(lr.log, nil))
	a := &auth{server: f.srv.URL, clientID: "client-id", secrets: Secrets{ClientSecret: "client-secret", JWT: "the-jwt"}, hc: f.srv.Client(), now: time.Now}
	em := &emitter{out: lr.rec, log: logger}
	cs := newCalls(testPlan(t), DefaultProvider, time.Hour)
	ended := &endedSet{m: map[string]time.Time{}, keep: time.Hour}
	l := &live{api: &client{server: f.srv.URL, auth: a, hc: f.srv.Client()}, calls: cs, ended: ended, emit: em.emit, log: logger,
		now: lr.clock.Now, health: func(error) {}}
	lr.poll = &poller{api: &client{server: f.srv.URL, auth: a, hc: f.srv.Client()}, calls: cs, ended: ended, emit: em.emit, log: logger,
		path: filepath.Join(t.TempDir(), "cursor.json"), overlap: 10 * time.Minute, lookback: time.Hour, now: time.Now, sleep: noSleep}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- l.run(ctx) }()
	t.Cleanup(func() {
		f.releaseSockets()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("live path: %v", err)
		}
	})
	return lr
}

// dropInGap drops the socket, with new connections held, and waits until the dropped socket's
// server side is gone: what is pushed until f.releaseSockets is sent while the client has no
// connection.
func dropInGap(t *testing.T, f *fakeRC) {
	t.Helper()
	f.holdSockets()
	f.dropSockets()
	testwait.Until(t, 20*time.Second, "the dropped socket gone", func() bool { _, _, sockets, _ := f.counts(); return sockets == 0 })
}

// TestLiveRecovery drops the socket in the middle of a call and sends the rest of the call while
// the client has no connection; the client reconnects within the recovery window naming its
// session, the gateway recovers it and delivers what it kept. The call's events are exactly the
// scenario's (none lost, none twice), on the one subscription.
func TestLiveRecovery(t *testing.T) {
	f := newFakeRC(t)
	lr := startLive(t, f)
	testwait.Until(t, 20*time.Second, "the subscription", func() bool { s, _, _, _ := f.counts(); return s == 1 })
	notes := scenario(t, "hold")
	pushAll(f, notes[:3]) // setup, answered, hold
	lr.rec.waitFor(t, 3, 10*time.Second)

	dropInGap(t, f)
	lr.clock.Advance(time.Minute) // within the window of 180 s the gateway gave
	pushAll(f, notes[3:])         // the rest of the call, the end included, during the gap
	f.releaseSockets()
	waitForEnd(t, lr.rec, holdCall)
	pushAll(f, scenario(t, "normal_call"))
	waitForEnd(t, lr.rec, normalCall)

	matchGolden(t, "hold", eventsOf(lr.rec.events(), holdCall))
	matchGolden(t, "normal_call", eventsOf(lr.rec.events(), normalCall))
	if subscribed, wsTokens, _, _ := f.counts(); subscribed != 1 || wsTokens != 2 {
		t.Errorf("%d subscriptions, %d WebSocket tokens, want the one subscription, recovered, and a token per socket", subscribed, wsTokens)
	}
	if got, want := f.wscNamed(), []string{"", "wsc-1"}; !slices.Equal(got, want) {
		t.Errorf("the connections named the session contexts %q, want %q", got, want)
	}
	if f.recoveries() != 1 {
		t.Errorf("%d sessions recovered, want 1", f.recoveries())
	}
	if !strings.Contains(lr.log.String(), "WebSocket session recovered") {
		t.Errorf("no log of the recovery:\n%s", lr.log.String())
	}
}

// TestLiveRecoveryFails drops the socket in the middle of a call, sends the rest of the call
// while the client has no connection, and lets the recovery fail: the gateway answers
// recoveryState "Failed", or cannot read the context token (WSG-400, connection closed), or the
// client comes back after the recovery window and does not ask. The client subscribes anew and
// says in its log that the call-log poll covers the gap; what was sent during the gap is lost,
// and the poll ends the call from its call-log record. Calls after it come live on the new
// subscription.
func TestLiveRecoveryFails(t *testing.T) {
	tests := []struct {
		name  string
		fail  func(*fakeRC, *liveRun)
		named []string // the context tokens the connections named, in order
		log   string   // what the log says of the failure
	}{
		{"the gateway answers Failed (WSG-1003, a context of another OAuth session)", func(f *fakeRC, lr *liveRun) {
			f.mu.Lock()
			f.refuseRecovery = "WSG-1003"
			f.mu.Unlock()
			lr.clock.Advance(time.Minute)
		}, []string{"", "wsc-1"}, "WebSocket session not recovered; subscribing anew (the call-log poll covers what was sent while the socket was down)\" recovery_state=Failed recovery_error=WSG-1003"},
		{"the gateway cannot read the context token (WSG-400)", func(f *fakeRC, lr *liveRun) {
			f.mu.Lock()
			clear(f.gwSessions)
			f.mu.Unlock()
			lr.clock.Advance(time.Minute)
		}, []string{"", "wsc-1", ""}, "the gateway refused the WebSocket session's context token; the next connection subscribes anew (the call-log poll covers what was sent while the socket was down)\" error=\"ringcentral: WebSocket gateway: HTTP 500 WSG-400"},
		{"the recovery window has passed", func(f *fakeRC, lr *liveRun) {
			lr.clock.Advance(181 * time.Second)
		}, []string{"", ""}, "the WebSocket session's recovery window has passed; subscribing anew (the call-log poll covers what was sent while the socket was down)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRC(t)
			lr := startLive(t, f)
			testwait.Until(t, 20*time.Second, "the subscription", func() bool { s, _, _, _ := f.counts(); return s == 1 })
			notes := scenario(t, "hold")
			pushAll(f, notes[:3]) // setup, answered, hold
			lr.rec.waitFor(t, 3, 10*time.Second)

			dropInGap(t, f)
			tt.fail(f, lr)
			pushAll(f, notes[3:]) // the rest of the call, lost with the session
			f.releaseSockets()
			testwait.Until(t, 20*time.Second, "the new subscription", func() bool { s, _, _, _ := f.counts(); return s == 2 })

			// The call log has the call; the poll ends it.
			first := notes[0]
			ev, _, err := decodeSessionEvent(first)
			if err != nil {
				t.Fatal(err)
			}
			f.setPages([]callLogRecord{logRecord(holdCall, "Inbound", "Accepted", ev.at, 95, time.Now())})
			if _, err := lr.poll.pollOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			pushAll(f, scenario(t, "normal_call"))
			waitForEnd(t, lr.rec, normalCall)

			var got []string
			for _, e := range eventsOf(lr.rec.events(), holdCall) {
				got = append(got, string(e.Type)+" "+e.ProviderEventID)
			}
			want := []string{"call_received rc-received", "call_answered rc-answered", "call_hold " + holdEventID(t, lr.rec), "call_ended rc-ended"}
			if !slices.Equal(got, want) {
				t.Errorf("the call's events %q, want %q: the gap's notifications lost, the end from the call log", got, want)
			}
			if e := lastOf(lr.rec.events(), holdCall); e.Disposition != event.DispositionAnswered {
				t.Errorf("the call ended %q, want answered", e.Disposition)
			}
			matchGolden(t, "normal_call", eventsOf(lr.rec.events(), normalCall))
			if got := f.wscNamed(); !slices.Equal(got, tt.named) {
				t.Errorf("the connections named the session contexts %q, want %q", got, tt.named)
			}
			if f.recoveries() != 0 {
				t.Errorf("%d sessions recovered, want none", f.recoveries())
			}
			if !strings.Contains(lr.log.String(), tt.log) {
				t.Errorf("the log does not say %q:\n%s", tt.log, lr.log.String())
			}
		})
	}
}

// holdEventID is the id of the first call_hold rec took.
func holdEventID(t *testing.T, rec *recorder) string {
	t.Helper()
	for _, e := range rec.events() {
		if e.Type == event.CallHold {
			return e.ProviderEventID
		}
	}
	t.Fatal("no call_hold")
	return ""
}

// lastOf is the last event of call among evs.
func lastOf(evs []event.Event, call string) event.Event {
	got := eventsOf(evs, call)
	if len(got) == 0 {
		return event.Event{}
	}
	return got[len(got)-1]
}

// TestGatewaySession checks which session context the live path keeps and when it asks to
// recover: a ConnectionDetails' context always replaces the one kept (it opens or recovers a
// session), another message's only when its sequence is newer (as RingCentral's clients do:
// ringcentral/ringcentral-extensible packages/extensions/ws/src/index.ts, MIT); recovery only
// with a subscription, within the window after the loss.
func TestGatewaySession(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	up := gwSession{wsc: wscToken{Token: "wsc-1", Sequence: 5}, window: 180 * time.Second, subID: "sub-1"}
	lost := up
	lost.lostAt = t0
	tests := []struct {
		name    string
		g       gwSession
		meta    wsMeta
		want    wscToken
		at      time.Time
		recover bool
	}{
		{"a first context is kept", gwSession{}, wsMeta{Type: msgConnectionDetails, WSC: &wscToken{"wsc-1", 1}}, wscToken{"wsc-1", 1}, t0, false},
		{"a ConnectionDetails replaces it, whatever its sequence", up, wsMeta{Type: msgConnectionDetails, WSC: &wscToken{"wsc-2", 1}}, wscToken{"wsc-2", 1}, t0, false},
		{"a newer sequence on another message replaces it", up, wsMeta{Type: msgServerNotification, WSC: &wscToken{"wsc-1", 6}}, wscToken{"wsc-1", 6}, t0, false},
		{"an older one does not", up, wsMeta{Type: msgServerNotification, WSC: &wscToken{"wsc-0", 4}}, wscToken{"wsc-1", 5}, t0, false},
		{"an empty token does not", up, wsMeta{Type: msgConnectionDetails, WSC: &wscToken{"", 9}}, wscToken{"wsc-1", 5}, t0, false},
		{"lost, within the window: recover", lost, wsMeta{Type: msgHeartbeat}, wscToken{"wsc-1", 5}, t0.Add(179 * time.Second), true},
		{"lost, the window passed: do not", lost, wsMeta{Type: msgHeartbeat}, wscToken{"wsc-1", 5}, t0.Add(180 * time.Second), false},
		{"lost without a subscription: do not", func() gwSession { g := lost; g.subID = ""; return g }(), wsMeta{Type: msgHeartbeat}, wscToken{"wsc-1", 5}, t0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.g
			g.take(tt.meta)
			if g.wsc != tt.want {
				t.Errorf("kept %+v, want %+v", g.wsc, tt.want)
			}
			if got := g.recoverable(tt.at); got != tt.recover {
				t.Errorf("recoverable %t, want %t", got, tt.recover)
			}
		})
	}
}

// FuzzGatewaySession feeds arbitrary gateway messages to what reads the session context and the
// ConnectionDetails: no input may panic, and a context kept always has a token.
func FuzzGatewaySession(f *testing.F) {
	f.Add([]byte(`[{"type":"ConnectionDetails","messageId":"1","status":200,"wsc":{"token":"wsc-1","sequence":2}},{"recoveryState":"Successful","recoveryTimeout":180}]`))
	f.Add([]byte(`[{"type":"ConnectionDetails","messageId":"1","wsc":{"token":7}},{"recoveryTimeout":"x"}]`))
	f.Add([]byte(`[{"type":"Error","messageId":"e","status":400},{"errorCode":"WSG-400","message":"Malformed WebSocket session context token"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		meta, body, err := decodeMessage(b)
		if err != nil {
			return
		}
		var g gwSession
		g.take(meta)
		if g.wsc.Sequence != 0 && g.wsc.Token == "" {
			t.Fatalf("kept a context without a token: %+v", g.wsc)
		}
		var d connectionDetails
		_ = json.Unmarshal(body, &d)
		_ = g.recoverable(time.Now())
	})
}
