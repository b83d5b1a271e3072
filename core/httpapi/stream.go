package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/sdk/event"
)

// PopupsStreamPath is the workstations' server-sent event stream of popups.
const PopupsStreamPath = "/api/v1/popups/stream"

// StreamRetry is the reconnection delay the stream asks clients for in its "retry:" field.
const StreamRetry = 3 * time.Second

// Popups is where the popup stream subscribes. A popup.Broker satisfies it.
type Popups interface {
	// Subscribe starts delivery of orgID's popups for the given locations, as
	// popup.Broker.Subscribe does. The subscription ends when ctx ends.
	Subscribe(ctx context.Context, orgID string, locations []string) (popup.Subscription, error)
}

// RingingPopups is where a popup stream reads, as it opens, the popups of the calls ringing now
// (an *ingest.Replay satisfies it).
type RingingPopups interface {
	// RingingPopups returns the popups of orgID's calls that ring now in one of locations,
	// newest first, each with the ID the broker published it under.
	RingingPopups(ctx context.Context, orgID string, locations []string) ([]popup.Popup, error)
}

// streamMetrics describe the open popup streams.
type streamMetrics struct {
	open     prometheus.Gauge
	popups   prometheus.Counter
	replayed prometheus.Counter
	ended    *prometheus.CounterVec
}

func newStreamMetrics() streamMetrics {
	return streamMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "callwire_popup_streams_open", Help: "Popup event streams open on this process.",
		}),
		popups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callwire_popup_stream_popups_total", Help: "Popups written to popup event streams.",
		}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "callwire_popup_stream_replayed_total", Help: "Popups of calls ringing as a popup event stream opened, read from the store and written to it (also counted in callwire_popup_stream_popups_total).",
		}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callwire_popup_streams_ended_total",
			Help: "Popup event streams ended, by reason: client_gone, subscription_ended, key_refused, shutdown.",
		}, []string{"reason"}),
	}
}

func (m streamMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.open, m.popups, m.replayed, m.ended}
}

// streamWriteBound is how long one write to a stream may block (a client that stopped reading)
// before the stream is ended, when Options.WriteTimeout names none.
const streamWriteBound = 15 * time.Second

// writeBound is how long one write to a stream may block.
func (a *api) writeBound() time.Duration {
	if a.o.WriteTimeout > 0 {
		return a.o.WriteTimeout
	}
	return streamWriteBound
}

// streamRequestConfig gives the stream's response a write deadline of its own. The server sets
// the connection's write deadline once, as the response starts; the stream then moves it forward
// before each of its writes (see stream.write). The first deadline must therefore outlast the
// wait for the stream's next write, one heartbeat, or a stream would be cut at write_timeout.
func (a *api) streamRequestConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	uri := h.RequestURI()
	if rest, ok := bytes.CutPrefix(uri, []byte(PopupsStreamPath)); ok && (len(rest) == 0 || rest[0] == '?') {
		return fasthttp.RequestConfig{WriteTimeout: a.o.Heartbeat + a.writeBound()}
	}
	return fasthttp.RequestConfig{}
}

// parseLocations reads the locations query parameter: comma-separated location names (several
// parameters are joined), each valid per event.ValidLocation, 1 to event.MaxLocations of them
// after repeats are dropped. An absent parameter means event.DefaultLocation. It returns the
// locations as fresh strings, or the message of the 400.
func parseLocations(args *fasthttp.Args) ([]string, string) {
	values := args.PeekMulti("locations")
	if len(values) == 0 {
		return []string{event.DefaultLocation}, ""
	}
	var locs []string
	for _, v := range values {
		for l := range strings.SplitSeq(string(v), ",") {
			l = strings.TrimSpace(l)
			if !event.ValidLocation(l) {
				if l == "" {
					return nil, "locations: empty location name; send comma-separated names such as locations=front,main, or leave the parameter out for main"
				}
				if len(l) > 64 {
					l = l[:64] + "..."
				}
				return nil, "locations: " + strconv.Quote(l) + " must be 1 to 64 characters of a-z, 0-9, '_' or '-', starting with a letter or digit"
			}
			if !slices.Contains(locs, l) {
				locs = append(locs, l)
			}
		}
	}
	if len(locs) > event.MaxLocations {
		return nil, "locations: at most " + strconv.Itoa(event.MaxLocations) + " locations, got " + strconv.Itoa(len(locs))
	}
	return locs, ""
}

