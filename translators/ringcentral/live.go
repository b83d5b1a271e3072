package ringcentral

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/callwire/callwire/sdk/event"
)

// The account telephony-sessions event filter the live path subscribes to.
const sessionsFilter = "/restapi/v1.0/account/~/telephony/sessions"

// Timing of the live path.
const (
	heartbeatEvery = 30 * time.Second
	// silenceLimit ends a connection nothing came over for this long (heartbeats are answered).
	silenceLimit = 3 * heartbeatEvery
	minReconnect = 500 * time.Millisecond
	maxReconnect = time.Minute
	// healthyAfter is how long a connection must last for the backoff to start over.
	healthyAfter = time.Minute
)

// live is the live path: the WebSocket subscription to telephony-session notifications.
type live struct {
	api    *client
	calls  *calls
	ended  *endedSet
	emit   func(context.Context, event.Event) error
	log    *slog.Logger
	now    func() time.Time
	health func(error)

	// timer, when set, is the clock of the subscription's renewals: a channel that receives once
	// d has passed (time.After when nil).
	timer func(d time.Duration) <-chan time.Time

	lastForget time.Time // when ended and silent sessions were last dropped
	gw         gwSession // the gateway session, kept across connections to recover it
}

// run connects, subscribes and maps notifications until ctx ends, reconnecting with backoff.
// It returns only when ctx ends, or on a permanent error (credentials, permissions).
func (l *live) run(ctx context.Context) error {
	backoff := minReconnect
	for {
		start := l.now()
		err := l.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if IsPermanent(err) {
			return err
		}
		l.health(err)
		if l.now().Sub(start) > healthyAfter {
			backoff = minReconnect
		}
		if l.gw.recoverable(l.now()) {
			l.log.Warn("ringcentral: live connection lost; reconnecting to recover the WebSocket session (the gateway keeps what it sends meanwhile)",
				"error", err, "retry_in", backoff.String(), "recovery_window", l.gw.window.String())
		} else {
			l.log.Warn("ringcentral: live connection lost; reconnecting (the call-log poll covers the gap)", "error", err, "retry_in", backoff.String())
		}
		if err := sleep(ctx, backoff); err != nil {
			return nil
		}
		backoff = min(backoff*2, maxReconnect)
		l.calls.forget(l.now())
	}
}

// wsToken is the answer of POST /restapi/oauth/wstoken.
type wsToken struct {
	URI         string `json:"uri"`
	AccessToken string `json:"ws_access_token"`
	ExpiresIn   int    `json:"expires_in"`
}

// writeTimeout bounds one write to the gateway. RingCentral's gateway closes a connection whose
// Pong is not back within 10 seconds of its Ping.
const writeTimeout = 10 * time.Second

// conn is one WebSocket connection to the gateway: reads from one goroutine, writes from any.
// Each write is one whole frame, written under mu with its own deadline, so that a Pong (written
// by the reader) and a message (written by the heartbeat sender) never interleave, and a Pong
// after an idle spell is not refused by the deadline of an earlier write.
type conn struct {
	nc  net.Conn
	r   io.Reader        // nc, after what the dialer buffered
	now func() time.Time // the clock of the deadlines
	mu  sync.Mutex       // held while a frame is written
}

// newConn is a connection over nc, reading from r (nc, or what the dialer buffered before it),
// setting its deadlines by now.
func newConn(nc net.Conn, r io.Reader, now func() time.Time) *conn {
	return &conn{nc: nc, r: r, now: now}
}

// write writes one whole frame, within writeTimeout from now.
func (c *conn) write(frame []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.nc.SetWriteDeadline(c.now().Add(writeTimeout)); err != nil {
		return err
	}
	_, err := c.nc.Write(frame)
	return err
}

func (c *conn) send(meta wsMeta, body any) error {
	parts := []any{meta}
	if body != nil {
		parts = append(parts, body)
	}
	b, err := json.Marshal(parts)
	if err != nil {
		return err
	}
	var frame bytes.Buffer
	if err := wsutil.WriteClientText(&frame, b); err != nil {
		return err
	}
	return c.write(frame.Bytes())
}

