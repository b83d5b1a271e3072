// Package httpapi serves callwire's HTTP API with Fiber: POST /api/v1/calls/events, the
// workstations' popup stream GET /api/v1/popups/stream, the front desk page GET /desk, health and
// readiness probes, and metrics. Every response, errors included, carries X-Trace-ID, and every
// failure has the body {"success": false, "error": <status line>, "message": <sentence>}.
package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/sdk/event"
)

// EventsPath is the one write endpoint.
const EventsPath = "/api/v1/calls/events"

// OpenAPIPath serves the API's OpenAPI document.
const OpenAPIPath = "/api/v1/openapi.yaml"

// TraceHeader carries the request's trace id on every response.
const TraceHeader = "X-Trace-ID"

// Authenticator proves who a request acts as.
type Authenticator interface {
	// Resolve names the principal, from cached immutable key facts when it can, with the check
	// the store runs alongside the work to prove the key still live.
	Resolve(ctx context.Context, c auth.Credentials) (auth.Resolution, error)
	// Authenticate reads the key from the store and proves it live.
	Authenticate(ctx context.Context, c auth.Credentials) (auth.Principal, error)
	// Forget drops cached facts after the store rejected their check.
	Forget(check auth.KeyCheck)
}

// Ingester runs the write pipeline for one authenticated, validated report.
type Ingester interface {
	Ingest(ctx context.Context, orgID, traceID string, events []event.Parsed, check *auth.KeyCheck) (ingest.Result, error)
}

// Options configure the API. Auth, Ingest and BaseContext are required; zero durations and limits
// take the defaults of core/config.
type Options struct {
	Auth   Authenticator
	Ingest Ingester
	// Ready reports whether the service can take writes (the store answers); nil means always.
	Ready func(ctx context.Context) error
	// Broker is the popup broker's state, named in /readyz and checked before a popup stream
	// subscribes; nil means the broker is not checked (the in-process broker is up as long as
	// the process is).
	Broker BrokerHealth
	// Replica, when not nil, reports whether the store's read replica answers; /readyz names it
	// "replica", degraded while it does not. The reads it serves fall back to the primary
	// meanwhile, so a replica that is down leaves the service ready.
	Replica func(ctx context.Context) error
	// BaseContext is the parent of every request's context. Cancel it only after shutdown.
	BaseContext context.Context
	Logger      *slog.Logger
	// Registerer and Gatherer serve and collect metrics; nil disables /metrics.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// BodyLimit is the largest body accepted in bytes; larger gets 413. Default 1 MiB.
	BodyLimit int
	// RequestTimeout bounds one request's work. Default 15s.
	RequestTimeout time.Duration
	ReadTimeout    time.Duration
	WriteTimeout   time.Duration
	IdleTimeout    time.Duration
	// RetryAfter is sent with every 503. Default 2s.
	RetryAfter time.Duration
	// Popups feeds GET /api/v1/popups/stream and so the front desk page; nil leaves both
	// unserved (404).
	Popups Popups
	// Ringing, when not nil, gives a popup stream, as it opens, the popups of the calls ringing
	// now, sent before the live ones (see docs/popup.md, "Reconnecting"); nil sends only popups
	// published after the stream opened.
	Ringing RingingPopups
	// Heartbeat is how often an idle popup stream sends a comment line, and how often a stream
	// re-reads its key so that a revoked key's stream ends. Default 15s.
	Heartbeat time.Duration
	// OpenAPI, when not nil, is served at OpenAPIPath as application/yaml.
	OpenAPI []byte
	// History serves the call history (GET /api/v1/calls, /api/v1/calls/{id}); nil leaves it
	// unserved (404).
	History History
	// Notices, when not nil, is told after each dismissal that the organization's to-call-back
	// list changed, so that every desk reads it again (a popup.Broker satisfies it).
	Notices ingest.Notifier
	// NoticeTimeout bounds sending that notice. Default 500ms.
	NoticeTimeout time.Duration
	// StreamContext is the parent of every popup stream and CSV export, which outlive their
	// request. Cancel it
	// when shutdown begins, so that open streams end and the shutdown does not wait for them;
	// nil means BaseContext.
	StreamContext context.Context
}

