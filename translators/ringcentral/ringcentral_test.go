package ringcentral

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator/translatortest"
	"github.com/callwire/callwire/translators/numbering"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func testPlan(t testing.TB) *numbering.Plan {
	t.Helper()
	p, err := numbering.New(numbering.Config{DefaultCountry: "US", Numbers: []string{"+16505550100"},
		Locations: map[string][]string{"+16505550100": {"front-desk"}}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// summary is one line per event: what the golden files hold.
func summary(e event.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s id=%s seq=%d at=%s dir=%s from=%s to=%s", e.Type, e.ProviderCallID, e.ProviderEventID,
		e.Sequence, e.OccurredAt.Format(time.RFC3339Nano), e.Call.Direction, partyText(e.Call.From), partyText(e.Call.To))
	if e.AnsweredBy != "" {
		fmt.Fprintf(&b, " answeredBy=%s", e.AnsweredBy)
	}
	if e.Disposition != "" {
		fmt.Fprintf(&b, " disposition=%s", e.Disposition)
	}
	if e.Duration != nil {
		fmt.Fprintf(&b, " duration=%g", *e.Duration)
	}
	if e.TalkTime != nil {
		fmt.Fprintf(&b, " talkTime=%g", *e.TalkTime)
	}
	if e.Released != nil {
		fmt.Fprintf(&b, " released=%t", *e.Released)
	}
	if e.Mode != "" {
		fmt.Fprintf(&b, " mode=%s", e.Mode)
	}
	if e.Type == event.CallTransferred {
		fmt.Fprintf(&b, " transferTo=%s", partyText(e.TransferTo))
	}
	if e.URL != "" {
		fmt.Fprintf(&b, " url=%s", e.URL)
	}
	if len(e.Locations) > 0 {
		fmt.Fprintf(&b, " locations=%s", strings.Join(e.Locations, ","))
	}
	return b.String()
}

func partyText(p *event.Party) string {
	if p == nil {
		return "-"
	}
	s := string(p.EffectiveKind()) + ":" + p.Number + p.URI
	if p.Extension != "" {
		s += "/ext" + p.Extension
	}
	return s
}

func golden(t *testing.T, name string, got []string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	text := strings.Join(got, "\n") + "\n"
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != text {
		t.Errorf("%s: events differ from the golden file\n got:\n%s\nwant:\n%s", name, text, want)
	}
}

// TestMapping runs each scenario's notifications through the mapping and compares the events
// with the golden files.
func TestMapping(t *testing.T) {
	for _, name := range []string{"normal_call", "missed_call", "transfer", "hold", "voicemail", "outbound",
		"inbound_answered", "inbound_rang_out", "inbound_voicemail", "internal_call", "outbound_answered"} {
		t.Run(name, func(t *testing.T) {
			cs := newCalls(testPlan(t), DefaultProvider, time.Hour)
			var got []string
			notes := scenario(t, name)
			// Every notification twice: a redelivery after a reconnect changes nothing.
			for _, n := range append(notes, notes...) {
				ev, ok, err := decodeSessionEvent(n)
				if err != nil || !ok {
					t.Fatalf("decode: ok=%v err=%v", ok, err)
				}
				for _, e := range cs.observe(ev, n, time.Now()) {
					if err := e.Validate(); err != nil {
						t.Errorf("invalid event %s: %v", e.Type, err)
					}
					got = append(got, summary(e))
				}
			}
			golden(t, name, got)
		})
	}
}

// TestParseConfig checks defaults and that every problem is reported at once.
func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	jwtFile := filepath.Join(dir, "jwt")
	if err := os.WriteFile(jwtFile, []byte("the-jwt\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvClientSecret, "")
	t.Setenv(EnvJWT, "")
	tests := []struct {
		name string
		raw  string
		errs []string
	}{
		{"minimal", `{"client_id":"id","client_secret":"s","jwt_file":"` + jwtFile + `","cursor_file":"c","default_country":"US"}`, nil},
		{"everything wrong", `{"server":"ftp://x","client_secret":"a","client_secret_file":"b","poll_interval":"1s","cursor_file":"","default_country":"XX","colour":1}`,
			[]string{"server:", "client_id:", "client_secret_file:", "jwt:", "poll_interval:", "cursor_file:", "default_country:", "colour"}},
		{"bad duration", `{"client_id":"id","client_secret":"s","jwt":"j","cursor_file":"c","default_country":"US","poll_overlap":"soon"}`, []string{`"soon" is not a duration`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(json.RawMessage(tt.raw))
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if c.Server != DefaultServer || c.Provider != "ringcentral" || time.Duration(c.PollInterval) != DefaultPollInterval || !*c.Live {
					t.Errorf("defaults not applied: %+v", c)
				}
				s, err := c.LoadSecrets()
				if err != nil || s.JWT != "the-jwt" {
					t.Errorf("secrets: %v", err)
				}
				if strings.Contains(c.String(), "\"s\"") || strings.Contains(fmt.Sprint(s), "the-jwt") {
					t.Errorf("a secret shows in %s / %v", c, s)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not mention %q:\n%v", want, err)
				}
			}
		})
	}
}

// recorder is an Emitter that keeps what it took; failN refuses that many calls first.
type recorder struct {
	mu    sync.Mutex
	evs   []event.Event
	failN int
}

func (r *recorder) Emit(_ context.Context, e event.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failN > 0 {
		r.failN--
		return errors.New("outbox full")
	}
	r.evs = append(r.evs, e)
	return nil
}

func (r *recorder) events() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.evs)
}

