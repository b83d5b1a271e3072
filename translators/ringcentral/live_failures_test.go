package ringcentral

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testclock"
	"github.com/callwire/callwire/internal/testwait"
)

// holdCall is the telephony session of the hold scenario: the call in progress when something
// goes wrong in these tests.
const holdCall = "s-a0d7e4d8b7a7fz1885c9bd8e8ez0004"

// TestLiveTokenExpiry lets the access token expire in the middle of a call while the WebSocket
// stays up. The socket needs no access token once connected, so the call's notifications keep
// coming on the same connection; the next REST request (the call-log poll of the same run)
// renews the token, by the refresh token while it is valid and by a new JWT sign-in when it is
// not. The call's events are exactly the scenario's: none lost, none twice.
func TestLiveTokenExpiry(t *testing.T) {
	tests := []struct {
		name   string
		expire func(*fakeRC, *testclock.Clock)
		grants []string // the OAuth grants, in order
	}{
		{"the access token's lifetime passes", func(f *fakeRC, c *testclock.Clock) {
			c.Advance(time.Hour)
			f.revokeTokens()
		}, []string{jwtGrant, "refresh_token"}},
		{"RingCentral refuses the access token before its time", func(f *fakeRC, _ *testclock.Clock) {
			f.revokeTokens()
		}, []string{jwtGrant, "refresh_token"}},
		{"the refresh token's lifetime has passed too", func(f *fakeRC, c *testclock.Clock) {
			c.Advance(8 * 24 * time.Hour)
			f.revokeTokens()
			f.revokeRefreshTokens()
		}, []string{jwtGrant, jwtGrant}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRC(t)
			// One run's live path and poll, sharing one sign-in whose clock the test moves.
			clock := testclock.New(time.Now())
			a := &auth{server: f.srv.URL, clientID: "client-id", secrets: Secrets{ClientSecret: "client-secret", JWT: "the-jwt"}, hc: f.srv.Client(), now: clock.Now}
			rec := &recorder{}
			em := &emitter{out: rec, log: quiet()}
			cs := newCalls(testPlan(t), DefaultProvider, time.Hour)
			ended := &endedSet{m: map[string]time.Time{}, keep: time.Hour}
			l := &live{api: &client{server: f.srv.URL, auth: a, hc: f.srv.Client()}, calls: cs, ended: ended, emit: em.emit, log: quiet(),
				now: time.Now, health: func(error) {}}
			p := &poller{api: &client{server: f.srv.URL, auth: a, hc: f.srv.Client()}, calls: cs, ended: ended, emit: em.emit, log: quiet(),
				path: filepath.Join(t.TempDir(), "cursor.json"), overlap: 10 * time.Minute, lookback: time.Hour, now: time.Now,
				sleep: func(context.Context, time.Duration) error { return nil }}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- l.run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("live path: %v", err)
				}
			}()

			testwait.Until(t, 20*time.Second, "the subscription", func() bool { s, _, _, _ := f.counts(); return s == 1 })
			notes := scenario(t, "hold")
			pushAll(f, notes[:3]) // setup, answered, hold
			rec.waitFor(t, 3, 10*time.Second)
			tt.expire(f, clock)
			if _, err := p.pollOnce(ctx); err != nil {
				t.Fatalf("the poll after the token expired: %v", err)
			}
			pushAll(f, notes[3:])
			pushAll(f, scenario(t, "normal_call"))
			waitForEnd(t, rec, normalCall)

			matchGolden(t, "hold", eventsOf(rec.events(), holdCall))
			subscribed, wsTokens, _, grants := f.counts()
			if subscribed != 1 || wsTokens != 1 {
				t.Errorf("%d subscriptions, %d WebSocket tokens: the socket was replaced, want it kept", subscribed, wsTokens)
			}
			if !slices.Equal(grants, tt.grants) {
				t.Errorf("grants %v, want %v", grants, tt.grants)
			}
		})
	}
}

// TestLiveSocketDrop drops the WebSocket in the middle of a call while the access token is valid:
// the translator gets a new WebSocket token with the token it has (no new sign-in, no refresh),
// connects naming its session's context token, the gateway recovers the session (its
// subscription kept, none made anew), and the call's later notifications arrive on the new
// socket. Whether the gateway sends only what follows or the call again from its start, the
// call's events are exactly the scenario's: none lost, none twice.
func TestLiveSocketDrop(t *testing.T) {
	tests := []struct {
		name  string
		again func([]json.RawMessage) []json.RawMessage // what the gateway sends on the new socket
	}{
		{"the gateway sends what follows", func(n []json.RawMessage) []json.RawMessage { return n[3:] }},
		{"the gateway sends the call again from its start", func(n []json.RawMessage) []json.RawMessage { return n }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRC(t)
			rec := &recorder{}
			stop := run(t, config(f, t.TempDir(), true), rec)
			testwait.Until(t, 20*time.Second, "the subscription", func() bool { s, _, _, _ := f.counts(); return s == 1 })
			notes := scenario(t, "hold")
			pushAll(f, notes[:3]) // setup, answered, hold
			rec.waitFor(t, 3, 10*time.Second)

			f.dropSockets()
			// The session recovered on a new socket, and the dropped socket's server side gone
			// (so that nothing pushed now can go to it).
			testwait.Until(t, 20*time.Second, "the session recovered on a new socket", func() bool {
				_, _, sockets, _ := f.counts()
				return f.recoveries() == 1 && sockets == 1
			})
			pushAll(f, tt.again(notes))
			pushAll(f, scenario(t, "normal_call"))
			waitForEnd(t, rec, normalCall)
			if err := stop(); err != nil {
				t.Fatal(err)
			}

			matchGolden(t, "hold", eventsOf(rec.events(), holdCall))
			subscribed, wsTokens, _, grants := f.counts()
			if subscribed != 1 || wsTokens != 2 {
				t.Errorf("%d subscriptions, %d WebSocket tokens, want 1 subscription (recovered) and a token per socket", subscribed, wsTokens)
			}
			if !slices.Equal(grants, []string{jwtGrant}) {
				t.Errorf("grants %v, want the one sign-in: the token was valid", grants)
			}
		})
	}
}

// TestAnswerError reads the failures the gateway reports, in an answer to a ClientRequest or in
// an Error message, the same way: RingCentral's errorCode and message when the body has them
// (the shape of its REST errors, which the gateway passes on), else the body itself, cut short.
func TestAnswerError(t *testing.T) {
	long := `"` + strings.Repeat("x", 300) + `"`
	tests := []struct {
		name, body, code, message string
	}{
		{"code and message", `{"errorCode":"SUB-406","message":"Subscription not found"}`, "SUB-406", "Subscription not found"},
		{"a message only", `{"message":"Internal error"}`, "", "Internal error"},
		{"neither: the body", `{"status":"down"}`, "", `{"status":"down"}`},
		{"not JSON: the body", `gateway down`, "", "gateway down"},
		{"a long body, cut to 200 bytes", long, "", long[:200]},
		{"no body", ``, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := answerError("subscribe", wsMeta{Status: 404}, json.RawMessage(tt.body))
			if e.Op != "subscribe" || e.Status != 404 || e.Code != tt.code || e.Message != tt.message {
				t.Errorf("got %+v, want code %q message %q", e, tt.code, tt.message)
			}
		})
	}
}
