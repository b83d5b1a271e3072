package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/ssetest"
)

// streamHeartbeat is the heartbeat of the servers these tests start: short, so that a revoked
// key's stream ends quickly.
const streamHeartbeat = 250 * time.Millisecond

// withBroker makes the pipeline publish to the server's own broker (the harness records popups
// instead by default) and shortens the heartbeat.
func withBroker(c *config.Config, o *server.Options) {
	o.Publisher = nil
	c.Popups.Heartbeat = streamHeartbeat
}

// popupStream is an open GET /api/v1/popups/stream.
type popupStream struct {
	t      *testing.T
	status int
	header http.Header
	body   []byte // the failure body, when status is not 200
	events chan ssetest.Event
	close  func()
}

// stream opens the popup stream with the key's headers and the query ("" or "?locations=...").
func (e *env) stream(clientID, secret, query string) *popupStream {
	e.t.Helper()
	return e.streamWith(clientID, secret, query, "")
}

// streamWith is stream sending lastEventID, when not "", as the Last-Event-ID header.
func (e *env) streamWith(clientID, secret, query, lastEventID string) *popupStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", e.base+"/api/v1/popups/stream"+query, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	req.Header.Set("Client-ID", clientID)
	req.Header.Set("Client-Secret", secret)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		cancel()
		e.t.Fatalf("open stream: %v", err)
	}
	s := &popupStream{t: e.t, status: resp.StatusCode, header: resp.Header, events: make(chan ssetest.Event, 64),
		close: func() { cancel(); resp.Body.Close() }}
	e.t.Cleanup(s.close)
	if resp.Header.Get("X-Trace-ID") == "" {
		e.t.Errorf("stream answered %d without X-Trace-ID", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		s.body, _ = io.ReadAll(resp.Body)
		close(s.events)
		return s
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Errorf("Content-Type %q", ct)
	}
	go ssetest.Read(resp.Body, s.events)
	return s
}

// next returns the next event that is not a comment, failing after 10 seconds.
func (s *popupStream) next() ssetest.Event {
	s.t.Helper()
	return s.await("event", func(ev ssetest.Event) bool { return ev.Comment == "" })
}

// await returns the first event or comment that match accepts, skipping the others, failing
// when the stream ends or after 10 seconds without one; want names it in the failure.
func (s *popupStream) await(want string, match func(ssetest.Event) bool) ssetest.Event {
	s.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				s.t.Fatal("the stream ended")
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			s.t.Fatalf("no %s within 10s", want)
		}
	}
}

// popup returns the next event, which must be a popup.
func (s *popupStream) popup() popup.Popup {
	s.t.Helper()
	ev := s.next()
	if ev.Event != "popup" {
		s.t.Fatalf("got %+v, want a popup", ev)
	}
	var p popup.Popup
	if err := json.Unmarshal([]byte(ev.Data), &p); err != nil {
		s.t.Fatalf("popup data: %v: %s", err, ev.Data)
	}
	if ev.ID != p.ID {
		t := s.t
		t.Errorf("id: field %q, popup id %q", ev.ID, p.ID)
	}
	return p
}

// ready waits for the ready event.
func (s *popupStream) ready() {
	s.t.Helper()
	if s.status != http.StatusOK {
		s.t.Fatalf("stream answered %d: %s", s.status, s.body)
	}
	if ev := s.next(); ev.Event != "ready" {
		s.t.Fatalf("first event %+v, want ready", ev)
	}
}

// settled waits for a heartbeat comment, failing on any event before it and after 10 seconds.
// The server starts its heartbeats only once it has written the stream's replay, so a popup
// published after settled returns reaches the stream live, never by the replay.
func (s *popupStream) settled() {
	s.t.Helper()
	s.await("heartbeat", func(ev ssetest.Event) bool {
		if ev.Comment == "" {
			s.t.Fatalf("unexpected event %+v before a heartbeat", ev)
		}
		return strings.HasPrefix(ev.Comment, "heartbeat")
	})
}

// quiet fails if anything but comments arrives within d.
func (s *popupStream) quiet(d time.Duration) {
	s.t.Helper()
	timeout := time.After(d)
	for {
		select {
		case ev, ok := <-s.events:
			if ok && ev.Comment == "" {
				s.t.Errorf("unexpected event %+v", ev)
			}
			if !ok {
				return
			}
		case <-timeout:
			return
		}
	}
}

func TestPopupStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t), withBroker)
		deskID, deskSecret := e.newKey(e.org, nil, auth.ScopePopupsRead)
		other := e.newOrg("Hillside Clinic")
		otherDeskID, otherDeskSecret := e.newKey(other, nil, auth.ScopePopupsRead)
		otherRepID, otherRepSecret := e.newKey(other, nil, auth.ScopeCallsEvents)

		desk := e.stream(deskID, deskSecret, "?locations=front,main")
		desk.ready()
		back := e.stream(deskID, deskSecret, "?locations=back")
		back.ready()
		theirs := e.stream(otherDeskID, otherDeskSecret, "?locations=front,main")
		theirs.ready()

		// The other organization rings first, on the same location: only its own desk sees it.
		r := e.postAs(otherRepID, otherRepSecret, ev("call_received", "theirs", 0, `,"locations":["front"]`))
		if r.status != http.StatusCreated {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		if p := theirs.popup(); p.ProviderCallID != "theirs" || p.OrgID != other {
			t.Errorf("their desk got %+v", p)
		}
		r = e.post(ev("call_received", "ours", 0, `,"locations":["front","main"]`))
		if r.status != http.StatusCreated {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		p := desk.popup()
		if p.ProviderCallID != "ours" || p.OrgID != e.org || p.CallID != r.body.Calls[0].ID ||
			p.From == nil || p.From.Number != "+442071234567" || p.TraceID != r.header.Get("X-Trace-ID") {
			t.Errorf("our desk got %+v", p)
		}
		// Named by both of its locations, it came once; the next event is the next call.
		e.post(ev("call_received", "ours-2", 0, `,"locations":["main"]`))
		if p := desk.popup(); p.ProviderCallID != "ours-2" {
			t.Errorf("then got %s, want ours-2", p.ProviderCallID)
		}
		// Events other than call_received ring nobody.
		e.post(ev("call_answered", "ours", 1, `,"locations":["front"]`))
		desk.quiet(3 * streamHeartbeat)
		back.quiet(0)
		theirs.quiet(0)
	})
}