func (r *recorder) waitFor(t *testing.T, n int, d time.Duration) []event.Event {
	t.Helper()
	var evs []event.Event
	if testwait.Poll(d, func() bool { evs = r.events(); return len(evs) >= n }) {
		return evs
	}
	t.Fatalf("got %d events, want %d: %v", len(evs), n, types(evs))
	return nil
}

func types(evs []event.Event) []string {
	var s []string
	for _, e := range evs {
		s = append(s, string(e.Type)+"/"+e.ProviderEventID)
	}
	return s
}

func config(f *fakeRC, dir string, live bool) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"server":%q,"client_id":"client-id","client_secret":"client-secret","jwt":"the-jwt",
		"cursor_file":%q,"default_country":"US","numbers":["+16505550100"],"locations":{"+16505550100":["front-desk"]},"live":%t}`,
		f.srv.URL, filepath.Join(dir, "cursor.json"), live))
}

// run starts the translator and returns a function that stops it and returns Run's error.
func run(t *testing.T, cfg json.RawMessage, out *recorder) func() error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	done := make(chan error, 1)
	tr := &Translator{Logger: quiet()}
	go func() { done <- tr.Run(ctx, cfg, out) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context ended")
			return nil
		}
	}
}

func pushAll(f *fakeRC, notes []json.RawMessage) {
	for _, n := range notes {
		f.push <- n
	}
}

// TestLiveNormalCall runs a whole call through the fake gateway.
func TestLiveNormalCall(t *testing.T) {
	f := newFakeRC(t)
	out := &recorder{}
	stop := run(t, config(f, t.TempDir(), true), out)
	pushAll(f, scenario(t, "normal_call"))
	evs := out.waitFor(t, 3, 10*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := []event.Type{event.CallReceived, event.CallAnswered, event.CallEnded}
	if got := evs[:3]; !slices.EqualFunc(got, want, func(e event.Event, w event.Type) bool { return e.Type == w }) {
		t.Fatalf("events %v, want %v", types(evs), want)
	}
	for _, e := range evs {
		if e.ProviderCallID != "s-a0d7e4d8b7a7fz1885c9bd8e8ez0001" || e.Provider != "ringcentral" || e.Observer != event.ObserverPBXAPI {
			t.Errorf("event %s: ids %q %q %q", e.Type, e.ProviderCallID, e.Provider, e.Observer)
		}
		if !slices.Equal(e.Locations, []string{"front-desk"}) {
			t.Errorf("event %s: locations %v", e.Type, e.Locations)
		}
	}
	if evs[1].AnsweredBy != "101" {
		t.Errorf("answeredBy %q, want 101", evs[1].AnsweredBy)
	}
}

// TestLiveTokenExpiryAndDrop revokes the access token and drops the socket in the middle of a
// call: the translator renews its token, reconnects, recovers its WebSocket session (a refreshed
// token is still the same OAuth session, which the gateway recovers: Experiment 4 of
// tylerlong/rc-ws-recover-test README.md), and the call completes.
func TestLiveTokenExpiryAndDrop(t *testing.T) {
	f := newFakeRC(t)
	out := &recorder{}
	stop := run(t, config(f, t.TempDir(), true), out)
	// Subscribed first: the gateway may deliver notifications before it answers the
	// subscription, so the call's first events do not show that the subscription was counted.
	testwait.Until(t, 20*time.Second, "the subscription", func() bool { s, _, _, _ := f.counts(); return s == 1 })
	notes := scenario(t, "hold")
	pushAll(f, notes[:3]) // setup, answered, hold
	out.waitFor(t, 3, 10*time.Second)
	f.revokeTokens()
	f.dropSockets()
	// The rest of the call goes out once the translator is back: its token renewed and its
	// session recovered on a new socket (the reconnect backs off from 0.5 s, doubling, so a
	// loaded machine may take a few attempts).
	testwait.Until(t, 45*time.Second, "the translator to recover its session after its socket was dropped",
		func() bool { return f.recoveries() >= 1 })
	pushAll(f, notes[3:])
	// All seven of the scenario's events (received, answered, two holds and unholds, ended).
	evs := out.waitFor(t, 7, 15*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if evs[len(evs)-1].Type != event.CallEnded {
		t.Errorf("last event %s, want call_ended: %v", evs[len(evs)-1].Type, types(evs))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subscribed != 1 {
		t.Errorf("subscribed %d times, want the one subscription, recovered", f.subscribed)
	}
	if len(f.grants) < 2 {
		t.Errorf("token grants %v, want a renewal after the revocation", f.grants)
	}
}

// TestPoll reads the call log through a 429 and two pages, then polls again over the overlap.
func TestPoll(t *testing.T) {
	f := newFakeRC(t)
	f.pages = callLogPages(t)
	f.fail429 = 1
	dir := t.TempDir()
	out := &recorder{}
	var waits []time.Duration
	now := time.Date(2023, 6, 6, 10, 5, 0, 0, time.UTC)
	newPoller := func() *poller {
		a := &auth{server: f.srv.URL, clientID: "client-id", secrets: Secrets{ClientSecret: "client-secret", JWT: "the-jwt"}, hc: f.srv.Client(), now: time.Now}
		em := &emitter{out: out, log: quiet()}
		return &poller{api: &client{server: f.srv.URL, auth: a, hc: f.srv.Client()}, calls: newCalls(testPlan(t), DefaultProvider, time.Hour),
			ended: &endedSet{m: map[string]time.Time{}, keep: time.Hour}, emit: em.emit, log: quiet(),
			path: filepath.Join(dir, "cursor.json"), overlap: 10 * time.Minute, lookback: time.Hour, now: func() time.Time { return now },
			sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	}
	p := newPoller()
	// The agent refuses the first event: the poll fails and the cursor stays where it was.
	out.mu.Lock()
	out.failN = 1
	out.mu.Unlock()
	failing := &poller{}
	*failing = *p
	failing.emit = func(ctx context.Context, e event.Event) error { return out.Emit(ctx, e) }
	if _, err := failing.pollOnce(t.Context()); err == nil {
		t.Fatal("a refused event did not fail the poll")
	}
	if _, err := os.Stat(p.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cursor saved although an event was refused: %v", err)
	}
	if !slices.Contains(waits, time.Second) {
		t.Errorf("waits %v: Retry-After of 1s not honoured", waits)
	}

	n, err := p.pollOnce(t.Context())
	if err != nil || n != 4 {
		t.Fatalf("poll: %d records, %v", n, err)
	}
	var got []string
	for _, e := range out.events() {
		if err := e.Validate(); err != nil {
			t.Errorf("invalid %s: %v", e.Type, err)
		}
		got = append(got, summary(e))
	}
	golden(t, "call_log", got)
	c, ok, err := loadCursor(p.path)
	if err != nil || !ok || !c.Modified.Equal(time.Date(2023, 6, 6, 10, 1, 20, 0, time.UTC)) {
		t.Errorf("cursor %v %v %v, want the newest lastModifiedTime", c, ok, err)
	}

	// A second poll over the overlap, by the same poller, hands over nothing new; by a new
	// one (a restart), the same events with the same ids, which the core drops as duplicates.
	before := len(out.events())
	if _, err := p.pollOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	afterSame := out.events()[before:]
	for _, e := range afterSame {
		if e.Type != event.CallRecorded {
			t.Errorf("second poll emitted %s again", e.Type)
		}
	}
	first := map[string]bool{}
	for _, e := range out.events()[:before] {
		first[e.ProviderCallID+"/"+e.DedupeKey()] = true
	}
	mark := len(out.events())
	if _, err := newPoller().pollOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, e := range out.events()[mark:] {
		if !first[e.ProviderCallID+"/"+e.DedupeKey()] {
			t.Errorf("restarted poll emitted a new key %s/%s", e.ProviderCallID, e.DedupeKey())
		}
	}
}

// TestLiveAndPollShareIDs checks that the poll's call_ended of a call the live path reported
// carries the live path's dedupe key.
func TestLiveAndPollShareIDs(t *testing.T) {
	cs := newCalls(testPlan(t), DefaultProvider, time.Hour)
	var liveEnded event.Event
	for _, n := range scenario(t, "normal_call") {
		ev, _, _ := decodeSessionEvent(n)
		for _, e := range cs.observe(ev, n, time.Now()) {
			if e.Type == event.CallEnded {
				liveEnded = e
			}
		}
	}
	p := &poller{calls: cs, ended: &endedSet{m: map[string]time.Time{}}}
	evs := p.events(callLogPages(t)[0][0])
	if evs[0].Type != event.CallEnded || evs[0].ProviderCallID != liveEnded.ProviderCallID || evs[0].DedupeKey() != liveEnded.DedupeKey() {
		t.Fatalf("poll %s %s %s, live %s %s", evs[0].Type, evs[0].ProviderCallID, evs[0].DedupeKey(), liveEnded.ProviderCallID, liveEnded.DedupeKey())
	}
}

// TestSignInRefused: bad credentials end Run with a permanent error.
func TestSignInRefused(t *testing.T) {
	f := newFakeRC(t)
	cfg := strings.Replace(string(config(f, t.TempDir(), true)), "the-jwt", "wrong", 1)
	err := (&Translator{Logger: quiet()}).Run(t.Context(), json.RawMessage(cfg), &recorder{})
	if !IsPermanent(err) {
		t.Fatalf("Run: %v, want a permanent error", err)
	}
}

// TestContract is the translator contract check, on the live path.
func TestContract(t *testing.T) {
	f := newFakeRC(t)
	for _, name := range []string{"normal_call", "missed_call", "transfer", "voicemail"} {
		pushAll(f, scenario(t, name))
	}
	evs := translatortest.Check(t, New(), translatortest.Options{Config: config(f, t.TempDir(), true), Want: 13, RefuseFirst: true, Timeout: 20 * time.Second})
	if len(evs) != 13 {
		t.Errorf("%d events: %v", len(evs), types(evs))
	}
}

// TestSubscriptionRenewed: a subscription about to expire is renewed over the socket.
func TestSubscriptionRenewed(t *testing.T) {
	f := newFakeRC(t)
	f.subExpires = 1
	out := &recorder{}
	stop := run(t, config(f, t.TempDir(), true), out)
	renewed := testwait.Poll(10*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Contains(f.requests, "PUT /restapi/v1.0/subscription/b6d5bde8-f5c5-4e3b-a5c1-6f1f3d1c5f4a")
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !renewed {
		t.Fatalf("no renewal: %v", f.requests)
	}
}

func TestRetryable(t *testing.T) {
	for _, tt := range []struct {
		status int
		want   bool
	}{{0, true}, {429, true}, {503, true}, {500, true}, {400, false}, {401, false}, {403, false}, {404, false}} {
		if got := (&APIError{Status: tt.status}).Retryable(); got != tt.want {
			t.Errorf("status %d: retryable %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestRateLimitPace(t *testing.T) {
	for _, tt := range []struct {
		limit, remaining, window int
		want                     time.Duration
	}{
		{10, 9, 60, 0},
		{10, 5, 60, 10 * time.Second},
		{10, 1, 60, 30 * time.Second},
		{10, 0, 60, time.Minute},
		{0, 0, 0, 0},
	} {
		h := http.Header{}
		h.Set("X-Rate-Limit-Group", "heavy")
		h.Set("X-Rate-Limit-Limit", strconv.Itoa(tt.limit))
		h.Set("X-Rate-Limit-Remaining", strconv.Itoa(tt.remaining))
		h.Set("X-Rate-Limit-Window", strconv.Itoa(tt.window))
		rl, ok := readRateLimit(h)
		if !ok || rl.pace() != tt.want {
			t.Errorf("%+v: pace %v, want %v", tt, rl.pace(), tt.want)
		}
	}
}

// TestContractPoll is the translator contract check on the call-log path alone, from a saved
// cursor.
func TestContractPoll(t *testing.T) {
	f := newFakeRC(t)
	f.pages = callLogPages(t)
	dir := t.TempDir()
	if err := saveCursor(filepath.Join(dir, "cursor.json"), cursor{Modified: time.Date(2023, 6, 6, 10, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	evs := translatortest.Check(t, New(), translatortest.Options{Config: config(f, dir, false), Want: 7, RefuseFirst: true, Timeout: 20 * time.Second})
	if len(evs) != 7 {
		t.Errorf("%d events: %v", len(evs), types(evs))
	}
	c, ok, err := loadCursor(filepath.Join(dir, "cursor.json"))
	if err != nil || !ok || !c.Modified.Equal(time.Date(2023, 6, 6, 10, 1, 20, 0, time.UTC)) {
		t.Errorf("cursor %v %v %v after the poll", c, ok, err)
	}
}
