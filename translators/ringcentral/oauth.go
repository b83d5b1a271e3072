package ringcentral

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// jwtGrant is the OAuth grant type of RingCentral's JWT flow (RFC 7523).
const jwtGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// APIError is an answer from RingCentral other than success. Retryable tells a caller whether
// trying again later can succeed (a rate limit, a server error, a network failure) or not (bad
// credentials, a missing permission), in which case the translator stops and says why.
type APIError struct {
	// Op names what was attempted, such as "sign in" or "read the call log".
	Op string
	// Status is the HTTP status, 0 when no answer came.
	Status int
	// Code is RingCentral's error code or OAuth error, when the body had one.
	Code string
	// Message is RingCentral's explanation, when the body had one.
	Message string
	// RetryAfter is how long RingCentral asked the client to wait (429 and 503), 0 when it did not.
	RetryAfter time.Duration
	// Err is the underlying failure when no answer came.
	Err error
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("ringcentral: " + e.Op)
	if e.Status != 0 {
		b.WriteString(": HTTP " + strconv.Itoa(e.Status))
	}
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying failure.
func (e *APIError) Unwrap() error { return e.Err }

// Retryable reports whether the same request may succeed later.
func (e *APIError) Retryable() bool {
	switch {
	case e.Status == 0, e.Status == http.StatusTooManyRequests, e.Status == http.StatusRequestTimeout, e.Status >= 500:
		return true
	}
	return false
}

// IsPermanent reports whether err is an APIError that trying again will not cure.
func IsPermanent(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && !ae.Retryable()
}

// apiError reads a failed response into an APIError.
func apiError(op string, resp *http.Response) *APIError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{Op: op, Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header)}
	var v struct {
		ErrorCode   string `json:"errorCode"`
		Message     string `json:"message"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &v) == nil {
		e.Code, e.Message = v.ErrorCode, v.Message
		if e.Code == "" {
			e.Code = v.Error
		}
		if e.Message == "" {
			e.Message = v.Description
		}
	}
	if len(e.Message) > 200 {
		e.Message = e.Message[:200]
	}
	return e
}

// retryAfter reads Retry-After as seconds or an HTTP date; 0 when absent.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// token is an OAuth access token and what refreshes it.
type token struct {
	access         string
	refresh        string
	expires        time.Time
	refreshExpires time.Time
}

// auth keeps an access token fresh: it signs in with the JWT grant, refreshes ahead of expiry
// with the refresh token, and signs in again when the refresh token is refused or expired.
// It is safe for concurrent use.
type auth struct {
	server   string
	clientID string
	secrets  Secrets
	hc       *http.Client
	now      func() time.Time

	mu  sync.Mutex
	tok token
}

// refreshMargin is how long before its expiry a token is renewed.
func refreshMargin(lifetime time.Duration) time.Duration {
	return min(lifetime/5, 5*time.Minute)
}

// Token returns a valid access token, renewing it first when it is about to expire.
func (a *auth) Token(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if a.tok.access != "" && now.Before(a.tok.expires) {
		return a.tok.access, nil
	}
	if err := a.renew(ctx, now); err != nil {
		return "", err
	}
	return a.tok.access, nil
}

// Invalidate drops the access token bad (after a 401), so that the next Token renews it.
func (a *auth) Invalidate(bad string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tok.access == bad {
		a.tok.access = ""
	}
}

func (a *auth) renew(ctx context.Context, now time.Time) error {
	if a.tok.refresh != "" && now.Before(a.tok.refreshExpires) {
		err := a.grant(ctx, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {a.tok.refresh}})
		if err == nil {
			return nil
		}
		if !IsPermanent(err) {
			return err
		}
		// The refresh token was revoked (RingCentral keeps a few sessions per user and app):
		// sign in again.
	}
	return a.grant(ctx, url.Values{"grant_type": {jwtGrant}, "assertion": {a.secrets.JWT}})
}

func (a *auth) grant(ctx context.Context, form url.Values) error {
	op := "sign in (JWT grant)"
	if form.Get("grant_type") == "refresh_token" {
		op = "refresh the access token"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.server+"/restapi/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return &APIError{Op: op, Err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(a.clientID, a.secrets.ClientSecret)
	resp, err := a.hc.Do(req)
	if err != nil {
		return &APIError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiError(op, resp)
	}
	var v struct {
		AccessToken           string `json:"access_token"`
		ExpiresIn             int64  `json:"expires_in"`
		RefreshToken          string `json:"refresh_token"`
		RefreshTokenExpiresIn int64  `json:"refresh_token_expires_in"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil || v.AccessToken == "" {
		return &APIError{Op: op, Status: resp.StatusCode, Message: "the answer has no access_token"}
	}
	now := a.now()
	life := time.Duration(max(v.ExpiresIn, 1)) * time.Second
	a.tok = token{
		access:         v.AccessToken,
		refresh:        v.RefreshToken,
		expires:        now.Add(life - refreshMargin(life)),
		refreshExpires: now.Add(time.Duration(v.RefreshTokenExpiresIn)*time.Second - time.Minute),
	}
	return nil
}