// streamPopups serves GET /api/v1/popups/stream: the organization's popups for the requested
// locations, as server-sent events, until the client goes away, the subscription ends, the key
// stops being live, or the server shuts down.
func (a *api) streamPopups(c *fiber.Ctx) error {
	ctx := c.UserContext()
	tr := trace(c)
	// The credentials outlive the handler (the key is re-read while the stream runs): copy them
	// out of Fiber's buffers.
	creds := auth.Credentials{
		ClientID:      strings.Clone(c.Get("Client-ID")),
		ClientSecret:  strings.Clone(c.Get("Client-Secret")),
		Authorization: strings.Clone(c.Get(fiber.HeaderAuthorization)),
	}
	// No work will carry a key check for the store to run, so the key is read in full now.
	p, err := a.o.Auth.Authenticate(ctx, creds)
	if err != nil {
		return a.authFailure(c, tr, err)
	}
	if err := auth.RequireFederated(p); err != nil {
		return a.authFailure(c, tr, err)
	}
	if err := auth.RequireScopes(p, auth.ScopePopupsRead); err != nil {
		return a.authFailure(c, tr, err)
	}
	locs, msg := parseLocations(c.Context().QueryArgs())
	if msg != "" {
		return a.fail(c, fiber.StatusBadRequest, msg, nil)
	}
	if a.o.Broker != nil && !a.o.Broker.Up() {
		a.log.Warn("popup broker is down; popup stream answered 503", "trace_id", tr, "org_id", p.OrgID)
		return a.fail(c, fiber.StatusServiceUnavailable, "popups are unavailable: the popup broker is down; reconnect after Retry-After seconds", nil)
	}
	// The stream outlives this handler and must not be cut by the request timeout: its context
	// descends from StreamContext, which ends only as the server shuts down.
	sctx, cancel := context.WithCancel(a.o.StreamContext)
	sub, err := a.o.Popups.Subscribe(sctx, p.OrgID, locs)
	if err != nil {
		cancel()
		a.log.Warn("popup subscription failed; answered 503", "trace_id", tr, "org_id", p.OrgID, "error", err)
		return a.fail(c, fiber.StatusServiceUnavailable, "popups are unavailable for a moment; reconnect after Retry-After seconds", nil)
	}
	// The subscription is made before the store is read for the calls ringing now (in run), so
	// that a call that rings in between reaches the stream one way or the other.
	s := &stream{
		a: a, ctx: sctx, sub: sub, creds: creds, principal: p, locations: locs, trace: tr,
		conn: c.Context().Conn(), started: time.Now(), readsCalls: p.Allows(auth.ScopeCallsRead),
		lastEventID: strings.Clone(c.Get("Last-Event-ID")),
	}
	a.streams.open.Inc()
	a.log.Info("popup stream opened", "trace_id", tr, "org_id", p.OrgID, "client_id", p.ClientID, "locations", locs)
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	c.Status(fiber.StatusOK)
	// The writer runs on its own goroutine as soon as it is set, and the response is copied from
	// it until it returns.
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer cancel()
		defer sub.Close()
		defer a.streams.open.Dec()
		s.w = w
		s.run()
	})
	return nil
}

// stream is one open popup stream. Everything in it is owned by the stream's goroutine, and
// nothing refers to Fiber's buffers.
type stream struct {
	a         *api
	ctx       context.Context
	sub       popup.Subscription
	creds     auth.Credentials
	principal auth.Principal
	locations []string
	trace     string
	conn      net.Conn
	w         *bufio.Writer
	started   time.Time
	sent      int
	// readsCalls is whether the key, as last read, holds org.calls.read: only such a stream is
	// told when the to-call-back list changes.
	readsCalls bool
	// lastEventID is the request's Last-Event-ID: the id of the last popup the client read.
	lastEventID string
	// replayed are the IDs of the popups sent from the store as the stream opened: the same
	// popup arriving live afterwards is not sent again.
	replayed map[string]struct{}
	buf      []byte
}