type api struct {
	o          Options
	log        *slog.Logger
	retryAfter string
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	inFlight   prometheus.Gauge
	streams    streamMetrics
	// routes are the paths served, for the route label of a request no handler saw: the value
	// is the label, which must not alias the request's buffer.
	routes map[string]string
	// parsers are event.Parsers, each used by one request at a time: a request whose body has a
	// problem reads it into a tree the previous one left, rather than allocating one. A parser
	// is put back as soon as the body is read: its tree takes up to 200 KiB.
	parsers sync.Pool
	// rooms are event.Rooms, each holding one request's events until the request is answered,
	// so that a request does not allocate its events' room (sdk/event's BenchmarkParseBody
	// measures both).
	rooms sync.Pool
}

// readBufferSize bounds the request line and headers; larger is answered 431.
const readBufferSize = 16 << 10

// New returns the Fiber app serving the API.
func New(o Options) (*fiber.App, error) {
	if o.Auth == nil || o.Ingest == nil || o.BaseContext == nil {
		return nil, errors.New("httpapi: Auth, Ingest and BaseContext are required")
	}
	if o.BodyLimit <= 0 {
		o.BodyLimit = 1 << 20
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 15 * time.Second
	}
	if o.NoticeTimeout <= 0 {
		o.NoticeTimeout = 500 * time.Millisecond
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 2 * time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.StreamContext == nil {
		o.StreamContext = o.BaseContext
	}
	a := &api{o: o, log: o.Logger, retryAfter: strconv.Itoa(int((o.RetryAfter + time.Second - 1) / time.Second))}
	a.parsers.New = func() any { return new(event.Parser) }
	a.rooms.New = func() any { return new(event.Room) }
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "callwire_http_requests_total", Help: "HTTP requests by route and status.",
	}, []string{"route", "status"})
	a.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "callwire_http_request_seconds", Help: "HTTP request latency by route.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"route"})
	a.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "callwire_http_requests_in_flight",
		Help: "HTTP requests being handled. A popup stream counts only while it opens; callwire_popup_streams_open counts open streams.",
	})
	a.streams = newStreamMetrics()
	if o.Registerer != nil {
		for _, c := range append([]prometheus.Collector{a.requests, a.latency, a.inFlight}, a.streams.collectors()...) {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("httpapi: register metrics: %w", err)
			}
		}
	}
	app := fiber.New(fiber.Config{
		AppName:               "callwire",
		BodyLimit:             o.BodyLimit,
		ReadTimeout:           o.ReadTimeout,
		WriteTimeout:          o.WriteTimeout,
		IdleTimeout:           o.IdleTimeout,
		DisableStartupMessage: true,
		ErrorHandler:          a.errorHandler,
		JSONEncoder:           marshalNoEscape,
		ReadBufferSize:        readBufferSize,
	})
	app.Server().HeaderReceived = a.streamRequestConfig
	a.answerUnread(app)
	app.Use(a.middleware)
	app.Post(EventsPath, a.postEvents)
	if o.Popups != nil {
		app.Get(PopupsStreamPath, a.streamPopups)
		if err := a.serveDesk(app); err != nil {
			return nil, err
		}
	}
	if o.OpenAPI != nil {
		doc := o.OpenAPI
		app.Get(OpenAPIPath, func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderContentType, "application/yaml")
			return c.Send(doc)
		})
	}
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"status": "ok"}) })
	app.Get("/readyz", a.readyz)
	if o.Gatherer != nil {
		app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{})))
	}
	app.All(EventsPath, func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderAllow, fiber.MethodPost)
		return fiber.NewError(fiber.StatusMethodNotAllowed, "use POST to submit call events")
	})
	// After the events path, so that GET /api/v1/calls/events stays a 405, not a call's id.
	if o.History != nil {
		app.Get(CallsPath, a.listCalls)
		app.Get(CallsPath+"/:id", a.getCall)
		app.Get(CallbacksPath, a.listCallbacks)
		app.Post(CallbacksPath+"/:number/dismiss", a.dismissCallback)
	}
	a.routes = map[string]string{}
	for _, r := range app.GetRoutes(true) {
		if !strings.ContainsAny(r.Path, ":*+") {
			a.routes[r.Path] = r.Path
		}
	}
	return app, nil
}

