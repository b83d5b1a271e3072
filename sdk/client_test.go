package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/callwire/callwire/sdk"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/sdktest"
)

// script answers each request with the next of its replies (the last one repeats) and records
// what arrived.
type script struct {
	mu      sync.Mutex
	replies []reply
	got     []request
}

type reply struct {
	status int
	header map[string]string
	body   string
}

type request struct {
	at     time.Time
	header http.Header
	body   []byte
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got = append(s.got, request{at: time.Now(), header: r.Header.Clone(), body: b})
	rep := s.replies[min(len(s.got), len(s.replies))-1]
	s.mu.Unlock()
	w.Header().Set("X-Trace-ID", "trace-"+strconv.Itoa(len(s.got)))
	w.Header().Set("Content-Type", "application/json")
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

func (s *script) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.got...)
}

const okBody = `{"success":true,"calls":[{"id":"c1","providerCallId":"p1","created":true,"crmClients":[]}],"events":[{"id":"e1","type":"call_received","dedupeKey":"call_received:0","duplicate":false}]}`

func fail(status int, msg string) reply {
	return reply{status: status, body: fmt.Sprintf(`{"success":false,"error":"%d %s","message":%q}`, status, http.StatusText(status), msg)}
}

func newClient(t *testing.T, s *script, cred sdk.Credential, o sdk.Options) *sdk.Client {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Millisecond
	}
	c, err := sdk.New(srv.URL, cred, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newBubbleClient is newClient for a test in a synctest bubble: s answers in process.
func newBubbleClient(t *testing.T, s *script, cred sdk.Credential, o sdk.Options) *sdk.Client {
	t.Helper()
	o.HTTPClient = &http.Client{Transport: sdktest.InProcess(s)}
	if o.MinBackoff == 0 {
		o.MinBackoff = time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Millisecond
	}
	c, err := sdk.New("http://callwire.invalid", cred, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var cred = sdk.Credential{ClientID: "cwid_test", Secret: "cwsk_secret"}

func ringing(id string) event.Event {
	return event.New(event.CallReceived, id, time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC),
		event.Call{Direction: event.Inbound, From: event.E164("+442071234567")})
}

func TestSendOneSuccess(t *testing.T) {
	s := &script{replies: []reply{{status: 201, body: okBody}}}
	c := newClient(t, s, cred, sdk.Options{})
	r, err := c.SendOne(t.Context(), ringing("p1"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 201 || r.TraceID != "trace-1" || len(r.Calls) != 1 || !r.Calls[0].Created || r.Events[0].DedupeKey != "call_received:0" {
		t.Errorf("result %+v", r)
	}
	got := s.requests()[0]
	if got.header.Get("Client-ID") != "cwid_test" || got.header.Get("Client-Secret") != "cwsk_secret" || got.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", got.header)
	}
	var e map[string]any
	if err := json.Unmarshal(got.body, &e); err != nil || e["type"] != "call_received" {
		t.Errorf("body %s", got.body)
	}
}

func TestBearer(t *testing.T) {
	s := &script{replies: []reply{{status: 200, body: okBody}}}
	c := newClient(t, s, sdk.Credential{Secret: "cwsk_secret", Bearer: true}, sdk.Options{})
	if _, err := c.SendOne(t.Context(), ringing("p1")); err != nil {
		t.Fatal(err)
	}
	if h := s.requests()[0].header; h.Get("Authorization") != "Bearer cwsk_secret" || h.Get("Client-Secret") != "" {
		t.Errorf("headers %v", h)
	}
}

func TestRetriesResendTheIdenticalBody(t *testing.T) {
	s := &script{replies: []reply{fail(503, "busy"), fail(500, "oops"), fail(502, "gateway"), {status: 200, body: okBody}}}
	c := newClient(t, s, cred, sdk.Options{})
	if _, err := c.SendOne(t.Context(), ringing("p1")); err != nil {
		t.Fatal(err)
	}
	got := s.requests()
	if len(got) != 4 {
		t.Fatalf("%d attempts, want 4", len(got))
	}
	for _, g := range got[1:] {
		if !bytes.Equal(g.body, got[0].body) {
			t.Errorf("a retry changed the body:\n%s\n%s", got[0].body, g.body)
		}
	}
}

// TestRetryAfterIsHonoured runs in a synctest bubble: the client waits on the bubble's clock,
// so the second of Retry-After costs no time.
func TestRetryAfterIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{replies: []reply{{status: 503, header: map[string]string{"Retry-After": "1"}, body: `{"success":false,"error":"503 Service Unavailable","message":"later"}`}, {status: 200, body: okBody}}}
		c := newBubbleClient(t, s, cred, sdk.Options{})
		if _, err := c.SendOne(t.Context(), ringing("p1")); err != nil {
			t.Fatal(err)
		}
		got := s.requests()
		if len(got) != 2 {
			t.Fatalf("%d attempts", len(got))
		}
		if gap := got[1].at.Sub(got[0].at); gap < time.Second {
			t.Errorf("retried after %v, sooner than Retry-After: 1", gap)
		}
	})
}

func TestNoRetryOnClientErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		{400, `{"success":false,"error":"400 Bad Request","message":"the body failed validation: call.direction: is required","problems":[{"field":"call.direction","problem":"is required"}]}`},
		{401, `{"success":false,"error":"401 Unauthorized","message":"invalid credential"}`},
		{403, `{"success":false,"error":"403 Forbidden","message":"key lacks scope","missingScopes":["org.calls.events.call_received"]}`},
		{413, `{"success":false,"error":"413 Request Entity Too Large","message":"too big"}`},
	} {
		s := &script{replies: []reply{{status: tc.status, body: tc.body}}}
		c := newClient(t, s, cred, sdk.Options{})
		_, err := c.SendOne(t.Context(), ringing("p1"))
		var e *sdk.Error
		if !errors.As(err, &e) || e.Status != tc.status || e.TraceID != "trace-1" || e.Attempts != 1 || !e.Permanent() || sdk.IsRetryable(err) {
			t.Errorf("%d: err %#v", tc.status, err)
			continue
		}
		if n := len(s.requests()); n != 1 {
			t.Errorf("%d: sent %d times", tc.status, n)
		}
		if tc.status == 400 && (len(e.Problems) != 1 || e.Problems[0].Field != "call.direction") {
			t.Errorf("problems %+v", e.Problems)
		}
		if tc.status == 403 && (len(e.MissingScopes) != 1) {
			t.Errorf("missing scopes %+v", e.MissingScopes)
		}
	}
}

func TestGivesUpWithTheLastAnswer(t *testing.T) {
	s := &script{replies: []reply{fail(503, "still busy")}}
	c := newClient(t, s, cred, sdk.Options{MaxAttempts: 3})
	_, err := c.SendOne(t.Context(), ringing("p1"))
	var e *sdk.Error
	if !errors.As(err, &e) || e.Status != 503 || e.Attempts != 3 || e.Message != "still busy" || !sdk.IsRetryable(err) {
		t.Fatalf("err %#v", err)
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := sdk.New("http://"+addr, cred, sdk.Options{MaxAttempts: 3, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.SendOne(t.Context(), ringing("p1"))
	var e *sdk.Error
	if !errors.As(err, &e) || e.Status != 0 || e.Attempts != 3 || !sdk.IsRetryable(err) {
		t.Fatalf("err %#v", err)
	}
}

// TestContextEndsTheWait runs in a synctest bubble, where time passes only when every goroutine
// waits: how long SendOne took is the client's doing, never the machine's load.
func TestContextEndsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{replies: []reply{{status: 503, header: map[string]string{"Retry-After": "30"}, body: `{}`}}}
		c := newBubbleClient(t, s, cred, sdk.Options{})
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := c.SendOne(ctx, ringing("p1"))
		if err == nil || time.Since(start) > 2*time.Second {
			t.Fatalf("err %v after %v", err, time.Since(start))
		}
		if sdk.IsRetryable(err) && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("err %v", err)
		}
	})
}

func TestValidationBeforeSending(t *testing.T) {
	s := &script{replies: []reply{{status: 200, body: okBody}}}
	c := newClient(t, s, cred, sdk.Options{})
	bad := ringing("")
	bad.Call.Direction = "sideways"
	_, err := c.SendOne(t.Context(), bad)
	var e *sdk.Error
	if !errors.As(err, &e) || !e.Permanent() || len(s.requests()) != 0 {
		t.Fatalf("err %#v, %d requests", err, len(s.requests()))
	}
	_, err = c.SendBatch(t.Context(), []event.Event{ringing("ok"), bad})
	if !errors.As(err, &e) || len(e.Problems) < 2 || e.Problems[0].Field != "events[1].providerCallId" {
		t.Fatalf("batch err %#v", err)
	}
	if _, err := c.SendBatch(t.Context(), nil); err == nil {
		t.Error("an empty batch must be refused")
	}
}

func TestSendSplitsTheWayTheAPIAdvises(t *testing.T) {
	s := &script{replies: []reply{{status: 200, body: okBody}}}
	c := newClient(t, s, cred, sdk.Options{})
	at := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
	var evs []event.Event
	evs = append(evs, ringing("a"))
	for i := range 120 {
		e := event.New(event.CallHold, "a", at, event.Call{Direction: event.Inbound})
		e.Sequence = int64(i + 1)
		evs = append(evs, e)
	}
	evs = append(evs, ringing("b"), event.New(event.CallMissed, "b", at, event.Call{Direction: event.Inbound}))
	res, err := c.Send(t.Context(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	got := s.requests()
	sizes := []int{}
	for _, g := range got {
		var b struct {
			Events []json.RawMessage `json:"events"`
		}
		if json.Unmarshal(g.body, &b); b.Events == nil {
			sizes = append(sizes, 1)
		} else {
			sizes = append(sizes, len(b.Events))
		}
	}
	if fmt.Sprint(sizes) != "[1 50 50 20 1 1]" || len(res) != 6 {
		t.Errorf("request sizes %v (results %d), want [1 50 50 20 1 1]", sizes, len(res))
	}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		url  string
		cred sdk.Credential
		o    sdk.Options
	}{
		{"ftp://x", cred, sdk.Options{}},
		{"not a url", cred, sdk.Options{}},
		{"http://x", sdk.Credential{ClientID: "a"}, sdk.Options{}},
		{"http://x", sdk.Credential{Secret: "s"}, sdk.Options{}},
		{"http://x", cred, sdk.Options{MaxAttempts: -1}},
	} {
		if _, err := sdk.New(tc.url, tc.cred, tc.o); err == nil {
			t.Errorf("New(%q, %+v, %+v) accepted", tc.url, tc.cred, tc.o)
		}
	}
}
