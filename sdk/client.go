// Package sdk is what an integrator imports to report calls to callwire: the HTTP client for the
// ingest endpoint (this package), the canonical vocabulary (sdk/event), and the helpers for
// writing and testing translators.
//
// A Client sends canonical events to POST /api/v1/calls/events and retries what is safe to retry:
// every request is idempotent on the server (calls upsert, events deduplicate), so the client
// resends the identical body after a 503 (honouring Retry-After), another 5xx, a timeout or a
// connection error, with exponential backoff and full jitter. It never retries 400, 401 or 403.
package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/callwire/callwire/sdk/event"
)

// EventsPath is the ingest endpoint, relative to the base URL.
const EventsPath = "/api/v1/calls/events"

// Credential is an API key: its Client ID and secret.
type Credential struct {
	ClientID string
	Secret   string
	// Bearer sends the secret as "Authorization: Bearer <secret>" instead of the Client-ID and
	// Client-Secret headers.
	Bearer bool
}

// Options tune a Client. The zero value is ready to use; each field documents its default.
type Options struct {
	// HTTPClient sends the requests. Default: a pooled client with a 15s timeout per attempt.
	HTTPClient *http.Client
	// MaxAttempts is how many times one request is tried in all. Default 8.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the wait between attempts: attempt n waits a random time
	// from zero to min(MaxBackoff, MinBackoff·2ⁿ) ("full jitter"). Defaults 250ms and 30s.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// MaxRetryAfter caps how long a Retry-After header may make the client wait. Default 5m.
	MaxRetryAfter time.Duration
	// UserAgent is sent with every request. Default "callwire-sdk".
	UserAgent string
}

// Client sends events to one callwire server. It is safe for concurrent use.
type Client struct {
	url        string
	cred       Credential
	rc         *retryablehttp.Client
	userAgent  string
	maxRetryAt time.Duration
}

// New returns a client for the server at baseURL (for example "https://callwire.example.org"),
// authenticating with cred. It fails on an unusable URL, an empty secret, or negative options.
func New(baseURL string, cred Credential, o Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sdk: base url %q must be an absolute http or https URL", baseURL)
	}
	if cred.Secret == "" || (!cred.Bearer && cred.ClientID == "") {
		return nil, errors.New("sdk: credential needs a secret, and a client id unless it is sent as a bearer token")
	}
	if o.MaxAttempts < 0 || o.MinBackoff < 0 || o.MaxBackoff < 0 || o.MaxRetryAfter < 0 {
		return nil, errors.New("sdk: options must not be negative")
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 8
	}
	if o.MinBackoff == 0 {
		o.MinBackoff = 250 * time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.MaxRetryAfter == 0 {
		o.MaxRetryAfter = 5 * time.Minute
	}
	if o.UserAgent == "" {
		o.UserAgent = "callwire-sdk"
	}
	rc := retryablehttp.NewClient()
	rc.Logger = nil
	if o.HTTPClient != nil {
		rc.HTTPClient = o.HTTPClient
	} else {
		rc.HTTPClient.Timeout = 15 * time.Second
	}
	rc.RetryMax = o.MaxAttempts - 1
	rc.RetryWaitMin, rc.RetryWaitMax = o.MinBackoff, o.MaxBackoff
	c := &Client{url: strings.TrimRight(u.String(), "/") + EventsPath, cred: cred, rc: rc,
		userAgent: o.UserAgent, maxRetryAt: o.MaxRetryAfter}
	rc.CheckRetry = retryPolicy
	rc.RequestLogHook = countAttempt
	rc.Backoff = c.backoff
	// Hand back the last response (or error) when the attempts run out, so that the caller gets
	// the server's own answer in an *Error.
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return c, nil
}

// retryPolicy retries transport errors and 5xx (429 too), never other statuses, and stops when
// the context ends.
func retryPolicy(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return true, nil
	}
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500, nil
}

// backoff waits at least what Retry-After asks on a 503 or 429, plus a little jitter; otherwise
// a random time up to the exponential bound.
func (c *Client) backoff(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
	if lo <= 0 {
		lo = time.Millisecond
	}
	if resp != nil && (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests) {
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			// Never sooner than asked; a little jitter after it so that reporters do not return
			// in step.
			return min(d, c.maxRetryAt) + rand.N(lo+1)
		}
	}
	bound := hi
	if attempt < 32 {
		if b := lo << attempt; b > 0 && b < hi {
			bound = b
		}
	}
	return rand.N(bound + 1)
}

// retryAfter parses a Retry-After value: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		if s > int64(24*time.Hour/time.Second) {
			s = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// CallEntry is the server's answer for one call.
