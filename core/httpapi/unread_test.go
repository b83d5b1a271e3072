package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/httpapi"
	"github.com/callwire/callwire/internal/metrictest"
)

// logBuffer collects a logger's JSON lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// requestLines returns the "request" lines logged with the trace id.
func (b *logBuffer) requestLines(t *testing.T, trace string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "request" && m["trace_id"] == trace {
			out = append(out, m)
		}
	}
	return out
}

type rawServer struct {
	addr string
	reg  *prometheus.Registry
	logs *logBuffer
}

func newRawServer(t *testing.T, readTimeout time.Duration) rawServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	app, err := httpapi.New(httpapi.Options{
		Auth: fakeAuth{}, Ingest: fakeIngest{}, BaseContext: t.Context(), BodyLimit: 4096,
		ReadTimeout: readTimeout, Registerer: reg, Gatherer: reg,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown() })
	return rawServer{addr: ln.Addr().String(), reg: reg, logs: logs}
}

// exchange writes raw bytes on a new connection and reads one response.
func exchange(t *testing.T, addr, raw string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A bound for a broken server only; every answer expected comes long before.
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestUnreadRequestsAnsweredLoggedCounted sends requests that fasthttp or Fiber answer before
// any handler or middleware runs, and checks that each answer has the failure body and a trace
// id, and is logged once and counted once. Requests the middleware sees are counted once too.
func TestUnreadRequestsAnsweredLoggedCounted(t *testing.T) {
	fast := newRawServer(t, 0)
	// Only the server whose read timeout is the subject of the test has a short one.
	slow := newRawServer(t, 300*time.Millisecond)
	events := httpapi.EventsPath
	tests := []struct {
		name          string
		srv           rawServer
		raw           string
		status        int
		route         string
		trace         string // the X-Trace-ID sent, kept when fasthttp keeps the header
		method, path  string // logged when fasthttp keeps the header
		msg, notInMsg string
	}{
		{
			name: "body over the limit", srv: fast, status: 413, route: events, trace: "trace-413", method: "POST", path: events,
			raw: "POST " + events + " HTTP/1.1\r\nHost: x\r\nX-Trace-ID: trace-413\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n",
			msg: "body is larger than 4096 bytes", notInMsg: "fewer events",
		},
		{
			name: "unknown method", srv: fast, status: 400, route: events, trace: "trace-method", method: "PROPFIND", path: events,
			raw: "PROPFIND " + events + " HTTP/1.1\r\nHost: x\r\nX-Trace-ID: trace-method\r\n\r\n",
			msg: `method "PROPFIND" is not supported`,
		},
		{
			name: "malformed request line", srv: fast, status: 400, route: "unmatched",
			raw: "HELLO\r\nClient-Secret: cwsk_leak\r\n\r\n", msg: "could not be read",
		},
		{
			// Exactly the read buffer, with no end of headers: fasthttp reads it all, so the
			// connection closes with nothing unread and the answer is not lost to a reset.
			name: "headers too large", srv: fast, status: 431, route: "unmatched",
			raw: "GET /healthz HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 16<<10-len("GET /healthz HTTP/1.1\r\nX-Big: ")),
			msg: "larger than 16384 bytes",
		},
		{
			name: "client stalls mid-body", srv: slow, status: 408, route: "unmatched",
			raw: "POST " + events + " HTTP/1.1\r\nHost: x\r\nX-Trace-ID: trace-408\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"ty",
			msg: "not received in full within 300ms",
		},
		{
			name: "client stalls mid-headers", srv: slow, status: 408, route: "unmatched",
			raw: "POST " + events + " HTTP/1.1\r\nHost: x\r\nClient-Secret: cwsk_leak\r\n", msg: "not received in full",
		},
		{
			// fasthttp answers a new connection that sends nothing within the read timeout.
			name: "client sends nothing", srv: slow, status: 408, route: "unmatched", msg: "not received in full",
		},
		{
			name: "handler answers", srv: fast, status: 200, route: "/healthz", trace: "trace-ok", method: "GET", path: "/healthz",
			raw: "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Trace-ID: trace-ok\r\nConnection: close\r\n\r\n",
		},
		{
			name: "middleware answers an error", srv: fast, status: 404, route: "unmatched", trace: "trace-404", method: "GET", path: "/nope",
			raw: "GET /nope HTTP/1.1\r\nHost: x\r\nX-Trace-ID: trace-404\r\nConnection: close\r\n\r\n", msg: "no such endpoint",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code := strconv.Itoa(tt.status)
			before := metrictest.Sum(t, tt.srv.reg, "callwire_http_requests_total", "route", tt.route, "status", code)
			resp, body := exchange(t, tt.srv.addr, tt.raw)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			trace := resp.Header.Get(httpapi.TraceHeader)
			if trace == "" || (tt.trace != "" && trace != tt.trace) {
				t.Errorf("X-Trace-ID %q, want %q (or a new one when empty)", trace, tt.trace)
			}
			if tt.msg != "" {
				var f struct {
					Success *bool  `json:"success"`
					Error   string `json:"error"`
					Message string `json:"message"`
				}
				if err := json.Unmarshal(body, &f); err != nil || f.Success == nil || *f.Success || !strings.HasPrefix(f.Error, code+" ") {
					t.Errorf("body %s is not the failure body (%v)", body, err)
				}
				if !strings.Contains(f.Message, tt.msg) || (tt.notInMsg != "" && strings.Contains(f.Message, tt.notInMsg)) {
					t.Errorf("message %q, want it to say %q and not %q", f.Message, tt.msg, tt.notInMsg)
				}
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
					t.Errorf("Content-Type %q", ct)
				}
			}
			// The line is written before the answer, so it is there now.
			lines := tt.srv.logs.requestLines(t, trace)
			if len(lines) != 1 {
				t.Fatalf("%d request lines with trace_id %q, want 1: %v", len(lines), trace, lines)
			}
			if l := lines[0]; l["status"] != float64(tt.status) || (tt.method != "" && (l["method"] != tt.method || l["path"] != tt.path)) {
				t.Errorf("log line %v, want status %d, method %q, path %q", l, tt.status, tt.method, tt.path)
			}
			if got := metrictest.Sum(t, tt.srv.reg, "callwire_http_requests_total", "route", tt.route, "status", code) - before; got != 1 {
				t.Errorf("callwire_http_requests_total{route=%q,status=%q} rose by %v, want 1", tt.route, code, got)
			}
			if strings.Contains(tt.srv.logs.String(), "cwsk_leak") || strings.Contains(string(body), "cwsk_leak") {
				t.Errorf("the request's bytes, a secret among them, reached the log or the answer")
			}
		})
	}
}