// errUnknownMethod is what answerUnread answers for a method Fiber does not route.
var errUnknownMethod = errors.New("unknown method")

// answerUnread makes the server's own answers go through unread, as the middleware's do not see
// them: fasthttp answers a request it cannot read (body over the limit, too slow, malformed,
// headers too large) before any handler runs, and Fiber answers a method it does not know
// before any middleware.
func (a *api) answerUnread(app *fiber.App) {
	srv := app.Server()
	// The error of a request that could not be read is logged; without this it would carry the
	// request's first bytes, credentials included.
	srv.SecureErrorLogMessage = true
	srv.ErrorHandler = func(fctx *fasthttp.RequestCtx, err error) { a.unread(app, fctx, err) }
	route := srv.Handler
	srv.Handler = func(fctx *fasthttp.RequestCtx) {
		switch string(fctx.Method()) {
		case fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodDelete,
			fiber.MethodConnect, fiber.MethodOptions, fiber.MethodTrace, fiber.MethodPatch:
			route(fctx)
		default:
			a.unread(app, fctx, errUnknownMethod)
		}
	}
}

// unread answers a request no handler saw, with the failure body and a trace id, and logs and
// counts it once, as the middleware does for the others. err says why: errUnknownMethod, or
// what fasthttp met reading the request.
//
// fasthttp keeps the request's header only when the body was refused for its declared length
// or the method is unknown; otherwise (too slow, malformed, the connection broke, a chunked body
// over the limit) the line has no method or path, a new trace id, and the route "unmatched".
func (a *api) unread(app *fiber.App, fctx *fasthttp.RequestCtx, err error) {
	c := app.AcquireCtx(fctx)
	defer app.ReleaseCtx(c)
	known := errors.Is(err, errUnknownMethod) || len(fctx.Request.Header.RawHeaders()) > 0
	tr := trace(c)
	status, msg := a.unreadAnswer(c, err)
	if ferr := a.fail(c, status, msg, nil); ferr != nil {
		a.log.Error("writing error response", "trace_id", tr, "error", ferr)
	}
	route := "unmatched"
	args := []any{"trace_id", tr}
	if known {
		if r, ok := a.routes[c.Path()]; ok {
			route = r
		}
		args = append(args, "method", c.Method(), "path", c.Path())
	}
	a.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	a.log.Log(a.o.BaseContext, level, "request", append(args, "status", status, "error", err.Error())...)
}

// unreadAnswer is the status and message for a request no handler saw.
func (a *api) unreadAnswer(c *fiber.Ctx, err error) (int, string) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, errUnknownMethod):
		return fiber.StatusBadRequest, "method " + strconv.Quote(c.Method()) + " is not supported"
	case errors.As(err, &small):
		return fiber.StatusRequestHeaderFieldsTooLarge, "the request line and headers are larger than " + strconv.Itoa(readBufferSize) + " bytes"
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return fiber.StatusRequestEntityTooLarge, a.tooLarge()
	case errors.Is(err, fasthttp.ErrTimeout) || errors.As(err, &ne) && ne.Timeout():
		within := ""
		if a.o.ReadTimeout > 0 {
			within = " within " + a.o.ReadTimeout.String()
		}
		return fiber.StatusRequestTimeout, "the request was not received in full" + within + "; nothing was stored, send it again"
	}
	return fiber.StatusBadRequest, "the request could not be read: it is not well-formed HTTP/1.1, or the connection broke before it was complete"
}

// tooLarge is the message of a 413. The body was not read, so whether it holds one event or a
// batch is unknown: the message fits both.
func (a *api) tooLarge() string {
	return "body is larger than " + strconv.Itoa(a.o.BodyLimit) + " bytes; nothing was stored. A batch can be split into smaller requests; " +
		"a single event this large must be made smaller (usually its raw record)"
}