// control answers a control frame as RFC 6455 §5.5 requires: a Ping with a Pong carrying the
// same payload, a Close with a Close (and an error); a Pong needs no answer. The answer is
// framed whole before it is written.
func (c *conn) control(h ws.Header, r io.Reader) error {
	var buf bytes.Buffer
	err := wsutil.ControlHandler{DisableSrcCiphering: true, Src: r, Dst: &buf, State: ws.StateClientSide}.Handle(h)
	if buf.Len() > 0 {
		err = errors.Join(err, c.write(buf.Bytes()))
	}
	return err
}

// read returns the next text message, answering the control frames that come before it and
// between its fragments. It fails when nothing at all (not even a Ping) came for silenceLimit,
// or on a message larger than maxMessage.
func (c *conn) read() ([]byte, error) {
	rd := wsutil.Reader{Source: c.r, State: ws.StateClientSide, CheckUTF8: true, OnIntermediate: c.control}
	for {
		if err := c.nc.SetReadDeadline(c.now().Add(silenceLimit)); err != nil {
			return nil, err
		}
		h, err := rd.NextFrame()
		if err != nil {
			return nil, err
		}
		if h.OpCode.IsControl() {
			if err := c.control(h, &rd); err != nil {
				return nil, err
			}
			continue
		}
		if h.OpCode&(ws.OpText|ws.OpBinary) == 0 {
			if err := rd.Discard(); err != nil {
				return nil, err
			}
			continue
		}
		b, err := io.ReadAll(io.LimitReader(&rd, maxMessage+1))
		if err == nil && len(b) > maxMessage {
			err = fmt.Errorf("message larger than %d bytes", maxMessage)
		}
		return b, err
	}
}

// WebSocket session recovery, as RingCentral's guide "Recovering a WebSocket session"
// (https://developers.ringcentral.com/guide/notifications/websockets/session-recovery) describes
// it: a reconnect that names the session's context token (wsc) within the recovery window keeps
// the session's subscriptions, and the gateway sends the notifications it kept meanwhile.
const (
	// recoverySuccessful is the recoveryState of a recovered session; "Failed" is the other.
	recoverySuccessful = "Successful"
	// defaultRecoveryWindow is the window the guide states ("within 180 seconds"), for a
	// ConnectionDetails without recoveryTimeout.
	defaultRecoveryWindow = 180 * time.Second
)

// wscToken is the WebSocket session context the gateway puts in the header of its
// ConnectionDetails (and may put in others'): the token a reconnect names to recover the session,
// and the sequence that orders the tokens given.
type wscToken struct {
	Token    string `json:"token"`
	Sequence int64  `json:"sequence"`
}

// connectionDetails is the body of the ConnectionDetails message that opens every connection.
type connectionDetails struct {
	// RecoveryTimeout is the recovery window, in seconds.
	RecoveryTimeout int `json:"recoveryTimeout"`
	// RecoveryState is "Successful" or "Failed" on a connection that asked to recover a session,
	// absent on one that did not.
	RecoveryState string `json:"recoveryState"`
	// RecoveryErrorCode says why a recovery failed ("WSG-1003", "WSG-1005"...).
	RecoveryErrorCode string `json:"recoveryErrorCode"`
}

// gwSession is what the live path keeps of its gateway session from one connection to the next,
// to recover it. It is used by the goroutine running the sessions only.
type gwSession struct {
	wsc     wscToken
	window  time.Duration // the recovery window the gateway gave
	subID   string        // the session's subscription; "" when it has none
	expires time.Duration // the subscription's lifetime
	renewAt time.Time     // when the subscription is next renewed
	lostAt  time.Time     // when the session's last connection was lost; zero while it is up
}

// take keeps the session context of a message's header: always that of a ConnectionDetails (it
// opens or recovers a session), another's when its sequence is newer than the one kept.
func (g *gwSession) take(meta wsMeta) {
	if meta.WSC == nil || meta.WSC.Token == "" {
		return
	}
	if meta.Type == msgConnectionDetails || g.wsc.Token == "" || meta.WSC.Sequence > g.wsc.Sequence {
		g.wsc = *meta.WSC
	}
}

// recoverable reports whether a connection made at now may recover the session: the session has
// a subscription and a context token, and lost its connection less than the window ago.
func (g *gwSession) recoverable(now time.Time) bool {
	return g.wsc.Token != "" && g.subID != "" && !g.lostAt.IsZero() && now.Sub(g.lostAt) < g.window
}