type CallEntry struct {
	ID             string         `json:"id"`
	ProviderCallID string         `json:"providerCallId"`
	Provider       string         `json:"provider,omitempty"`
	Created        bool           `json:"created"`
	CRMClients     []ClientRecord `json:"crmClients"`
}

// ClientRecord is a client of the clinic's system matched by the caller lookup.
type ClientRecord struct {
	ExternalID string `json:"externalId"`
	Name       string `json:"name"`
}

// EventEntry is the server's answer for one event.
type EventEntry struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	DedupeKey string `json:"dedupeKey"`
	Duplicate bool   `json:"duplicate"`
}

// Result is a successful answer: 201 when the request created a call, 200 otherwise.
type Result struct {
	Status  int
	TraceID string
	Calls   []CallEntry
	Events  []EventEntry
}

// Error is a refusal or a failure that retries did not overcome. Branch on Status (and on
// Retryable or Permanent), never on Message, whose wording changes.
type Error struct {
	// Status is the HTTP status, or 0 when no response arrived (see Err).
	Status int
	// Code is the server's "error" field, such as "403 Forbidden".
	Code string
	// Message is the server's human-readable explanation.
	Message string
	// Problems lists every field the server refused, for a 400.
	Problems []event.Problem
	// MissingScopes lists the scopes the key lacks, for a 403.
	MissingScopes []string
	// TraceID is the X-Trace-ID of the last response, to quote when asking about it.
	TraceID string
	// Attempts is how many times the request was sent.
	Attempts int
	// RetryAfter is the wait the last response asked for in its Retry-After header (a 503 or
	// 429), capped at 24 hours; zero when it asked for none. A caller that resends later must
	// not resend sooner.
	RetryAfter time.Duration
	// FromServer is true when the answer was callwire's own failure body
	// ({"success": false, "error", "message"}), false when something else answered (a proxy
	// in front of the server, say) or no answer arrived. Only a refusal from the server itself
	// says anything about the events.
	FromServer bool
	// Err is the transport error when no response arrived, or a local validation error.
	Err error
}

// Error describes the failure.
func (e *Error) Error() string {
	switch {
	case e.Status == 0 && e.Err != nil:
		return fmt.Sprintf("callwire: %v", e.Err)
	case e.TraceID != "":
		return fmt.Sprintf("callwire: %s: %s (trace %s)", e.Code, e.Message, e.TraceID)
	}
	return fmt.Sprintf("callwire: %s: %s", e.Code, e.Message)
}

