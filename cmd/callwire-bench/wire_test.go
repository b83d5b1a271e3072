package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestWireClient(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/calls/events" ||
			r.Header.Get("Client-ID") != "cw_1" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "unexpected request "+r.Method+" "+r.URL.Path, http.StatusTeapot)
			return
		}
		w.Header().Set("X-Trace-ID", "trace-"+string(body))
		switch string(body) {
		case "close":
			w.Header().Set("Connection", "close")
		case "chunked":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte("streamed"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"success":true,"echo":"` + string(body) + `"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	wc, err := newWireClient(addr, "/api/v1/calls/events",
		[]string{"Content-Type: application/json", "Client-ID: cw_1"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.CloseIdle()
	ctx := context.Background()

	for i, body := range []string{"a", "bb", "a longer body"} {
		resp, err := wc.Post(ctx, []byte(body))
		if err != nil {
			t.Fatalf("post %d: %v", i, err)
		}
		if resp.Status != http.StatusCreated || resp.TraceID != "trace-"+body ||
			string(resp.Body) != `{"success":true,"echo":"`+body+`"}` {
			t.Fatalf("post %d: got %d %q %q", i, resp.Status, resp.TraceID, resp.Body)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("three requests in a row used %d connections, want 1 (keep-alive)", n)
	}

	// Connection: close is honoured: the next request dials afresh.
	if resp, err := wc.Post(ctx, []byte("close")); err != nil || resp.Status != http.StatusCreated {
		t.Fatalf("close: %v %+v", err, resp)
	}
	if resp, err := wc.Post(ctx, []byte("after")); err != nil || resp.Status != http.StatusCreated {
		t.Fatalf("after close: %v %+v", err, resp)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("connections after a Connection: close = %d, want 2", n)
	}

	// A response this client cannot frame is an error, never a guess.
	if _, err := wc.Post(ctx, []byte("chunked")); err == nil || !strings.Contains(err.Error(), "Transfer-Encoding") {
		t.Fatalf("chunked response: err = %v, want a Transfer-Encoding error", err)
	}
	// Statuses other than 2xx are responses, not errors.
	other, err := newWireClient(addr, "/elsewhere", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer other.CloseIdle()
	if resp, err := other.Post(ctx, []byte("x")); err != nil || resp.Status != http.StatusTeapot {
		t.Fatalf("teapot: %v %+v", err, resp)
	}

	// A cancelled context sends nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := wc.Post(cctx, []byte("a")); err == nil {
		t.Fatal("post with a cancelled context succeeded")
	}
}

func TestWireClientRefusesBadSetup(t *testing.T) {
	if _, err := newWireClient("no-port", "/", nil, time.Second); err == nil {
		t.Error("address without a port accepted")
	}
	if _, err := newWireClient("127.0.0.1:1", "/", []string{"X: a\r\nY: b"}, time.Second); err == nil {
		t.Error("header with a line break accepted")
	}
	if _, err := newWireClient("127.0.0.1:1", "/", nil, 0); err == nil {
		t.Error("zero timeout accepted")
	}
}

func TestWireClientMalformedResponses(t *testing.T) {
	for name, raw := range map[string]string{
		"status line":    "HTTP/1.1 2x1 Created\r\nContent-Length: 0\r\n\r\n",
		"not HTTP":       "SIP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
		"signed status":  "HTTP/1.1 -12 Odd\r\nContent-Length: 0\r\n\r\n",
		"no length":      "HTTP/1.1 201 Created\r\n\r\n",
		"bad length":     "HTTP/1.1 201 Created\r\nContent-Length: -3\r\n\r\n",
		"header no cut":  "HTTP/1.1 201 Created\r\nnonsense\r\nContent-Length: 0\r\n\r\n",
		"short body":     "HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\nabc",
		"closed at once": "",
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 4096)
				_, _ = c.Read(buf)
				_, _ = io.WriteString(c, raw)
			}()
			wc, err := newWireClient(ln.Addr().String(), "/", nil, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer wc.CloseIdle()
			if resp, err := wc.Post(context.Background(), []byte("{}")); err == nil {
				t.Fatalf("malformed response read as %+v", resp)
			}
		})
	}
}

// FuzzWireResponse feeds the response reader arbitrary bytes: it must never panic, and a
// response it accepts has a status of three digits and the body its Content-Length announced.
func FuzzWireResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 201 Created\r\nContent-Length: 16\r\nX-Trace-ID: t1\r\n\r\n{\"success\":true}"))
	f.Add([]byte("HTTP/1.0 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c := &wireConn{r: bufio.NewReaderSize(bytes.NewReader(raw), 4096)}
		resp, _, err := c.readResponse()
		if err != nil {
			return
		}
		if resp.Status < 0 || resp.Status > 999 || bytes.Count(raw, []byte("HTTP/1.")) == 0 {
			t.Fatalf("status %d accepted", resp.Status)
		}
		if !bytes.Contains(raw, resp.Body) {
			t.Fatalf("body %q is not in the input", resp.Body)
		}
	})
}