// rateLimit is what RingCentral's X-Rate-Limit-* headers said of a rate-limit group.
type rateLimit struct {
	Group     string
	Limit     int
	Remaining int
	Window    time.Duration
}

// readRateLimit reads the rate-limit headers; ok is false when they are absent.
func readRateLimit(h http.Header) (rl rateLimit, ok bool) {
	rem := h.Get("X-Rate-Limit-Remaining")
	if rem == "" {
		return rl, false
	}
	rl.Group = h.Get("X-Rate-Limit-Group")
	rl.Limit, _ = strconv.Atoi(h.Get("X-Rate-Limit-Limit"))
	rl.Remaining, _ = strconv.Atoi(rem)
	w, _ := strconv.Atoi(h.Get("X-Rate-Limit-Window"))
	rl.Window = time.Duration(w) * time.Second
	return rl, true
}

// pace is how long to wait before the next request of a group so as to spread what remains of
// the window over it: nothing while more than half the limit remains.
func (rl rateLimit) pace() time.Duration {
	if rl.Limit <= 0 || rl.Window <= 0 || rl.Remaining*2 > rl.Limit {
		return 0
	}
	if rl.Remaining <= 0 {
		return rl.Window
	}
	return rl.Window / time.Duration(rl.Remaining+1)
}

// client makes authorized REST requests: it renews the token and tries once more on a 401.
type client struct {
	server string
	auth   *auth
	hc     *http.Client
}

// do sends a request to path (relative to the server, or an absolute URL on it) and decodes a
// 2xx JSON answer into out. It returns the response headers for the rate-limit reading.
func (c *client) do(ctx context.Context, op, method, path string, body []byte, out any) (http.Header, error) {
	target := path
	if !strings.HasPrefix(path, "http://") && !strings.HasPrefix(path, "https://") {
		target = c.server + path
	}
	for attempt := 0; ; attempt++ {
		tok, err := c.auth.Token(ctx)
		if err != nil {
			return nil, err
		}
		var rd io.Reader
		if body != nil {
			rd = strings.NewReader(string(body))
		}
		req, err := http.NewRequestWithContext(ctx, method, target, rd)
		if err != nil {
			return nil, &APIError{Op: op, Err: err}
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return nil, &APIError{Op: op, Err: err}
		}
		if resp.StatusCode == http.StatusUnauthorized && attempt == 0 {
			// The token expired early or was revoked: renew it and try once more.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			c.auth.Invalidate(tok)
			continue
		}
		if resp.StatusCode/100 != 2 {
			e := apiError(op, resp)
			resp.Body.Close()
			return resp.Header, e
		}
		var derr error
		if out != nil {
			derr = json.NewDecoder(io.LimitReader(resp.Body, 32<<20)).Decode(out)
		}
		resp.Body.Close()
		if derr != nil {
			return resp.Header, &APIError{Op: op, Status: resp.StatusCode, Message: fmt.Sprintf("the answer is not the JSON expected: %v", derr)}
		}
		return resp.Header, nil
	}
}
