// Package lookup asks each organization's client system who owns a ringing phone number, over
// HTTP, the way docs/caller-lookup.md describes: GET <url>?number=<E.164> with the
// organization's bearer token, answered 200 {"clients": [{"externalId": ..., "name": ...}]}.
//
// A Lookup serves every organization. It reads an organization's endpoint from the store and
// reuses it for a few seconds, bounds each request by the organization's timeout, remembers
// answers per organization and number (matches and misses for separate, short times), and keeps
// a circuit breaker per organization, so that an adapter that is down costs one timeout per
// breaker period instead of one per ringing phone.
package lookup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
	"golang.org/x/sync/singleflight"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/store"
)

// Errors a Lookup returns. Each one means the caller is unknown; test with errors.Is.
var (
	// ErrNotConfigured reports that the organization has no lookup endpoint: no client system was
	// asked, and none will be until the organization sets one.
	ErrNotConfigured = errors.New("lookup: no caller lookup configured")
	// ErrBreakerOpen reports that the organization's adapter failed too often lately and was not
	// asked.
	ErrBreakerOpen = errors.New("lookup: breaker open, adapter not asked")
	// ErrTimeout reports that the adapter did not answer within the organization's timeout.
	ErrTimeout = errors.New("lookup: adapter timed out")
	// ErrRefused reports that the adapter answered with a 4xx status.
	ErrRefused = errors.New("lookup: adapter refused")
	// ErrAdapter reports that the adapter could not be reached or answered with a status other
	// than 200 or 4xx.
	ErrAdapter = errors.New("lookup: adapter failed")
	// ErrBadAnswer reports that the adapter answered 200 with a body that is not the contract's:
	// not a JSON object with a "clients" array of objects whose "externalId" and "name" are
	// non-blank strings, or larger than Options.MaxBody.
	ErrBadAnswer = errors.New("lookup: adapter answer is not valid")
)

// OrgReader is the part of the store a Lookup reads: an organization and its Lookup settings.
// store.Store satisfies it.
type OrgReader interface {
	// GetOrg returns the organization, or an error wrapping store.ErrNotFound.
	GetOrg(ctx context.Context, id string) (store.Org, error)
}