// middleware gives every request a trace id and a context, recovers panics, and logs and counts
// the request.
func (a *api) middleware(c *fiber.Ctx) (err error) {
	start := time.Now()
	a.inFlight.Inc()
	defer a.inFlight.Dec()
	trace := traceID(c)
	c.Locals(traceKey{}, trace)
	c.Set(TraceHeader, trace)
	ctx, cancel := context.WithTimeout(a.o.BaseContext, a.o.RequestTimeout)
	defer cancel()
	c.SetUserContext(ctx)
	defer func() {
		if r := recover(); r != nil {
			a.log.Error("panic serving request", "trace_id", trace, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fiber.NewError(fiber.StatusInternalServerError, "internal error; the request was not processed")
		}
		if err != nil {
			if herr := a.errorHandler(c, err); herr != nil {
				a.log.Error("writing error response", "trace_id", trace, "error", herr)
			}
			err = nil
		}
		status := c.Response().StatusCode()
		route := c.Route().Path
		if status == fiber.StatusNotFound {
			route = "unmatched"
		}
		a.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		a.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		if a.log.Enabled(ctx, level) { // the arguments cost allocations even when not logged
			a.log.Log(ctx, level, "request", "trace_id", trace, "method", c.Method(), "path", c.Path(),
				"status", status, "duration_ms", float64(time.Since(start).Microseconds())/1000)
		}
	}()
	return c.Next()
}

type traceKey struct{}

// traceID returns the request's X-Trace-ID when it is a sensible token (1 to 128 characters of
// letters, digits, '-', '_', '.', ':'), otherwise a new random one. Reporters may thus correlate
// their own logs with ours.
func traceID(c *fiber.Ctx) string {
	if v := c.Get(TraceHeader); v != "" && len(v) <= 128 {
		ok := true
		for i := 0; i < len(v) && ok; i++ {
			ch := v[i]
			ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
				ch == '-' || ch == '_' || ch == '.' || ch == ':'
		}
		if ok {
			return strings.Clone(v)
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func trace(c *fiber.Ctx) string {
	if v, ok := c.Locals(traceKey{}).(string); ok {
		return v
	}
	// The request failed before the middleware ran (body too large, malformed request line).
	t := traceID(c)
	c.Locals(traceKey{}, t)
	return t
}

// failure is the body of every error response.
type failure struct {
	Success bool            `json:"success"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
	Fields  []event.Problem `json:"problems,omitempty"`
	Scopes  []string        `json:"missingScopes,omitempty"`
}

func (a *api) fail(c *fiber.Ctx, status int, message string, extra func(*failure)) error {
	c.Set(TraceHeader, trace(c))
	if status == fiber.StatusServiceUnavailable {
		c.Set(fiber.HeaderRetryAfter, a.retryAfter)
	}
	f := failure{Error: strconv.Itoa(status) + " " + http.StatusText(status), Message: message}
	if extra != nil {
		extra(&f)
	}
	return c.Status(status).JSON(f)
}

// errorHandler renders any error that reached Fiber as the failure body.
func (a *api) errorHandler(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if !errors.As(err, &fe) {
		a.log.Error("unhandled error", "trace_id", trace(c), "error", err)
		return a.fail(c, fiber.StatusInternalServerError, "internal error; the request was not processed", nil)
	}
	msg := fe.Message
	switch fe.Code {
	case fiber.StatusNotFound:
		msg = "no such endpoint: " + c.Method() + " " + c.Path()
	case fiber.StatusRequestEntityTooLarge:
		msg = a.tooLarge()
	case fiber.StatusMethodNotAllowed:
		if c.Path() != EventsPath {
			msg = "method " + c.Method() + " is not allowed here"
		}
	}
	if fe.Code >= 500 && fe.Code != fiber.StatusServiceUnavailable {
		msg = "internal error; the request was not processed"
	}
	return a.fail(c, fe.Code, msg, nil)
}

// BrokerHealth is the popup broker's state as readiness and the popup stream see it.
// *popup.Redis satisfies it.
type BrokerHealth interface {
	// Up reports whether the broker can carry popups now.
	Up() bool
}

// ShardedBrokerHealth is a BrokerHealth whose health is also kept per shard, as *popup.Redis's
// on a Redis Cluster: while a shard is down the broker is up for the organizations of the other
// shards, and /readyz names it degraded.
type ShardedBrokerHealth interface {
	BrokerHealth
	// ShardsDown reports how many shards are down now.
	ShardsDown() int
}

// Readiness check results, as /readyz names them.
const (
	checkOK       = "ok"
	checkDegraded = "degraded"
)

// readiness is the body of a 200 from /readyz: status "ready" (the store answers, so calls are
// recorded) and the result of each check. A broker that is down, or has a shard down, leaves the
// service ready, with the broker "degraded": calls are still recorded, only (some of) their popups
// are missed. A read replica
// that does not answer leaves it ready too, with the replica "degraded": its reads are served by
// the primary.
type readiness struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func (a *api) readyz(c *fiber.Ctx) error {
	r := readiness{Status: "ready", Checks: map[string]string{}}
	if a.o.Ready != nil {
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		if err := a.o.Ready(ctx); err != nil {
			a.log.Warn("not ready", "trace_id", trace(c), "error", err)
			return a.fail(c, fiber.StatusServiceUnavailable, "not ready: the store does not answer", nil)
		}
		r.Checks["store"] = checkOK
	}
	if a.o.Replica != nil {
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		defer cancel()
		r.Checks["replica"] = checkOK
		if err := a.o.Replica(ctx); err != nil {
			a.log.Warn("read replica degraded: its reads go to the primary", "trace_id", trace(c), "error", err)
			r.Checks["replica"] = checkDegraded
		}
	}
	if a.o.Broker != nil {
		r.Checks["broker"] = checkOK
		if !a.o.Broker.Up() {
			r.Checks["broker"] = checkDegraded
		} else if sb, ok := a.o.Broker.(ShardedBrokerHealth); ok && sb.ShardsDown() > 0 {
			r.Checks["broker"] = checkDegraded
		}
	}
	return c.JSON(r)
}

func (a *api) postEvents(c *fiber.Ctx) error {
	ctx := c.UserContext()
	tr := trace(c)
	creds := auth.Credentials{
		ClientID:      c.Get("Client-ID"),
		ClientSecret:  c.Get("Client-Secret"),
		Authorization: c.Get(fiber.HeaderAuthorization),
	}
	rs, err := a.o.Auth.Resolve(ctx, creds)
	if err != nil {
		return a.authFailure(c, tr, err)
	}
	p := rs.Principal
	// refuse answers anything but success. With a principal from cached key facts it first makes
	// sure the key is live, so that a dead key always gets 401, never a 400 or 403.
	refuse := func(answer func() error) error {
		if !rs.Verified {
			if _, err := a.o.Auth.Authenticate(ctx, creds); err != nil {
				a.o.Auth.Forget(rs.Check)
				return a.authFailure(c, tr, err)
			}
		}
		return answer()
	}
	if err := auth.RequireFederated(p); err != nil {
		return refuse(func() error { return a.authFailure(c, tr, err) })
	}
	// A key that may post no event type at all is refused before its body is read: 403, not
	// whatever the body would earn.
	if !holdsAnyEventScope(p) {
		return refuse(func() error {
			return a.authFailure(c, tr, auth.RequireEventScopes(p, []string{string(event.CallReceived)}))
		})
	}
	if msg := checkContentType(c.Get(fiber.HeaderContentType)); msg != "" {
		return refuse(func() error { return a.fail(c, fiber.StatusBadRequest, msg, nil) })
	}
	if enc := c.Get(fiber.HeaderContentEncoding); enc != "" && !strings.EqualFold(enc, "identity") {
		return refuse(func() error {
			return a.fail(c, fiber.StatusBadRequest, "Content-Encoding "+strconv.Quote(enc)+" is not supported: send the JSON body uncompressed", nil)
		})
	}
	// The raw body is Fiber's buffer, and the events' slice and parties are room's: both stay
	// valid until the handler returns, which is after the write and after the response's body
	// is written. Ingest keeps nothing of them past it.
	room := a.rooms.Get().(*event.Room)
	defer func() {
		room.Forget()
		a.rooms.Put(room)
	}()
	parser := a.parsers.Get().(*event.Parser)
	events, _, err := parser.ParseInto(room, c.Request().Body())
	a.parsers.Put(parser) // the events share no memory with it
	if err != nil {
		return refuse(func() error {
			v, ok := event.AsValidationError(err)
			if !ok {
				return a.fail(c, fiber.StatusBadRequest, err.Error(), nil)
			}
			return a.fail(c, fiber.StatusBadRequest, "the body failed validation: "+v.Error(), func(f *failure) { f.Fields = v.Problems })
		})
	}
	types := make([]string, len(events))
	for i := range events {
		types[i] = string(events[i].Event.Type)
	}
	if err := auth.RequireEventScopes(p, types); err != nil {
		return refuse(func() error { return a.authFailure(c, tr, err) })
	}
	res, err := a.o.Ingest.Ingest(ctx, p.OrgID, tr, events, &rs.Check)
	if err != nil {
		if errors.Is(err, ingest.ErrKeyRejected) {
			a.o.Auth.Forget(rs.Check)
			return a.authFailure(c, tr, auth.Rejected(err))
		}
		if errors.Is(err, ingest.ErrUnavailable) {
			a.log.Warn("store unavailable; answered 503", "trace_id", tr, "error", err)
			return a.fail(c, fiber.StatusServiceUnavailable, "the service is temporarily unable to store calls; nothing was stored, resend the same request after Retry-After seconds", nil)
		}
		if ctx.Err() != nil {
			a.log.Warn("request ran out of time; answered 503", "trace_id", tr, "error", err)
			return a.fail(c, fiber.StatusServiceUnavailable, "the request took too long; resend the same request after Retry-After seconds", nil)
		}
		a.log.Error("ingest failed", "trace_id", tr, "error", err)
		return a.fail(c, fiber.StatusInternalServerError, "internal error; resend the same request: it is safe to retry", nil)
	}
	status := fiber.StatusOK
	if res.Created() {
		status = fiber.StatusCreated
	}
	c.Status(status)
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	// Written into the response's own body buffer, which the server lends from its pool and
	// takes back once the response is sent.
	resp := c.Response()
	body := resp.SwapBody(nil)
	resp.SwapBody(appendSuccess(slices.Grow(body[:0], successSize(res)), res))
	return nil
}

func (a *api) authFailure(c *fiber.Ctx, tr string, err error) error {
	var ae *auth.Error
	if !errors.As(err, &ae) {
		if c.UserContext().Err() != nil {
			a.log.Warn("request ran out of time during authentication; answered 503", "trace_id", tr, "error", err)
			return a.fail(c, fiber.StatusServiceUnavailable, "the request took too long; resend the same request after Retry-After seconds", nil)
		}
		a.log.Error("authentication failed", "trace_id", tr, "error", err)
		return a.fail(c, fiber.StatusInternalServerError, "internal error while checking the credential; the request was not processed", nil)
	}
	a.log.Info("request refused", "trace_id", tr, "refusal", ae)
	switch ae.Kind {
	case auth.KindForbidden:
		return a.fail(c, fiber.StatusForbidden, ae.Message, func(f *failure) { f.Scopes = ae.Scopes })
	case auth.KindNotFederated:
		return a.fail(c, fiber.StatusForbidden, ae.Message, nil)
	case auth.KindUnavailable:
		return a.fail(c, fiber.StatusServiceUnavailable, ae.Message, nil)
	}
	c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="callwire"`)
	return a.fail(c, fiber.StatusUnauthorized, ae.Message, nil)
}

// checkContentType returns "" for application/json (any parameters, charset utf-8 if given),
// else the message of the 400.
func checkContentType(ct string) string {
	switch ct {
	case "application/json", "application/json; charset=utf-8":
		return "" // what nearly every client sends, without parsing it
	case "":
		return "Content-Type is missing: send the body as application/json"
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return "Content-Type must be application/json, got " + strconv.Quote(ct)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "charset must be utf-8, got " + strconv.Quote(cs)
	}
	return ""
}

// marshalNoEscape encodes v as JSON without escaping <, > and &, so that messages and SIP URIs
// read as written.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// holdsAnyEventScope reports whether the principal may post at least one event type.
func holdsAnyEventScope(p auth.Principal) bool {
	for _, t := range event.Types() {
		if p.Allows(auth.EventScope(string(t))) {
			return true
		}
	}
	return false
}