// Unwrap returns the transport or validation error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether sending the same request again later may succeed: no response, a
// 5xx, or a 429.
func (e *Error) Retryable() bool {
	var v *event.ValidationError
	if errors.As(e.Err, &v) {
		return false
	}
	return e.Status == 0 || e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

// Permanent reports whether the request itself must change before it can succeed (a 4xx other
// than 429, or a body that failed validation before sending).
func (e *Error) Permanent() bool { return !e.Retryable() }

// IsRetryable reports whether err is an *Error that a later resend may overcome. A context
// error is not.
func IsRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Retryable() && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// SendOne sends one event as one request.
func (c *Client) SendOne(ctx context.Context, e event.Event) (Result, error) {
	if err := e.Validate(); err != nil {
		return Result{}, &Error{Code: "invalid event", Message: err.Error(), Err: err}
	}
	body, err := e.MarshalJSON()
	if err != nil {
		return Result{}, &Error{Code: "invalid event", Message: err.Error(), Err: err}
	}
	return c.post(ctx, body)
}

// SendBatch sends 1 to 50 events as one request: all of them are accepted, or none.
func (c *Client) SendBatch(ctx context.Context, events []event.Event) (Result, error) {
	if len(events) == 0 || len(events) > event.MaxBatch {
		err := fmt.Errorf("a batch holds 1 to %d events, got %d", event.MaxBatch, len(events))
		return Result{}, &Error{Code: "invalid batch", Message: err.Error(), Err: err}
	}
	var problems []event.Problem
	for i := range events {
		if err := events[i].Validate(); err != nil {
			v, _ := event.AsValidationError(err)
			for _, p := range v.Problems {
				p.Field = "events[" + strconv.Itoa(i) + "]." + p.Field
				problems = append(problems, p)
			}
		}
	}
	if len(problems) > 0 {
		err := &event.ValidationError{Problems: problems}
		return Result{}, &Error{Code: "invalid event", Message: err.Error(), Problems: problems, Err: err}
	}
	body, err := json.Marshal(struct {
		Events []event.Event `json:"events"`
	}{events})
	if err != nil {
		return Result{}, &Error{Code: "invalid event", Message: err.Error(), Err: err}
	}
	return c.post(ctx, body)
}

// Send sends events in the order given, the way the API advises: each call_received alone (it
// rings a phone, so it should not wait for anything), the rest in batches of at most 50
// consecutive events. It stops at the first request that fails and returns the results so far
// with the error; the events of that request and after it were not all stored.
func (c *Client) Send(ctx context.Context, events ...event.Event) ([]Result, error) {
	var results []Result
	flush := func(batch []event.Event) error {
		var r Result
		var err error
		if len(batch) == 1 {
			r, err = c.SendOne(ctx, batch[0])
		} else {
			r, err = c.SendBatch(ctx, batch)
		}
		if err == nil {
			results = append(results, r)
		}
		return err
	}
	var batch []event.Event
	for _, e := range events {
		if e.Type == event.CallReceived {
			if len(batch) > 0 {
				if err := flush(batch); err != nil {
					return results, err
				}
				batch = nil
			}
			if err := flush([]event.Event{e}); err != nil {
				return results, err
			}
			continue
		}
		batch = append(batch, e)
		if len(batch) == event.MaxBatch {
			if err := flush(batch); err != nil {
				return results, err
			}
			batch = nil
		}
	}
	if len(batch) > 0 {
		if err := flush(batch); err != nil {
			return results, err
		}
	}
	return results, nil
}

// Post sends an already encoded body (one event or {"events": [...]}) as it is, with the
// client's retries: the same bytes on every attempt. Use it to resend stored requests exactly.
func (c *Client) Post(ctx context.Context, body []byte) (Result, error) {
	return c.post(ctx, body)
}

func (c *Client) post(ctx context.Context, body []byte) (Result, error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, c.url, body)
	if err != nil {
		return Result{}, &Error{Err: fmt.Errorf("build request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.cred.Bearer {
		req.Header.Set("Authorization", "Bearer "+c.cred.Secret)
	} else {
		req.Header.Set("Client-ID", c.cred.ClientID)
		req.Header.Set("Client-Secret", c.cred.Secret)
	}
	attempts := 0
	req.Request = req.Request.WithContext(context.WithValue(ctx, attemptsKey{}, &attempts))
	resp, err := c.rc.Do(req)
	if err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return Result{}, &Error{Attempts: attempts, Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return Result{}, &Error{Status: 0, Attempts: attempts, TraceID: resp.Header.Get("X-Trace-ID"), Err: fmt.Errorf("read response: %w", err)}
	}
	trace := resp.Header.Get("X-Trace-ID")
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated {
		var ok struct {
			Success bool         `json:"success"`
			Calls   []CallEntry  `json:"calls"`
			Events  []EventEntry `json:"events"`
		}
		if err := json.Unmarshal(raw, &ok); err != nil || !ok.Success {
			return Result{}, &Error{Status: resp.StatusCode, Code: resp.Status, Message: "the server's answer is not a success body", TraceID: trace, Attempts: attempts, Err: err}
		}
		return Result{Status: resp.StatusCode, TraceID: trace, Calls: ok.Calls, Events: ok.Events}, nil
	}
	var f struct {
		Success       *bool           `json:"success"`
		Error         string          `json:"error"`
		Message       string          `json:"message"`
		Problems      []event.Problem `json:"problems"`
		MissingScopes []string        `json:"missingScopes"`
	}
	fromCore := json.Unmarshal(raw, &f) == nil && f.Success != nil && !*f.Success && f.Error != "" && f.Message != ""
	if f.Error == "" {
		f.Error = resp.Status
	}
	if f.Message == "" {
		f.Message = strings.TrimSpace(string(bytes.TrimSpace(raw[:min(len(raw), 512)])))
	}
	var wait time.Duration
	if resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests {
		wait, _ = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return Result{}, &Error{Status: resp.StatusCode, Code: f.Error, Message: f.Message, Problems: f.Problems,
		MissingScopes: f.MissingScopes, TraceID: trace, Attempts: attempts, RetryAfter: wait, FromServer: fromCore}
}

// attemptsKey carries a request's attempt counter in its context, for the RequestLogHook.
type attemptsKey struct{}

// countAttempt records that an attempt of the request is about to be sent.
func countAttempt(_ retryablehttp.Logger, r *http.Request, attempt int) {
	if n, ok := r.Context().Value(attemptsKey{}).(*int); ok {
		*n = attempt + 1
	}
}