// Options configure a Lookup. Zero values take the defaults given, which match the lookup.*
// configuration defaults.
type Options struct {
	// Orgs is where organizations' endpoints are read. Required.
	Orgs OrgReader
	// Timeout bounds one request for an organization that set no timeout of its own, and the
	// read of an organization's settings. Default 800ms; at most 10s.
	Timeout time.Duration
	// CacheTTL is how long a match (one or more clients) is remembered per organization and
	// number. Default 60s.
	CacheTTL time.Duration
	// MissTTL is how long "no client has this number" is remembered. Default 15s. Failures are
	// never remembered; the breaker handles them.
	MissTTL time.Duration
	// CacheSize bounds the remembered answers across all organizations. Default 10000.
	CacheSize int
	// BreakerFailures is how many lookups in a row must fail for an organization's breaker to
	// open. Default 5.
	BreakerFailures int
	// BreakerOpen is how long an open breaker answers ErrBreakerOpen before it lets one request
	// through (half-open); that request's success closes the breaker, its failure opens it again.
	// Default 30s.
	BreakerOpen time.Duration
	// SettingsTTL is how long an organization's endpoint, once read, is used before it is read
	// again, so that a change takes effect within it. Default 5s.
	SettingsTTL time.Duration
	// MaxBody is the largest answer body read, in bytes; a larger one is ErrBadAnswer. Default
	// 1 MiB.
	MaxBody int64
	// Transport makes the requests; nil means a transport of the Lookup's own (proxy settings
	// from the environment). Redirects are never followed: a 3xx answer is ErrAdapter.
	Transport http.RoundTripper
	// Logger receives breaker changes and settings read failures; nil discards.
	Logger *slog.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Now is the clock used for the settings and answer caches; default time.Now. (The breaker
	// keeps real time.)
	Now func() time.Time
}

// Lookup asks every organization's client system over HTTP; it is the ingest pipeline's
// CallerLookup. It is safe for concurrent
// use. Build it with New.
type Lookup struct {
	opts     Options
	client   *http.Client
	log      *slog.Logger
	answers  *lru.Cache[answerKey, answer] // each answer carries its expiry, per Options.Now
	settings singleflight.Group
	metrics  metrics

	mu   sync.Mutex
	orgs map[string]*orgState // replaced whole, never mutated, under mu
}

// orgState is what a Lookup knows of one organization.
type orgState struct {
	lookup  store.Lookup
	expires time.Time // per Options.Now: read the settings again after this
	breaker *gobreaker.CircuitBreaker[[]popup.Client]
}

type answerKey struct{ org, number string }

type answer struct {
	url     string // the endpoint that gave the answer; a changed endpoint is not asked the cache
	clients []popup.Client
	expires time.Time // per Options.Now
}

type metrics struct {
	results     *prometheus.CounterVec
	latency     prometheus.Histogram
	transitions *prometheus.CounterVec
	// byResult holds results' counter of each result, resolved once: every ring counts one, and
	// resolving a label value takes a hash and a lock each time (core/ingest's
	// BenchmarkCountEvents measures what resolving once saves).
	byResult map[string]prometheus.Counter
}

// Results counted by callwire_lookup_results_total.
const (
	resultMatched       = "matched"
	resultNoMatch       = "no_match"
	resultCachedMatch   = "cached_match"
	resultCachedNoMatch = "cached_no_match"
	resultNotConfigured = "not_configured"
	resultBreakerOpen   = "breaker_open"
	resultTimeout       = "timeout"
	resultRefused       = "refused"
	resultFailed        = "failed"
	resultBadAnswer     = "bad_answer"
	resultNoSettings    = "settings_unavailable"
)

// maxTimeout is the longest a lookup may take: the phone is ringing.
const maxTimeout = 10 * time.Second

// New returns a Lookup, or an error when the options are unusable or its metrics cannot be
// registered.
func New(o Options) (*Lookup, error) {
	if o.Orgs == nil {
		return nil, errors.New("lookup: an organization reader is required")
	}
	if o.Timeout < 0 || o.CacheTTL < 0 || o.MissTTL < 0 || o.BreakerOpen < 0 || o.SettingsTTL < 0 {
		return nil, errors.New("lookup: durations must not be negative")
	}
	if o.CacheSize < 0 || o.BreakerFailures < 0 || o.MaxBody < 0 {
		return nil, errors.New("lookup: sizes and counts must not be negative")
	}
	if o.Timeout > maxTimeout {
		return nil, fmt.Errorf("lookup: timeout %v is over the %v maximum", o.Timeout, maxTimeout)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Timeout, 800*time.Millisecond)
	def(&o.CacheTTL, time.Minute)
	def(&o.MissTTL, 15*time.Second)
	def(&o.BreakerOpen, 30*time.Second)
	def(&o.SettingsTTL, 5*time.Second)
	if o.CacheSize == 0 {
		o.CacheSize = 10000
	}
	if o.BreakerFailures == 0 {
		o.BreakerFailures = 5
	}
	if o.MaxBody == 0 {
		o.MaxBody = 1 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rt := o.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 16
		rt = t
	}
	m := metrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callwire_lookup_results_total",
			Help: "Caller lookups by result: matched, no_match, cached_match, cached_no_match, not_configured, breaker_open, timeout, refused, failed, bad_answer, settings_unavailable.",
		}, []string{"result"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "callwire_lookup_request_seconds",
			Help:    "Time of each request to an organization's lookup adapter, failures included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "callwire_lookup_breaker_transitions_total",
			Help: "Changes of organizations' lookup breakers, by the state entered: open, half_open, closed.",
		}, []string{"to"}),
		byResult: map[string]prometheus.Counter{},
	}
	for _, r := range []string{resultMatched, resultNoMatch, resultCachedMatch, resultCachedNoMatch, resultNotConfigured,
		resultBreakerOpen, resultTimeout, resultRefused, resultFailed, resultBadAnswer, resultNoSettings} {
		m.byResult[r] = m.results.WithLabelValues(r)
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{m.results, m.latency, m.transitions} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("lookup: register metrics: %w", err)
			}
		}
	}
	answers, err := lru.New[answerKey, answer](o.CacheSize)
	if err != nil {
		return nil, fmt.Errorf("lookup: answer cache: %w", err)
	}
	return &Lookup{
		opts: o,
		client: &http.Client{
			Transport:     rt,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log:     log,
		answers: answers,
		metrics: m,
		orgs:    map[string]*orgState{},
	}, nil
}

