package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"
)

// deskStream is one desk holding the popup stream open: a bare connection and a goroutine that
// reads it, lean enough that ten thousand of them cost the bench little, so that the machine's
// memory and CPU go to the server being measured.
type deskStream struct {
	conn net.Conn
	done chan struct{}
}

// deskSink is told each popup a desk receives: the providerCallId and when it arrived.
type deskSink func(desk int, providerCallID string, at time.Time)

// openDesk connects to addr, asks for the popup stream of locations with the key's headers, and
// returns once the server has sent the stream's ready event. The stream is read until close;
// each popup is handed to sink.
func openDesk(ctx context.Context, addr, clientID, secret, locations string, desk int, sink deskSink) (*deskStream, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("desk %d: %w", desk, err)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET /api/v1/popups/stream?locations=" + locations + " HTTP/1.1\r\nHost: " + addr +
		"\r\nClient-ID: " + clientID + "\r\nClient-Secret: " + secret + "\r\nAccept: text/event-stream\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, fmt.Errorf("desk %d: %w", desk, err)
	}
	br := bufio.NewReaderSize(conn, 1024)
	body, err := streamBody(br)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("desk %d: %w", desk, err)
	}
	ready := make(chan error, 1)
	s := &deskStream{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		err := readSSE(body, func(name string, data []byte) {
			switch name {
			case "ready":
				ready <- nil
			case "popup":
				if id := providerCallID(data); id != "" {
					sink(desk, id, time.Now())
				}
			}
		})
		select {
		case ready <- fmt.Errorf("stream ended before its ready event: %v", err):
		default:
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			conn.Close()
			<-s.done
			return nil, fmt.Errorf("desk %d: %w", desk, err)
		}
	case <-ctx.Done():
		conn.Close()
		<-s.done
		return nil, ctx.Err()
	}
	_ = conn.SetDeadline(time.Time{})
	return s, nil
}

// close ends the stream and waits for its reader.
func (s *deskStream) close() {
	s.conn.Close()
	<-s.done
}

// errUnavailable is a stream refused with 503: the server asks the desk to come back later, as
// the desk page does.
var errUnavailable = errors.New("stream refused for now")

// streamBody reads the response head from br and returns the body's reader: the stream's
// chunks decoded when the response is chunked. Any status but 200 is an error naming it.
func streamBody(br *bufio.Reader) (io.Reader, error) {
	status, err := br.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("read status: %w", err)
	}
	f := strings.Fields(status)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/1.") {
		return nil, fmt.Errorf("not an HTTP/1 response: %q", strings.TrimSpace(status))
	}
	code, err := strconv.Atoi(f[1])
	if err != nil {
		return nil, fmt.Errorf("status %q: %w", strings.TrimSpace(status), err)
	}
	chunked := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("read headers: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		k, v, _ := strings.Cut(line, ":")
		if strings.EqualFold(strings.TrimSpace(k), "Transfer-Encoding") && strings.EqualFold(strings.TrimSpace(v), "chunked") {
			chunked = true
		}
	}
	if code != 200 {
		b := make([]byte, 300)
		n, _ := io.ReadFull(br, b)
		err := fmt.Errorf("HTTP %d: %s", code, bytes.TrimSpace(b[:n]))
		if code == 503 {
			err = fmt.Errorf("%w: %w", errUnavailable, err)
		}
		return nil, err
	}
	if chunked {
		return httputil.NewChunkedReader(br), nil
	}
	return br, nil
}

// readSSE reads server-sent events from r until it ends, calling on with each event's name and
// its data (the data lines joined by newlines, as the format says). Comments and fields other
// than event and data are skipped. It returns the read's error; nil at a clean end.
func readSSE(r io.Reader, on func(name string, data []byte)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 2048), 1<<20)
	var name string
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if name != "" || len(data) > 0 {
				on(name, data)
			}
			name, data = "", data[:0]
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			name = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			v := line[len("data:"):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			data = append(data, v...)
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// deliveries records the popups the desks received and the calls posted, to time each delivery
// from its call's POST.
type deliveries struct {
	mu   sync.Mutex
	sent map[string]time.Time // providerCallId → when its call_received was posted
	got  map[deliveryKey]time.Time
	dups int
}

type deliveryKey struct {
	desk int
	call string
}

func newDeliveries() *deliveries {
	return &deliveries{sent: map[string]time.Time{}, got: map[deliveryKey]time.Time{}}
}

// sink is the deskSink that records into d; a desk's second popup of one call is counted apart.
func (d *deliveries) sink(desk int, id string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := deliveryKey{desk, id}
	if _, ok := d.got[k]; ok {
		d.dups++
		return
	}
	d.got[k] = at
}

// posted notes that the call_received of id was posted at at.
func (d *deliveries) posted(id string, at time.Time) {
	d.mu.Lock()
	d.sent[id] = at
	d.mu.Unlock()
}

// latencies returns the time from each posted call to each of its deliveries, and how many of
// the expected deliveries did not come: owed(id) says how many desks were owed the call's popup.
func (d *deliveries) latencies(owed func(id string) int) (ds []time.Duration, missing, dups int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	per := map[string]int{}
	for k, at := range d.got {
		s, ok := d.sent[k.call]
		if !ok {
			continue
		}
		ds = append(ds, at.Sub(s))
		per[k.call]++
	}
	for id := range d.sent {
		missing += max(0, owed(id)-per[id])
	}
	return ds, missing, d.dups
}