func TestPopupStreamRefusals(t *testing.T) {
	e := start(t, backends()[0].db(t), withBroker)
	deskID, deskSecret := e.newKey(e.org, nil, auth.ScopePopupsRead)
	opID, opSecret := e.newKey("", nil, auth.ScopePopupsRead)
	past := time.Now().Add(-time.Minute)
	expID, expSecret := e.newKey(e.org, &past, auth.ScopePopupsRead)
	for _, tt := range []struct {
		name, id, secret, query string
		want                    int
	}{
		{"events key", e.clientID, e.secret, "", http.StatusForbidden},
		{"operator key", opID, opSecret, "", http.StatusForbidden},
		{"expired key", expID, expSecret, "", http.StatusUnauthorized},
		{"wrong secret", deskID, e.secret, "", http.StatusUnauthorized},
		{"bad locations", deskID, deskSecret, "?locations=front,Main", http.StatusBadRequest},
		{"empty locations", deskID, deskSecret, "?locations=", http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := e.stream(tt.id, tt.secret, tt.query)
			if s.status != tt.want {
				t.Fatalf("status %d, want %d: %s", s.status, tt.want, s.body)
			}
			var f struct {
				Success *bool  `json:"success"`
				Error   string `json:"error"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(s.body, &f); err != nil || f.Success == nil || *f.Success || f.Error == "" || f.Message == "" {
				t.Errorf("not the failure body: %s", s.body)
			}
		})
	}
}

func TestPopupStreamEndsWhenKeyRevoked(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t), withBroker)
		deskID, deskSecret := e.newKey(e.org, nil, auth.ScopePopupsRead)
		s := e.stream(deskID, deskSecret, "")
		s.ready()
		if err := e.st.RevokeKey(t.Context(), deskID, time.Now().UTC()); err != nil {
			t.Fatal(err)
		}
		revoked := time.Now()
		var last ssetest.Event
		for ev := range s.events {
			if ev.Comment == "" {
				last = ev
			}
			if time.Since(revoked) > 10*time.Second {
				t.Fatal("stream still open 10s after the key was revoked")
			}
		}
		// The key is re-read every heartbeat: the stream ends within one (plus the store read).
		if took := time.Since(revoked); took > streamHeartbeat+2*time.Second {
			t.Errorf("stream ended %v after revocation", took)
		}
		if last.Event != "error" || !strings.Contains(last.Data, "401 Unauthorized") {
			t.Errorf("last event %+v, want the 401 failure body", last)
		}
		if again := e.stream(deskID, deskSecret, ""); again.status != http.StatusUnauthorized {
			t.Errorf("reconnect answered %d, want 401", again.status)
		}
	})
}

// TestPopupStreamAcrossReplicas: with Redis, a call reported to one replica rings a desk whose
// stream is open on another.
func TestPopupStreamAcrossReplicas(t *testing.T) {
	redisURL := popuptest.RedisURL(t)
	st := openStore(t, backends()[0])
	cfg := config.Defaults()
	cfg.Broker.Redis.URL = redisURL
	cfg.Popups.Heartbeat = streamHeartbeat
	_, a := replica(t, st, cfg, server.Options{}, "", "", "")
	_, b := replica(t, st, cfg, server.Options{}, a.org, a.clientID, a.secret)
	deskID, deskSecret := a.newKey(a.org, nil, auth.ScopePopupsRead)
	s := b.stream(deskID, deskSecret, "?locations=front")
	s.ready()
	r := a.post(ev("call_received", "cross-replica", 0, `,"locations":["front"]`))
	if r.status != http.StatusCreated {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	if p := s.popup(); p.ProviderCallID != "cross-replica" || p.OrgID != a.org || p.CallID != r.body.Calls[0].ID {
		t.Errorf("replica B's desk got %+v", p)
	}
}

func TestCallbacksStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t), withBroker)
		if _, ok := e.st.(store.CallbackStore); !ok {
			t.Skipf("SKIPPED: the %s store does not implement store.CallbackStore", b.name)
		}
		deskID, deskSecret := e.newKey(e.org, nil, auth.ScopePopupsRead, auth.ScopeCallsRead, auth.ScopeCallbacksWrite)
		popupsOnlyID, popupsOnlySecret := e.newKey(e.org, nil, auth.ScopePopupsRead)
		other := e.newOrg("Hillside Clinic")
		otherID, otherSecret := e.newKey(other, nil, auth.ScopePopupsRead, auth.ScopeCallsRead)

		// A desk of another location hears of the list too: it is the organization's.
		desk := e.stream(deskID, deskSecret, "?locations=back")
		if ev := desk.next(); ev.Event != "ready" || !strings.Contains(ev.Data, `"scopes":["org.callbacks.write","org.calls.read","org.popups.read"]`) {
			t.Fatalf("first event %+v, want ready naming the key's scopes", ev)
		}
		popupsOnly := e.stream(popupsOnlyID, popupsOnlySecret, "?locations=back")
		popupsOnly.ready()
		theirs := e.stream(otherID, otherSecret, "?locations=back")
		theirs.ready()

		expectNotice := func(what string) {
			t.Helper()
			ev := desk.next()
			if ev.Event != "callbacks" || ev.Data != `{"reread":"/api/v1/callbacks"}` || ev.ID != "" {
				t.Fatalf("%s: got %+v, want a callbacks event", what, ev)
			}
		}
		// A missed call opens an item: one notice for the write of its two events.
		r := e.post(batch(historyEvent("call_received", "missed", "inbound", 1, "2026-07-01T09:00:00Z", ""),
			historyEvent("call_missed", "missed", "inbound", 2, "2026-07-01T09:00:20Z", "")))
		if r.status != http.StatusCreated {
			t.Fatalf("post: %d %s", r.status, r.raw)
		}
		expectNotice("a missed call")
		// A call from an extension to an extension cannot change the list: no notice.
		r = e.post(`{"type":"call_placed","providerCallId":"internal","occurredAt":"2026-07-01T09:05:00Z",
			"call":{"direction":"internal","from":{"kind":"extension","extension":"201"},"to":{"kind":"extension","extension":"202"}}}`)
		if r.status != http.StatusCreated {
			t.Fatalf("post: %d %s", r.status, r.raw)
		}
		// A dismissal closes the item: another notice, and the internal call sent none before it.
		r = e.do("POST", "/api/v1/callbacks/%2B15550100111/dismiss", "", "Client-ID", deskID, "Client-Secret", deskSecret)
		if r.status != http.StatusOK {
			t.Fatalf("dismiss: %d %s", r.status, r.raw)
		}
		expectNotice("a dismissal")
		desk.quiet(300 * time.Millisecond)
		// A key that cannot read the list is not told, nor is another organization.
		popupsOnly.quiet(100 * time.Millisecond)
		theirs.quiet(100 * time.Millisecond)
	})
}