// Lookup returns the clients the organization's adapter says own the E.164 number: none, one or
// many. It returns ErrNotConfigured when the organization has no endpoint, and otherwise an
// error wrapping one of this package's errors when the caller must be treated as unknown. A
// request to the adapter takes at most the organization's timeout (or Options.Timeout), and
// less when ctx ends sooner. The returned slice is the caller's.
func (l *Lookup) Lookup(ctx context.Context, orgID, number string) ([]popup.Client, error) {
	if number == "" {
		return nil, errors.New("lookup: no number to look up")
	}
	st, err := l.orgState(ctx, orgID)
	if err != nil {
		l.count(resultNoSettings)
		return nil, err
	}
	if st.lookup.URL == "" {
		l.count(resultNotConfigured)
		return nil, ErrNotConfigured
	}
	key := answerKey{org: orgID, number: number}
	if a, ok := l.answers.Get(key); ok && a.url == st.lookup.URL && l.opts.Now().Before(a.expires) {
		if len(a.clients) > 0 {
			l.count(resultCachedMatch)
		} else {
			l.count(resultCachedNoMatch)
		}
		return slices.Clone(a.clients), nil
	}
	clients, err := st.breaker.Execute(func() ([]popup.Client, error) {
		return l.ask(ctx, orgID, st.lookup, number)
	})
	if err != nil {
		if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
			l.count(resultBreakerOpen)
			return nil, fmt.Errorf("%w: organization %s", ErrBreakerOpen, orgID)
		}
		l.count(failureResult(err))
		return nil, err
	}
	ttl := l.opts.CacheTTL
	if len(clients) == 0 {
		ttl = l.opts.MissTTL
		l.count(resultNoMatch)
	} else {
		l.count(resultMatched)
	}
	l.answers.Add(key, answer{url: st.lookup.URL, clients: clients, expires: l.opts.Now().Add(ttl)})
	return slices.Clone(clients), nil
}

// MayWait reports whether a lookup for orgID may wait on a client system: true unless the
// organization's settings, read as Lookup reads them (and cached as long), name no endpoint. When
// the settings cannot be read it reports true.
func (l *Lookup) MayWait(ctx context.Context, orgID string) bool {
	st, err := l.orgState(ctx, orgID)
	return err != nil || st.lookup.URL != ""
}

func (l *Lookup) count(result string) {
	if c, ok := l.metrics.byResult[result]; ok {
		c.Inc()
		return
	}
	l.metrics.results.WithLabelValues(result).Inc()
}

func failureResult(err error) string {
	switch {
	case errors.Is(err, ErrTimeout):
		return resultTimeout
	case errors.Is(err, ErrRefused):
		return resultRefused
	case errors.Is(err, ErrBadAnswer):
		return resultBadAnswer
	}
	return resultFailed
}

// errCallerGone marks a request abandoned because the caller's own context ended: it says
// nothing about the adapter, so the breaker does not count it.
var errCallerGone = errors.New("lookup: caller gave up")