// callbacksEvent is what a stream sends when the organization's to-call-back list may have
// changed: no personal data, only what to read again.
const callbacksEvent = "event: callbacks\ndata: {\"reread\":\"" + CallbacksPath + "\"}\n\n"

// run writes the stream until it ends, then logs and counts why it ended.
func (s *stream) run() {
	reason, err := s.loop()
	s.a.streams.ended.WithLabelValues(reason).Inc()
	s.a.log.Info("popup stream ended", "trace_id", s.trace, "org_id", s.principal.OrgID,
		"client_id", s.principal.ClientID, "reason", reason, "error", err, "popups", s.sent,
		"duration_ms", time.Since(s.started).Milliseconds())
}

// loop writes the prelude, then each popup as it comes and a heartbeat comment every heartbeat,
// re-reading the key at each heartbeat. It returns why the stream ended.
func (s *stream) loop() (reason string, err error) {
	scopes := slices.Clone(s.principal.Scopes)
	if scopes == nil {
		scopes = []string{}
	}
	slices.Sort(scopes)
	ready, _ := marshalNoEscape(struct {
		Locations   []string `json:"locations"`
		HeartbeatMs int64    `json:"heartbeatMs"`
		Scopes      []string `json:"scopes"`
	}{s.locations, s.a.o.Heartbeat.Milliseconds(), scopes})
	prelude := "retry: " + strconv.FormatInt(StreamRetry.Milliseconds(), 10) + "\n\nevent: ready\ndata: " + string(ready) + "\n\n"
	if err := s.write([]byte(prelude)); err != nil {
		return "client_gone", err
	}
	if err := s.replay(); err != nil {
		return "client_gone", err
	}
	beat := time.NewTicker(s.a.o.Heartbeat)
	defer beat.Stop()
	notices := s.sub.Callbacks()
	for {
		select {
		case <-s.ctx.Done():
			return "shutdown", nil
		case p, ok := <-s.sub.Popups():
			if !ok {
				if s.ctx.Err() != nil {
					return "shutdown", nil
				}
				return "subscription_ended", s.sub.Err()
			}
			if p.OrgID != s.principal.OrgID {
				// The broker routes by organization; this guards the boundary once more.
				s.a.log.Error("popup of another organization reached a stream; not sent", "trace_id", s.trace,
					"org_id", s.principal.OrgID, "popup_org_id", p.OrgID, "popup_id", p.ID)
				continue
			}
			if _, ok := s.replayed[p.ID]; ok {
				// Sent from the store as the stream opened.
				continue
			}
			if _, err := s.writePopup(&p); err != nil {
				return "client_gone", err
			}
		case _, ok := <-notices:
			if !ok {
				// The subscription ended: its popups channel, closed with it, says why once the
				// popups queued before the end are written.
				notices = nil
				continue
			}
			if !s.readsCalls {
				continue
			}
			if err := s.write([]byte(callbacksEvent)); err != nil {
				return "client_gone", err
			}
		case now := <-beat.C:
			if refusal := s.recheck(); refusal != nil {
				body, _ := marshalNoEscape(refusal)
				_ = s.write([]byte("event: error\ndata: " + string(body) + "\n\n"))
				return "key_refused", errors.New(refusal.Message)
			}
			if err := s.write([]byte(": heartbeat " + now.UTC().Format(time.RFC3339) + "\n\n")); err != nil {
				return "client_gone", err
			}
		}
	}
}

