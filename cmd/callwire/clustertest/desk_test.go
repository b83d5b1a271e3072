package clustertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// span is a stretch of time a desk's stream was open: from its ready event to its end (zero
// while it is still open).
type span struct{ from, until time.Time }

// desk is a workstation: it holds the popup stream of one location open on one replica, and on
// losing it connects again through the load balancer, as a browser pointed at it would, sending
// the last popup id it saw as Last-Event-ID.
type desk struct {
	name     string
	location string
	home     string // the base URL of the replica it first connects to
	lb       string // the load balancer's base URL
	clientID string
	secret   string

	mu    sync.Mutex
	spans []span
	// got counts, per providerCallId, the streams that delivered its popup: a desk shows a
	// popup once and drops its repeats by id, and a stream that opens replays the calls
	// ringing now, which the desk may have shown on its previous stream.
	got map[string]int
	// onStream counts, per providerCallId, the popups of the current stream.
	onStream map[string]int
	// twice are the calls whose popup came more than once on one stream.
	twice  []string
	lastID string
	drops  int
}

// newDesk returns a desk of location that starts on the replica at home.
func newDesk(name, location, home, lb, clientID, secret string) *desk {
	return &desk{name: name, location: location, home: home, lb: lb, clientID: clientID, secret: secret, got: map[string]int{}}
}

// run keeps the desk's stream open until ctx ends. It waits (bounded by ready) until the first
// stream is live, and returns a channel closed when the desk has stopped.
func (d *desk) run(ctx context.Context, ready time.Duration) (<-chan struct{}, error) {
	first := make(chan error, 1)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		base := d.home
		for ctx.Err() == nil {
			err := d.stream(ctx, base, first)
			first = nil
			if ctx.Err() != nil {
				return
			}
			d.mu.Lock()
			if err != nil && len(d.spans) > 0 && d.spans[len(d.spans)-1].until.IsZero() {
				d.spans[len(d.spans)-1].until = time.Now()
				d.drops++
			}
			d.mu.Unlock()
			base = d.lb
			// A stream that could not be opened is tried again soon, not in a tight loop.
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	select {
	case err := <-first:
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		return stopped, nil
	case <-time.After(ready):
		return nil, fmt.Errorf("%s: no ready event within %v", d.name, ready)
	}
}

// stream opens one stream at base and reads it until it ends. It sends nil on first once the
// stream is live, or the error that kept it from opening.
func (d *desk) stream(ctx context.Context, base string, first chan<- error) error {
	report := func(err error) error {
		if first != nil {
			first <- err
		}
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/popups/stream?locations="+d.location, nil)
	if err != nil {
		return report(err)
	}
	req.Header.Set("Client-ID", d.clientID)
	req.Header.Set("Client-Secret", d.secret)
	req.Header.Set("Accept", "text/event-stream")
	d.mu.Lock()
	if d.lastID != "" {
		req.Header.Set("Last-Event-ID", d.lastID)
	}
	d.mu.Unlock()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if first != nil {
			return report(err)
		}
		return nil // nothing was open: no span to end
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		if first != nil {
			return report(fmt.Errorf("popup stream: HTTP %d: %s", resp.StatusCode, b))
		}
		return nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var name, id string
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			switch name {
			case "ready":
				d.mu.Lock()
				d.spans = append(d.spans, span{from: time.Now()})
				d.onStream = map[string]int{}
				d.mu.Unlock()
				if first != nil {
					first <- nil
					first = nil
				}
			case "popup":
				var p struct {
					ProviderCallID string `json:"providerCallId"`
				}
				if json.Unmarshal([]byte(data.String()), &p) == nil {
					d.mu.Lock()
					c := p.ProviderCallID
					d.onStream[c]++
					switch d.onStream[c] {
					case 1:
						d.got[c]++
					case 2:
						d.twice = append(d.twice, c)
					}
					if id != "" {
						d.lastID = id
					}
					d.mu.Unlock()
				}
			}
			name, id = "", ""
			data.Reset()
		case strings.HasPrefix(line, "event:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if first != nil {
		return report(fmt.Errorf("popup stream ended before its ready event: %v", sc.Err()))
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// covered reports whether one stream of the desk was open from before from until after until.
func (d *desk) covered(from, until time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.spans {
		if !s.from.After(from) && (s.until.IsZero() || s.until.After(until)) {
			return true
		}
	}
	return false
}

// replayedTo reports whether a stream of the desk opened settle after the call's ringing was on
// file (rang), while the call still rang (before answered, by settle), and stayed open settle
// past its opening: that stream owes the call's popup from its replay of the calls ringing now.
func (d *desk) replayedTo(rang, answered time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.spans {
		open := s.from.Add(settle)
		if s.from.After(rang.Add(settle)) && open.Before(answered) && (s.until.IsZero() || s.until.After(open)) {
			return true
		}
	}
	return false
}

// repeated returns the calls whose popup came more than once on one stream.
func (d *desk) repeated() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.twice...)
}

// repeats returns how many popups the desk dropped as shown already on an earlier stream.
func (d *desk) repeats() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, k := range d.got {
		n += k - 1
	}
	return n
}

// received returns how many of the desk's streams delivered the call's popup.
func (d *desk) received(providerCallID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.got[providerCallID]
}

// longestGap returns the longest time the desk went without an open stream between the end of
// one and the ready event of the next, 0 when no stream ended under it.
func (d *desk) longestGap() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	var longest time.Duration
	for i := 1; i < len(d.spans); i++ {
		longest = max(longest, d.spans[i].from.Sub(d.spans[i-1].until))
	}
	return longest
}

// dropCount returns how many of the desk's streams ended under it.
func (d *desk) dropCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.drops
}