// ask makes one request to the organization's adapter.
func (l *Lookup) ask(ctx context.Context, orgID string, set store.Lookup, number string) ([]popup.Client, error) {
	u, err := url.Parse(set.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: organization %s: lookup URL is not an absolute http or https URL", ErrAdapter, orgID)
	}
	q := u.Query()
	q.Set("number", number)
	u.RawQuery = q.Encode()
	where := "GET " + redact(u)

	timeout := set.Timeout
	if timeout <= 0 || timeout > maxTimeout {
		timeout = l.opts.Timeout
	}
	rctx, cancel := context.WithTimeoutCause(ctx, timeout, ErrTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: organization %s: %s: %w", ErrAdapter, orgID, where, err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "callwire-lookup/1")
	if set.Token != "" {
		req.Header.Set("Authorization", "Bearer "+set.Token)
	}

	start := time.Now()
	defer func() { l.metrics.latency.Observe(time.Since(start).Seconds()) }()
	fail := func(err error) error {
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("%w: organization %s: %s: %w", errCallerGone, orgID, where, context.Cause(ctx))
		case errors.Is(context.Cause(rctx), ErrTimeout):
			return fmt.Errorf("%w after %v: organization %s: %s", ErrTimeout, timeout, orgID, where)
		}
		return fmt.Errorf("%w: organization %s: %s: %w", ErrAdapter, orgID, where, err)
	}
	resp, err := l.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, query and all
		}
		return nil, fail(err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return nil, fmt.Errorf("%w: organization %s: %s: status %d", ErrRefused, orgID, where, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: organization %s: %s: status %d", ErrAdapter, orgID, where, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, l.opts.MaxBody+1))
	if err != nil {
		return nil, fail(fmt.Errorf("read answer: %w", err))
	}
	if int64(len(body)) > l.opts.MaxBody {
		return nil, fmt.Errorf("%w: organization %s: %s: answer is over %d bytes", ErrBadAnswer, orgID, where, l.opts.MaxBody)
	}
	clients, err := decodeAnswer(body)
	if err != nil {
		return nil, fmt.Errorf("%w: organization %s: %s: %w", ErrBadAnswer, orgID, where, err)
	}
	return clients, nil
}

// redact returns u without its query, user information and fragment, for messages: a query may
// hold the number or an adapter's own secret.
func redact(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// decodeAnswer checks that body is exactly the contract's answer: a JSON object whose "clients"
// is an array of objects, each with non-blank string "externalId" and "name". Other members are
// ignored.
func decodeAnswer(body []byte) ([]popup.Client, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, errors.New("answer is not a JSON object")
	}
	raw, ok := top["clients"]
	if !ok {
		return nil, errors.New(`answer has no "clients"`)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, errors.New(`"clients" is not an array`)
	}
	clients := make([]popup.Client, 0, len(items))
	for i, it := range items {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(it, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("clients[%d] is not an object", i)
		}
		var c popup.Client
		for _, f := range []struct {
			name string
			dst  *string
		}{{"externalId", &c.ExternalID}, {"name", &c.Name}} {
			v, ok := obj[f.name]
			if !ok || len(v) == 0 || v[0] != '"' || json.Unmarshal(v, f.dst) != nil || strings.TrimSpace(*f.dst) == "" {
				return nil, fmt.Errorf("clients[%d].%s is not a non-blank string", i, f.name)
			}
		}
		clients = append(clients, c)
	}
	return clients, nil
}

// orgState returns what is known of the organization, reading its settings when they are older
// than SettingsTTL. Concurrent reads for one organization are shared. When the read fails and
// the settings were known before, the old ones are used.
func (l *Lookup) orgState(ctx context.Context, orgID string) (*orgState, error) {
	now := l.opts.Now()
	l.mu.Lock()
	old := l.orgs[orgID]
	l.mu.Unlock()
	if old != nil && now.Before(old.expires) {
		return old, nil
	}
	ch := l.settings.DoChan(orgID, func() (any, error) {
		// Shared by every waiting caller, so no one caller's cancellation ends it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.Timeout)
		defer cancel()
		o, err := l.opts.Orgs.GetOrg(rctx, orgID)
		if errors.Is(err, store.ErrNotFound) {
			return store.Lookup{}, nil
		}
		return o.Lookup, err
	})
	var res singleflight.Result
	select {
	case res = <-ch:
	case <-ctx.Done():
		return nil, fmt.Errorf("lookup: organization %s: read settings: %w", orgID, context.Cause(ctx))
	}
	if res.Err != nil {
		if old != nil {
			l.log.Warn("caller lookup settings unreadable; using the last known", "org_id", orgID, "error", res.Err)
			return old, nil
		}
		return nil, fmt.Errorf("lookup: organization %s: read settings: %w", orgID, res.Err)
	}
	set := res.Val.(store.Lookup)

	l.mu.Lock()
	defer l.mu.Unlock()
	cur := l.orgs[orgID]
	next := &orgState{lookup: set, expires: now.Add(l.opts.SettingsTTL)}
	if cur != nil && cur.lookup.URL == set.URL && cur.lookup.Token == set.Token {
		next.breaker = cur.breaker // same endpoint: its record of failures stands
	} else {
		next.breaker = l.newBreaker(orgID)
	}
	l.orgs[orgID] = next
	return next, nil
}

// newBreaker returns a closed breaker for one organization's endpoint.
func (l *Lookup) newBreaker(orgID string) *gobreaker.CircuitBreaker[[]popup.Client] {
	failures := uint32(l.opts.BreakerFailures)
	return gobreaker.NewCircuitBreaker[[]popup.Client](gobreaker.Settings{
		Name:        orgID,
		MaxRequests: 1,
		Timeout:     l.opts.BreakerOpen,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errCallerGone) },
		OnStateChange: func(org string, from, to gobreaker.State) {
			name := strings.ReplaceAll(to.String(), "-", "_")
			l.metrics.transitions.WithLabelValues(name).Inc()
			from2 := strings.ReplaceAll(from.String(), "-", "_")
			if to == gobreaker.StateOpen {
				l.log.Warn("caller lookup breaker open; the adapter is not asked for a while", "org_id", org, "from", from2, "for", l.opts.BreakerOpen)
				return
			}
			l.log.Info("caller lookup breaker "+name, "org_id", org, "from", from2)
		},
	})
}
