package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// wireClient posts JSON bodies to one HTTP/1.1 endpoint over keep-alive connections it keeps
// itself, the way a dedicated load generator (wrk, say) does: each request goes out in one write
// and its response is read on the caller's goroutine, with no goroutines per connection and no
// per-request header maps. It speaks only what the bench needs of HTTP/1.1: a POST with a
// Content-Length, and responses framed by Content-Length. Anything else is an error, never a
// guess.
//
// A load generator sharing the machine with the server takes CPU the server and the database
// would otherwise have, so its cost is part of what the bench measures; this client keeps that
// cost small. Go's net/http client is the alternative (-client net).
type wireClient struct {
	addr    string        // host:port of the server
	head    []byte        // request line and the fixed headers, through "Content-Length: "
	timeout time.Duration // most one request may take, from its write to its last byte

	mu   sync.Mutex
	idle []*wireConn
}

// wireConn is one keep-alive connection and its buffers.
type wireConn struct {
	c    net.Conn
	r    *bufio.Reader
	req  []byte // the request being written
	body []byte // the response body being read
}

// wireResponse is what the bench reads of a response. Body is valid until the next request.
type wireResponse struct {
	Status  int
	TraceID string
	Body    []byte
}

// maxWireBody bounds a response body the client reads.
const maxWireBody = 1 << 20

// newWireClient returns a client posting to path on addr with the given extra headers, each a
// "Name: value" line without its line ending.
func newWireClient(addr, path string, headers []string, timeout time.Duration) (*wireClient, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("wire client: address %q: %w", addr, err)
	}
	if timeout <= 0 {
		return nil, errors.New("wire client: timeout must be positive")
	}
	var h bytes.Buffer
	fmt.Fprintf(&h, "POST %s HTTP/1.1\r\nHost: %s\r\n", path, addr)
	for _, line := range headers {
		if bytes.ContainsAny([]byte(line), "\r\n") {
			return nil, fmt.Errorf("wire client: header %q holds a line break", line)
		}
		h.WriteString(line)
		h.WriteString("\r\n")
	}
	h.WriteString("Content-Length: ")
	return &wireClient{addr: addr, head: h.Bytes(), timeout: timeout}, nil
}

// Post sends body and reads the whole response. An error means the exchange failed (the
// connection is then closed); any status is a response.
func (wc *wireClient) Post(ctx context.Context, body []byte) (wireResponse, error) {
	if err := ctx.Err(); err != nil {
		return wireResponse{}, err
	}
	conn, err := wc.get(ctx)
	if err != nil {
		return wireResponse{}, err
	}
	deadline := time.Now().Add(wc.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	resp, keep, err := conn.exchange(wc.head, body, deadline)
	if err != nil || !keep {
		conn.c.Close()
	} else {
		wc.put(conn)
	}
	if err != nil {
		return wireResponse{}, fmt.Errorf("wire client: %w", err)
	}
	return resp, nil
}

// CloseIdle closes every idle connection.
func (wc *wireClient) CloseIdle() {
	wc.mu.Lock()
	idle := wc.idle
	wc.idle = nil
	wc.mu.Unlock()
	for _, c := range idle {
		c.c.Close()
	}
}

func (wc *wireClient) get(ctx context.Context) (*wireConn, error) {
	wc.mu.Lock()
	if n := len(wc.idle); n > 0 {
		c := wc.idle[n-1]
		wc.idle = wc.idle[:n-1]
		wc.mu.Unlock()
		return c, nil
	}
	wc.mu.Unlock()
	d := net.Dialer{Timeout: wc.timeout}
	c, err := d.DialContext(ctx, "tcp", wc.addr)
	if err != nil {
		return nil, fmt.Errorf("wire client: %w", err)
	}
	return &wireConn{c: c, r: bufio.NewReaderSize(c, 4096)}, nil
}

func (wc *wireClient) put(c *wireConn) {
	wc.mu.Lock()
	wc.idle = append(wc.idle, c)
	wc.mu.Unlock()
}

// exchange writes one request and reads its response. keep reports whether the connection may
// carry another request.
func (c *wireConn) exchange(head, body []byte, deadline time.Time) (resp wireResponse, keep bool, err error) {
	if err := c.c.SetDeadline(deadline); err != nil {
		return resp, false, err
	}
	c.req = append(c.req[:0], head...)
	c.req = strconv.AppendInt(c.req, int64(len(body)), 10)
	c.req = append(c.req, "\r\n\r\n"...)
	c.req = append(c.req, body...)
	if _, err := c.c.Write(c.req); err != nil {
		return resp, false, fmt.Errorf("write request: %w", err)
	}
	return c.readResponse()
}

// readResponse reads a status line, the headers and a Content-Length body.
func (c *wireConn) readResponse() (resp wireResponse, keep bool, err error) {
	line, err := c.line()
	if err != nil {
		return resp, false, fmt.Errorf("read status line: %w", err)
	}
	// "HTTP/1.1 201 Created"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return resp, false, fmt.Errorf("malformed status line %q", line)
	}
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return resp, false, fmt.Errorf("malformed status line %q", line)
		}
		resp.Status = resp.Status*10 + int(d-'0')
	}
	keep = line[7] == '1'
	length := -1
	for {
		line, err := c.line()
		if err != nil {
			return resp, false, fmt.Errorf("read headers: %w", err)
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return resp, false, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case headerIs(name, "Content-Length"):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 || n > maxWireBody {
				return resp, false, fmt.Errorf("Content-Length %q not read", value)
			}
			length = n
		case headerIs(name, "Transfer-Encoding"):
			return resp, false, fmt.Errorf("Transfer-Encoding %q is not read by this client", value)
		case headerIs(name, "Connection"):
			if headerIs(value, "close") {
				keep = false
			}
		case headerIs(name, "X-Trace-ID"):
			resp.TraceID = string(value)
		}
	}
	if length < 0 {
		return resp, false, errors.New("response without Content-Length")
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	if _, err := io.ReadFull(c.r, c.body); err != nil {
		return resp, false, fmt.Errorf("read body: %w", err)
	}
	resp.Body = c.body
	return resp, keep, nil
}

// line reads one header line without its CRLF. The slice is valid until the next read.
func (c *wireConn) line() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("header line longer than 4096 bytes")
		}
		return nil, err
	}
	line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
	return line, nil
}

// headerIs reports whether b equals the ASCII name s, ignoring case.
func headerIs(b []byte, s string) bool {
	return len(b) == len(s) && bytes.EqualFold(b, []byte(s))
}