// session is one connection's life: token, connect, recover the session or subscribe, read until
// the connection fails.
func (l *live) session(ctx context.Context) error {
	var tok wsToken
	if _, err := l.api.do(ctx, "get a WebSocket token", "POST", "/restapi/oauth/wstoken", nil, &tok); err != nil {
		return err
	}
	u, err := url.Parse(tok.URI)
	if err != nil || (u.Scheme != "wss" && u.Scheme != "ws") || tok.AccessToken == "" {
		return &APIError{Op: "get a WebSocket token", Message: fmt.Sprintf("the answer has no usable uri (%q) or ws_access_token", tok.URI)}
	}
	recovering := l.gw.recoverable(l.now())
	q := u.Query()
	q.Set("access_token", tok.AccessToken)
	if recovering {
		q.Set("wsc", l.gw.wsc.Token)
	}
	u.RawQuery = q.Encode()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	nc, br, _, err := ws.Dialer{}.Dial(dctx, u.String())
	cancel()
	if err != nil {
		var se ws.StatusError
		if errors.As(err, &se) && (int(se) == 401 || int(se) == 403) {
			// The WebSocket token was refused: a new one is fetched on the next attempt.
			// Not permanent: the token may simply have expired before it was used.
			return &APIError{Op: "connect to the WebSocket gateway", Err: err, Message: fmt.Sprintf("token refused (HTTP %d)", int(se))}
		}
		return &APIError{Op: "connect to the WebSocket gateway", Err: err}
	}
	var r io.Reader = nc
	if br != nil {
		r = io.MultiReader(br, nc)
	}
	c := newConn(nc, r, time.Now)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { <-ctx.Done(); nc.Close() }()

	// Nothing is sent before the ConnectionDetails: the guide asks so of a recovering client.
	details, err := l.connectionDetails(ctx, c)
	if err != nil {
		var ae *APIError
		if recovering && errors.As(err, &ae) && ae.Op == "WebSocket gateway" {
			// The gateway refused the context token itself (a malformed one is answered
			// WSG-400 and the connection closed): the next connection starts a new session.
			l.log.Warn("ringcentral: the gateway refused the WebSocket session's context token; the next connection subscribes anew (the call-log poll covers what was sent while the socket was down)",
				"error", err)
			l.gw = gwSession{}
		}
		return err
	}
	l.gw.window = defaultRecoveryWindow
	if details.RecoveryTimeout > 0 {
		l.gw.window = time.Duration(details.RecoveryTimeout) * time.Second
	}
	switch {
	case recovering && details.RecoveryState == recoverySuccessful:
		l.log.Info("ringcentral: WebSocket session recovered; the gateway sends the notifications it kept while the socket was down",
			"subscription", l.gw.subID, "down_for", l.now().Sub(l.gw.lostAt).String())
	default:
		switch {
		case recovering:
			l.log.Warn("ringcentral: WebSocket session not recovered; subscribing anew (the call-log poll covers what was sent while the socket was down)",
				"recovery_state", details.RecoveryState, "recovery_error", details.RecoveryErrorCode)
		case l.gw.subID != "" && !l.gw.lostAt.IsZero():
			l.log.Warn("ringcentral: the WebSocket session's recovery window has passed; subscribing anew (the call-log poll covers what was sent while the socket was down)",
				"down_for", l.now().Sub(l.gw.lostAt).String(), "recovery_window", l.gw.window.String())
		}
		l.gw.subID = "" // a session not recovered has no subscription
		subID, expires, err := l.subscribe(ctx, c, newMessageID())
		if err != nil {
			return err
		}
		l.gw.subID, l.gw.expires, l.gw.renewAt = subID, expires, l.now().Add(renewIn(expires))
		l.log.Info("ringcentral: subscribed to telephony sessions", "subscription", subID)
	}
	l.gw.lostAt = time.Time{}
	l.health(nil)

	// Heartbeats and the subscription's renewal go from their own goroutine; the answers come to
	// the reader below. rn tells the next connection when the subscription is due.
	rn := &renewal{subID: l.gw.subID, expires: l.gw.expires, renewAt: l.gw.renewAt, answered: make(chan struct{}, 1)}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		l.renew(ctx, c, rn)
	}()
	defer func() {
		stop()
		<-sent
		l.gw.subID, l.gw.expires, l.gw.renewAt = rn.subID, rn.expires, rn.renewAt
	}()

	for {
		b, err := c.read()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			l.gw.lostAt = l.now()
			if err := rn.brokenBy(); err != nil {
				return err
			}
			return &APIError{Op: "read the WebSocket", Err: err}
		}
		meta, body, err := decodeMessage(b)
		if err != nil {
			l.log.Warn("ringcentral: unreadable WebSocket message skipped", "error", err)
			continue
		}
		if rn.answers(meta) {
			err = l.renewed(ctx, c, rn, meta, body)
		} else {
			err = l.handleMessage(ctx, meta, body)
		}
		if err != nil {
			l.gw.lostAt = l.now()
			if broken := rn.brokenBy(); broken != nil {
				return broken // the subscription made anew was not answered in time
			}
			return err
		}
	}
}