// replay writes the popups of the calls ringing now in the stream's locations, read from the
// store, oldest first, all but the one the client names as its Last-Event-ID (it read that one):
// a desk that connects, or reconnects after a break, shows the calls that started ringing while
// it was away, which the broker, delivering each popup at most once to the streams open as it
// is published, cannot give it. A store that does not answer within the request timeout costs
// the replay, not the stream. It returns only a write's error.
func (s *stream) replay() error {
	if s.a.o.Ringing == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.a.o.RequestTimeout)
	ps, err := s.a.o.Ringing.RingingPopups(ctx, s.principal.OrgID, s.locations)
	cancel()
	if err != nil {
		if s.ctx.Err() == nil {
			s.a.log.Warn("popup stream: calls ringing now not read; only new popups are sent", "trace_id", s.trace,
				"org_id", s.principal.OrgID, "error", err)
		}
		return nil
	}
	s.replayed = make(map[string]struct{}, len(ps))
	for i := len(ps) - 1; i >= 0; i-- {
		p := &ps[i]
		if p.OrgID != s.principal.OrgID {
			continue
		}
		s.replayed[p.ID] = struct{}{}
		if p.ID == s.lastEventID {
			continue
		}
		sent, err := s.writePopup(p)
		if err != nil {
			return err
		}
		if sent {
			s.a.streams.replayed.Inc()
		}
	}
	return nil
}

// writePopup writes p as a popup event, with p.ID as the event's id, and counts it. It reports
// whether p was written: a popup that cannot be encoded is logged and skipped.
func (s *stream) writePopup(p *popup.Popup) (bool, error) {
	data, err := marshalNoEscape(p)
	if err != nil {
		s.a.log.Error("popup not encodable; not sent", "trace_id", s.trace, "popup_id", p.ID, "error", err)
		return false, nil
	}
	buf := s.buf[:0]
	if validEventID(p.ID) {
		buf = append(append(append(buf, "id: "...), p.ID...), '\n')
	}
	buf = append(buf, "event: popup\ndata: "...)
	buf = append(append(buf, data...), "\n\n"...)
	s.buf = buf
	if err := s.write(buf); err != nil {
		return false, err
	}
	s.sent++
	s.a.streams.popups.Inc()
	return true, nil
}

// write sends b to the client at once. Before each write it moves the connection's write
// deadline to one heartbeat plus the write bound from now: a client that stops reading is cut
// off within that, while a live stream, which writes at least every heartbeat, never is.
func (s *stream) write(b []byte) error {
	if s.conn != nil {
		_ = s.conn.SetWriteDeadline(time.Now().Add(s.a.o.Heartbeat + s.a.writeBound()))
	}
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.w.Flush()
}

// recheck reads the key again and returns the failure body to end the stream with when the key
// is no longer live (revoked, rotated, expired) or no longer allowed to read popups. A store that
// does not answer ends nothing: the stream goes on, and the next heartbeat asks again.
func (s *stream) recheck() *failure {
	ctx, cancel := context.WithTimeout(s.ctx, s.a.o.RequestTimeout)
	defer cancel()
	p, err := s.a.o.Auth.Authenticate(ctx, s.creds)
	if err == nil {
		err = auth.RequireFederated(p)
	}
	if err == nil && p.OrgID != s.principal.OrgID {
		err = &auth.Error{Kind: auth.KindUnauthenticated, Message: "the key now belongs to another organization"}
	}
	if err == nil {
		err = auth.RequireScopes(p, auth.ScopePopupsRead)
	}
	if err == nil {
		s.readsCalls = p.Allows(auth.ScopeCallsRead)
		return nil
	}
	var ae *auth.Error
	if !errors.As(err, &ae) || ae.Kind == auth.KindUnavailable {
		if s.ctx.Err() == nil {
			s.a.log.Warn("popup stream: key re-check failed; the stream goes on", "trace_id", s.trace,
				"org_id", s.principal.OrgID, "error", err)
		}
		return nil
	}
	status := fiber.StatusUnauthorized
	if ae.Kind != auth.KindUnauthenticated {
		status = fiber.StatusForbidden
	}
	s.a.log.Info("popup stream: key refused on re-check", "trace_id", s.trace, "org_id", s.principal.OrgID,
		"client_id", s.principal.ClientID, "refusal", ae)
	return &failure{Error: strconv.Itoa(status) + " " + http.StatusText(status), Message: ae.Message, Scopes: ae.Scopes}
}

// validEventID reports whether id can go on an "id:" line: not empty, and without line breaks
// or NUL (which would end the line or make clients ignore the field).
func validEventID(id string) bool {
	return id != "" && !strings.ContainsAny(id, "\r\n\x00")
}