// renewAnswerLimit bounds the wait for the answer to a renewal (and to the subscription made
// anew when the renewal is refused): a gateway that has not answered within it is taken for a
// broken connection, which is made again. RingCentral's own client waits as long for the answer
// to a request over the socket (https://github.com/ringcentral/ringcentral-extensible,
// packages/extensions/ws/src/utils.ts, waitForWebSocketMessage: 60000 ms; MIT).
const renewAnswerLimit = time.Minute

// renewal is the subscription as one connection keeps it: the goroutine sending the renewals
// and the reader taking their answers share it under mu.
type renewal struct {
	mu      sync.Mutex
	subID   string
	expires time.Duration
	renewAt time.Time // when the subscription is next renewed
	// pending is the messageId of the request (a renewal, or the subscription made anew after a
	// refused one) whose answer is awaited; "" when none is.
	pending string
	// broken says why the sender ended the connection; nil while it has not.
	broken error
	// answered tells the sender that the pending request was answered and renewAt is set anew.
	answered chan struct{}
}

// answers reports whether meta is the answer to the pending request. The gateway answers a
// ClientRequest with a message of the request's messageId, of type ClientRequest or Error.
func (r *renewal) answers(meta wsMeta) bool {
	if meta.MessageID == "" || (meta.Type != msgClientRequest && meta.Type != msgError) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pending == meta.MessageID
}

// tell tells the sender that the pending request was answered. One untaken signal is enough:
// the sender reads renewAt when it takes it.
func (r *renewal) tell() {
	select {
	case r.answered <- struct{}{}:
	default:
	}
}

// brokenBy is why the sender ended the connection, nil when it did not.
func (r *renewal) brokenBy() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.broken
}

// renew sends the heartbeats and the subscription's renewals over c until ctx ends or a write
// fails. A renewal goes when rn.renewAt comes; the next is timed when the reader has taken its
// answer. When the pending request is not answered within renewAnswerLimit, renew closes the
// connection, rn.broken saying why.
func (l *live) renew(ctx context.Context, c *conn, rn *renewal) {
	hb := time.NewTicker(heartbeatEvery)
	defer hb.Stop()
	rn.mu.Lock()
	renewC := l.after(max(rn.renewAt.Sub(l.now()), time.Second))
	rn.mu.Unlock()
	var limitC <-chan time.Time // the bound on the pending request's answer
	for {
		select {
		case <-ctx.Done():
			return
		case <-hb.C:
			if err := c.send(wsMeta{Type: msgHeartbeat, MessageID: newMessageID()}, nil); err != nil {
				c.nc.Close()
				return
			}
		case <-renewC:
			renewC = nil
			id := newMessageID()
			rn.mu.Lock()
			rn.pending = id
			subID := rn.subID
			rn.mu.Unlock()
			body := map[string]any{"eventFilters": []string{sessionsFilter}, "deliveryMode": map[string]string{"transportType": "WebSocket"}}
			if err := c.send(wsMeta{Type: msgClientRequest, MessageID: id, Method: "PUT", Path: "/restapi/v1.0/subscription/" + subID}, body); err != nil {
				c.nc.Close()
				return
			}
			limitC = l.after(renewAnswerLimit)
		case <-limitC:
			limitC = nil
			rn.mu.Lock()
			unanswered := rn.pending != ""
			if unanswered {
				rn.broken = &APIError{Op: "renew the subscription", Message: fmt.Sprintf("no answer from the gateway within %s; the connection is taken for broken", renewAnswerLimit)}
			}
			rn.mu.Unlock()
			if unanswered {
				c.nc.Close()
				return
			}
		case <-rn.answered:
			limitC = nil
			rn.mu.Lock()
			renewC = l.after(max(rn.renewAt.Sub(l.now()), time.Second))
			rn.mu.Unlock()
		}
	}
}

// renewed acts on the answer to the pending request: a renewal taken gives the subscription's
// new lifetime. A renewal refused (404 for a subscription the gateway no longer has, after which
// nothing is notified; any other failure leaves the subscription's state unknown) has the
// subscription made anew on the same connection, where it replaces any other, the health saying
// unhealthy until it is in place. An error ends the connection.
func (l *live) renewed(ctx context.Context, c *conn, rn *renewal, meta wsMeta, body json.RawMessage) error {
	l.gw.take(meta)
	if meta.Type == msgClientRequest && meta.Status >= 200 && meta.Status < 300 {
		var sub struct {
			ID        string `json:"id"`
			ExpiresIn int    `json:"expiresIn"`
		}
		_ = json.Unmarshal(body, &sub) // a 2xx without a readable body keeps the lifetime known
		rn.mu.Lock()
		if sub.ID != "" {
			rn.subID = sub.ID
		}
		if sub.ExpiresIn > 0 {
			rn.expires = time.Duration(sub.ExpiresIn) * time.Second
		}
		rn.renewAt = l.now().Add(renewIn(rn.expires))
		rn.pending = ""
		rn.mu.Unlock()
		rn.tell()
		l.log.Debug("ringcentral: subscription renewed", "subscription", sub.ID, "expires_in", sub.ExpiresIn)
		return nil
	}
	refused := answerError("renew the subscription", meta, body)
	l.health(refused)
	rn.mu.Lock()
	gone := rn.subID
	rn.subID = ""
	next := newMessageID()
	rn.pending = next // the bound on the renewal's answer now bounds the new subscription's
	rn.mu.Unlock()
	l.log.Warn("ringcentral: the gateway refused the subscription's renewal; subscribing anew on the same connection (the call-log poll covers what was not notified meanwhile)",
		"subscription", gone, "error", refused)
	subID, expires, err := l.subscribe(ctx, c, next)
	if err != nil {
		return err
	}
	rn.mu.Lock()
	rn.subID, rn.expires, rn.renewAt = subID, expires, l.now().Add(renewIn(expires))
	rn.pending = ""
	rn.mu.Unlock()
	rn.tell()
	l.log.Info("ringcentral: subscribed to telephony sessions", "subscription", subID)
	l.health(nil)
	return nil
}

// answerError is the failure a gateway message reports (an answer to a ClientRequest, or an
// Error message): its status, and RingCentral's error code and message when its body has them,
// else the body itself (at most 200 bytes), so that an error nobody can read is still shown.
func answerError(op string, meta wsMeta, body json.RawMessage) *APIError {
	e := &APIError{Op: op, Status: meta.Status}
	var v struct {
		ErrorCode string `json:"errorCode"`
		Message   string `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil && (v.ErrorCode != "" || v.Message != "") {
		e.Code, e.Message = v.ErrorCode, v.Message
	} else if len(body) > 0 {
		e.Message = strings.ToValidUTF8(string(body[:min(len(body), 200)]), "\uFFFD")
	}
	return e
}

// after is l's timer: a channel that receives once d has passed on l's clock.
func (l *live) after(d time.Duration) <-chan time.Time {
	if l.timer != nil {
		return l.timer(d)
	}
	return time.After(d)
}

// connectionDetails waits for the ConnectionDetails that opens a connection and returns its
// body. An Error message instead ends the connection.
func (l *live) connectionDetails(ctx context.Context, c *conn) (connectionDetails, error) {
	var d connectionDetails
	for {
		b, err := c.read()
		if err != nil {
			return d, &APIError{Op: "connect to the WebSocket gateway", Err: err}
		}
		meta, body, err := decodeMessage(b)
		if err != nil {
			l.log.Warn("ringcentral: unreadable WebSocket message skipped", "error", err)
			continue
		}
		if meta.Type != msgConnectionDetails {
			if err := l.handle(ctx, b); err != nil {
				return d, err
			}
			continue
		}
		l.gw.take(meta)
		if body != nil {
			if err := json.Unmarshal(body, &d); err != nil {
				return d, &APIError{Op: "connect to the WebSocket gateway", Message: fmt.Sprintf("unreadable ConnectionDetails: %v", err)}
			}
		}
		return d, nil
	}
}

// renewIn is when to renew a subscription that expires in expires.
func renewIn(expires time.Duration) time.Duration {
	if expires <= 0 {
		expires = 15 * time.Minute
	}
	return max(expires*4/5, time.Second)
}

// subscribe asks for the telephony-sessions notifications over the socket in a ClientRequest
// of messageId id and waits for its answer. It returns the subscription's id and lifetime.
func (l *live) subscribe(ctx context.Context, c *conn, id string) (string, time.Duration, error) {
	body := map[string]any{"eventFilters": []string{sessionsFilter}, "deliveryMode": map[string]string{"transportType": "WebSocket"}}
	if err := c.send(wsMeta{Type: msgClientRequest, MessageID: id, Method: "POST", Path: "/restapi/v1.0/subscription/"}, body); err != nil {
		return "", 0, &APIError{Op: "subscribe", Err: err}
	}
	for {
		b, err := c.read()
		if err != nil {
			return "", 0, &APIError{Op: "subscribe", Err: err}
		}
		meta, rb, err := decodeMessage(b)
		if err != nil {
			l.log.Warn("ringcentral: unreadable WebSocket message skipped", "error", err)
			continue
		}
		l.gw.take(meta)
		if meta.MessageID != id || (meta.Type != msgClientRequest && meta.Type != msgError) {
			if err := l.handle(ctx, b); err != nil {
				return "", 0, err
			}
			continue
		}
		if meta.Status != 200 {
			return "", 0, answerError("subscribe to telephony sessions", meta, rb)
		}
		var sub struct {
			ID        string `json:"id"`
			ExpiresIn int    `json:"expiresIn"`
		}
		if err := json.Unmarshal(rb, &sub); err != nil || sub.ID == "" {
			return "", 0, &APIError{Op: "subscribe to telephony sessions", Status: meta.Status, Message: "the answer has no subscription id"}
		}
		return sub.ID, time.Duration(sub.ExpiresIn) * time.Second, nil
	}
}

// handle acts on one message from the gateway: a notification is mapped and its events emitted
// (in order, before the next message is read); an error message ends the connection.
func (l *live) handle(ctx context.Context, b []byte) error {
	meta, body, err := decodeMessage(b)
	if err != nil {
		l.log.Warn("ringcentral: unreadable WebSocket message skipped", "error", err)
		return nil
	}
	return l.handleMessage(ctx, meta, body)
}

// handleMessage is handle for a message already decoded into its header and body.
func (l *live) handleMessage(ctx context.Context, meta wsMeta, body json.RawMessage) error {
	l.gw.take(meta)
	switch meta.Type {
	case msgServerNotification:
	case msgError:
		// An Error message ends the connection, and a new one is tried whatever status it
		// carries: its status is taken for at least 500, which Retryable retries.
		meta.Status = max(meta.Status, 500)
		return answerError("WebSocket gateway", meta, body)
	default:
		return nil // heartbeats, connection details, answers to requests no longer awaited
	}
	ev, ok, err := decodeSessionEvent(body)
	if err != nil {
		l.log.Warn("ringcentral: unreadable notification skipped", "error", err)
		return nil
	}
	if !ok {
		return nil
	}
	now := l.now()
	if now.Sub(l.lastForget) > time.Minute {
		l.lastForget = now
		l.calls.forget(now)
	}
	evs := l.calls.observe(ev, body, now)
	for _, e := range evs {
		if (e.Type == event.CallEnded || e.Type == event.CallMissed) && l.ended.has(e.ProviderCallID) {
			continue // the poll reported the end first
		}
		if err := l.emit(ctx, e); err != nil {
			return err
		}
		if e.Type == event.CallEnded {
			l.ended.mark(e.ProviderCallID)
		}
	}
	return nil
}

// newMessageID is a fresh id for a message to the gateway.
func newMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
