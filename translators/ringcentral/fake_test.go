package ringcentral

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
)

// fakeRC is a RingCentral platform in the test: OAuth (JWT grant and refresh), the WebSocket
// token, a WebSocket gateway that takes a subscription and pushes notifications, and the call
// log. Its payloads come from testdata (see testdata/README.md).
type fakeRC struct {
	t   testing.TB
	srv *httptest.Server

	mu         sync.Mutex
	tokenLife  int                  // seconds an access token lives
	tokens     map[string]time.Time // valid access tokens and their expiry
	refresh    map[string]bool
	n          int
	grants     []string
	subscribed int
	wsConns    []net.Conn
	pages      [][]callLogRecord
	fail429    int // call-log requests still to answer 429
	logCalls   int
	subExpires int         // the expiresIn of a subscription
	requests   []string    // the ClientRequests taken, as "METHOD path"
	wsTokens   int         // WebSocket tokens given
	sockets    int         // WebSocket connections being served
	current    *fakeSocket // the latest WebSocket connection, while it is served
	// currentSess is the gateway session of the latest WebSocket connection.
	currentSess *gwSessionState
	pongs       [][]byte // the payloads of the Pongs received, in order
	// The gateway's sessions, by context token (see gwSessionState).
	gwSessions map[string]*gwSessionState
	gwN        int
	wscAsked   []string // the wsc each WebSocket connection named, "" for none, in order
	recovered  int      // sessions recovered
	// refuseRecovery, when set, is the recoveryErrorCode of a Failed answer to every recovery.
	refuseRecovery string
	// unanswered, when set, is the method of the ClientRequests the gateway takes and never
	// answers: "PUT" (renewals) or "POST" (new subscriptions).
	unanswered string
	// gate, when set, holds new WebSocket connections until it is closed.
	gate chan struct{}
	// The call log's X-Rate-Limit-* headers: none when noRateHeaders, else Remaining of 10 per
	// 60 s in the group "heavy".
	noRateHeaders bool
	rateRemaining int
	// onCallLog, when set, is called (without f.mu) as each call-log request comes, before it is
	// answered.
	onCallLog func(*http.Request)

	push chan []byte // notification bodies for the connected socket
}

func newFakeRC(t testing.TB) *fakeRC {
	f := &fakeRC{t: t, tokenLife: 3600, subExpires: 899, rateRemaining: 9, tokens: map[string]time.Time{}, refresh: map[string]bool{}, push: make(chan []byte, 256)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /restapi/oauth/token", f.token)
	mux.HandleFunc("POST /restapi/oauth/wstoken", f.wstoken)
	mux.HandleFunc("GET /ws", f.socket)
	mux.HandleFunc("GET /restapi/v1.0/account/~/call-log", f.callLog)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		f.dropSockets()
		f.srv.Close()
	})
	return f
}

func (f *fakeRC) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if !ok || id != "client-id" || secret != "client-secret" {
		http.Error(w, `{"error":"invalid_client","error_description":"Invalid client"}`, http.StatusUnauthorized)
		return
	}
	_ = r.ParseForm()
	f.mu.Lock()
	defer f.mu.Unlock()
	g := r.Form.Get("grant_type")
	f.grants = append(f.grants, g)
	switch g {
	case jwtGrant:
		if r.Form.Get("assertion") != "the-jwt" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid token"}`)
			return
		}
	case "refresh_token":
		if !f.refresh[r.Form.Get("refresh_token")] {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Token not found"}`)
			return
		}
	default:
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	f.n++
	acc, ref := "access-"+strconv.Itoa(f.n), "refresh-"+strconv.Itoa(f.n)
	f.tokens[acc] = time.Now().Add(time.Duration(f.tokenLife) * time.Second)
	f.refresh[ref] = true
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":%d,"refresh_token":%q,"refresh_token_expires_in":604800,"scope":"CallControl ReadCallLog WebSocketsSubscription","owner_id":"400131758008"}`,
		acc, f.tokenLife, ref)
}

// authorized answers 401 and returns false unless the request bears a valid access token.
func (f *fakeRC) authorized(w http.ResponseWriter, r *http.Request) bool {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	exp, ok := f.tokens[tok]
	f.mu.Unlock()
	if !ok || time.Now().After(exp) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"errorCode":"TokenInvalid","message":"Access token expired","errors":[{"errorCode":"OAU-213","message":"Token not found"}]}`)
		return false
	}
	return true
}

// revokeTokens makes every access token invalid, as an expiry would.
func (f *fakeRC) revokeTokens() {
	f.mu.Lock()
	clear(f.tokens)
	f.mu.Unlock()
}

// revokeRefreshTokens makes every refresh token invalid, as their expiry would.
func (f *fakeRC) revokeRefreshTokens() {
	f.mu.Lock()
	clear(f.refresh)
	f.mu.Unlock()
}

// counts returns how many subscriptions, WebSocket tokens and open sockets the fake has, and the
// OAuth grant types it took, in order.
func (f *fakeRC) counts() (subscribed, wsTokens, sockets int, grants []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subscribed, f.wsTokens, f.sockets, slices.Clone(f.grants)
}

func (f *fakeRC) wstoken(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	f.wsTokens++
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"uri":"ws://%s/ws","ws_access_token":"ws-token","expires_in":60}`, r.Host)
}

// fakeSocket is one WebSocket connection of the fake gateway, written by one frame sequence at a
// time.
type fakeSocket struct {
	conn net.Conn
	wmu  sync.Mutex
}

// write writes frames one after the other, nothing between them.
func (s *fakeSocket) write(frames ...ws.Frame) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for _, fr := range frames {
		if err := ws.WriteFrame(s.conn, fr); err != nil {
			return err
		}
	}
	return nil
}

func (s *fakeSocket) text(msg string) error { return s.write(ws.NewTextFrame([]byte(msg))) }

// notification is the gateway's message for a notification body.
func notificationMessage(body []byte) string {
	return fmt.Sprintf(`[{"type":"ServerNotification","messageId":"%d","status":200,"headers":{"RCRequestId":"x"}},%s]`, time.Now().UnixNano(), body)
}

// gwSessionState is a WebSocket session of the fake gateway: what a reconnect naming its context token
// (wsc) recovers.
type gwSessionState struct {
	token      string
	sequence   int64
	subscribed bool
	// ready is closed once the session has a subscription: the gateway sends notifications to a
	// session only then. A session whose subscription is dropped gets a new one, open.
	ready chan struct{}
}

// The fake gateway's answers to a renewal (a ClientRequest PUT /restapi/v1.0/subscription/<id>)
// are built from RingCentral's API reference, "Update Subscription"
// (https://developers.ringcentral.com/api-reference/Subscriptions/updateSubscription: the
// subscription renewed, or 404 CMN-102 "Resource for parameter [subscriptionId] is not found"),
// from "Subscribing to events via WebSockets"
// (https://developers.ringcentral.com/guide/notifications/websockets/subscribing: a ClientRequest
// is answered over the socket, a connection has one subscription, a new one replaces it) and
// from how RingCentral's client reads the answer (ringcentral/ringcentral-extensible,
// packages/extensions/ws/src/rest.ts and subscription.ts, MIT: the answer carries the request's
// messageId; a ClientRequest answer of status 2xx is success; a 404 means the subscription
// expired and it subscribes anew):
//   - a renewal of the session's subscription is answered 200 with the subscription, its
//     expiresIn that of a new one;
//   - once the subscription is gone (dropSubscription: expired or deleted on the platform's
//     side) nothing more is notified, and a renewal is answered 404 CMN-102, until a new
//     subscription (a POST) is made;
//   - with unanswered set to "PUT" (or "POST"), a renewal (or a new subscription) is never
//     answered, while heartbeats still are.

// dropSubscription makes the gateway forget the current session's subscription, as its expiry
// or deletion on the platform's side would: nothing more is notified until a new one is made.
func (f *fakeRC) dropSubscription(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.currentSess
	if s == nil || !s.subscribed {
		t.Fatal("no subscription to drop")
	}
	s.subscribed = false
	s.ready = make(chan struct{})
}

// takenRequests returns the ClientRequests the gateway took, as "METHOD path", in order.
func (f *fakeRC) takenRequests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// The fake gateway's session recovery is built from RingCentral's guide "Recovering a WebSocket
// session" (https://developers.ringcentral.com/guide/notifications/websockets/session-recovery;
// source ringcentral/ringcentral-api-docs docs/notifications/websockets/session-recovery.md and
// code-samples/websockets/session-recovery.json and connection-details.json) and from the
// gateway's answers recorded in tylerlong/rc-ws-recover-test README.md (its package.json says
// "UNLICENSED": read, nothing copied; the guide's repository states no licence either):
//   - every connection opens with a ConnectionDetails whose header carries the session's context
//     token, "wsc": {"token", "sequence"}, and whose body gives recoveryTimeout (180) and
//     recoveryBufferSize (100);
//   - a connection whose URL names a known token (...&wsc=<token>) of a session with a
//     subscription recovers it: recoveryState "Successful", the subscription kept, and the
//     notifications sent while no connection was there delivered;
//   - a token of a session without a subscription: recoveryState "Failed", recoveryErrorCode
//     "WSG-1005"; a token of another OAuth session: "Failed", "WSG-1003" (refuseRecovery makes
//     the fake answer so); either way a new session on the same connection, whose subscription
//     must be made anew, and the notifications of the gap lost;
//   - a token the gateway cannot read: an Error, WSG-400 "Malformed WebSocket session context
//     token", and the connection closed;
//   - no token: a new session, no recoveryState.

// connectionDetailsMessage is the fake's ConnectionDetails message for session s; state is its
// recoveryState ("" for none) and code its recoveryErrorCode.
func connectionDetailsMessage(s *gwSessionState, state, code string) string {
	recovery := ""
	if state != "" {
		recovery = fmt.Sprintf(`"recoveryState":%q,`, state)
	}
	if code != "" {
		recovery += fmt.Sprintf(`"recoveryErrorCode":%q,`, code)
	}
	return fmt.Sprintf(`[{"type":"ConnectionDetails","messageId":"cd-%d","status":200,"headers":{"RCRequestId":"cd-%d"},"wsc":{"token":%q,"sequence":%d}},{"creationTime":"2023-06-06T10:00:00Z",%s"maxConnectionsPerSession":5,"recoveryBufferSize":100,"recoveryTimeout":180,"idleTimeout":1800,"absoluteTimeout":86400,"maxActiveRequests":10}]`,
		s.sequence, s.sequence, s.token, s.sequence, recovery)
}

// newGWSession starts a gateway session. f.mu is held.
func (f *fakeRC) newGWSession() *gwSessionState {
	f.gwN++
	s := &gwSessionState{token: fmt.Sprintf("wsc-%d", f.gwN), sequence: 1, ready: make(chan struct{})}
	if f.gwSessions == nil {
		f.gwSessions = map[string]*gwSessionState{}
	}
	f.gwSessions[s.token] = s
	return s
}

func (f *fakeRC) socket(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("access_token") != "ws-token" {
		http.Error(w, "no token", http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	conn, _, _, err := ws.UpgradeHTTP(r, w)
	if err != nil {
		return
	}
	defer conn.Close()
	sock := &fakeSocket{conn: conn}
	wsc := r.URL.Query().Get("wsc")
	f.mu.Lock()
	f.wsConns = append(f.wsConns, conn)
	f.wscAsked = append(f.wscAsked, wsc)
	f.sockets++
	f.current = sock
	var sess *gwSessionState
	var details string
	switch old, known := f.gwSessions[wsc]; {
	case wsc == "":
		sess = f.newGWSession()
		details = connectionDetailsMessage(sess, "", "")
	case !known:
	case f.refuseRecovery != "":
		sess = f.newGWSession()
		details = connectionDetailsMessage(sess, "Failed", f.refuseRecovery)
	case !old.subscribed:
		sess = f.newGWSession()
		details = connectionDetailsMessage(sess, "Failed", "WSG-1005")
	default:
		sess = old
		sess.sequence++
		f.recovered++
		details = connectionDetailsMessage(sess, "Successful", "")
	}
	f.currentSess = sess
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.sockets--
		if f.current == sock {
			f.current = nil
		}
		f.mu.Unlock()
	}()
	// A ping first: the client answers it while it waits for its first message.
	_ = sock.write(ws.NewPingFrame([]byte("are you there")))
	if sess == nil {
		_ = sock.text(`[{"type":"Error","messageId":"err-1","status":400},{"errorCode":"WSG-400","message":"Malformed WebSocket session context token"}]`)
		return
	}
	_ = sock.text(details)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.readClient(sock, sess)
	}()
	for {
		// Notifications go to a session only while it has a subscription.
		f.mu.Lock()
		ready := sess.ready
		f.mu.Unlock()
		select {
		case <-done:
			return
		case <-ready:
		}
		select {
		case <-done:
			return
		case b := <-f.push:
			if sock.text(notificationMessage(b)) != nil {
				// Not delivered: the gateway keeps it for the session's recovery.
				f.push <- b
				return
			}
		}
	}
}

// readClient reads what the client sends on sock until it fails: it answers heartbeats and
// subscription requests, answers Pings, and keeps the payload of every Pong. Client frames must
// be masked (RFC 6455 §5.3): the reader refuses one that is not.
func (f *fakeRC) readClient(sock *fakeSocket, sess *gwSessionState) {
	control := func(h ws.Header, r io.Reader) error {
		switch h.OpCode {
		case ws.OpPong:
			b, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			f.mu.Lock()
			f.pongs = append(f.pongs, b)
			f.mu.Unlock()
			return nil
		case ws.OpPing:
			b, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			return sock.write(ws.NewPongFrame(b))
		default:
			return io.EOF // a Close: the connection ends
		}
	}
	rd := wsutil.Reader{Source: sock.conn, State: ws.StateServerSide, CheckUTF8: true, OnIntermediate: control}
	for {
		h, err := rd.NextFrame()
		if err != nil {
			return
		}
		if h.OpCode.IsControl() {
			if control(h, &rd) != nil {
				return
			}
			continue
		}
		b, err := io.ReadAll(&rd)
		if err != nil {
			return
		}
		var parts []map[string]any
		if json.Unmarshal(b, &parts) != nil || len(parts) == 0 {
			continue
		}
		id, _ := parts[0]["messageId"].(string)
		switch parts[0]["type"] {
		case "Heartbeat":
			_ = sock.text(fmt.Sprintf(`[{"type":"Heartbeat","messageId":%q,"status":200}]`, id))
		case "ClientRequest":
			method, _ := parts[0]["method"].(string)
			path, _ := parts[0]["path"].(string)
			f.mu.Lock()
			if method == f.unanswered {
				f.requests = append(f.requests, method+" "+path)
				f.mu.Unlock()
				continue
			}
			if method == "PUT" && !sess.subscribed {
				f.requests = append(f.requests, method+" "+path)
				f.mu.Unlock()
				_ = sock.text(fmt.Sprintf(`[{"type":"ClientRequest","messageId":%q,"status":404,"headers":{"Content-Type":"application/json"}},{"errorCode":"CMN-102","message":"Resource for parameter [subscriptionId] is not found","errors":[{"errorCode":"CMN-102","message":"Resource for parameter [subscriptionId] is not found","parameterName":"subscriptionId"}]}]`, id))
				continue
			}
			first := false
			if method == "POST" {
				if f.subscribed > 0 {
					// A new subscription of a session not recovered: what the gateway kept for
					// the lost session is lost with it.
				drain:
					for {
						select {
						case <-f.push:
						default:
							break drain
						}
					}
				}
				f.subscribed++
				first = !sess.subscribed
				sess.subscribed = true
			}
			f.requests = append(f.requests, method+" "+path)
			exp := f.subExpires
			ready := sess.ready
			f.mu.Unlock()
			_ = sock.text(fmt.Sprintf(`[{"type":"ClientRequest","messageId":%q,"status":200,"headers":{"Content-Type":"application/json"}},{"id":"b6d5bde8-f5c5-4e3b-a5c1-6f1f3d1c5f4a","creationTime":"2023-06-06T10:00:00.000Z","status":"Active","eventFilters":["/restapi/v1.0/account/400129284008/telephony/sessions"],"expirationTime":"2023-06-06T10:15:00.000Z","expiresIn":%d,"deliveryMode":{"transportType":"WebSocket","encryption":false}}]`, id, exp))
			if first {
				close(ready)
			}
		}
	}
}

// ping sends a Ping with payload on the current socket.
func (f *fakeRC) ping(t testing.TB, payload []byte) {
	t.Helper()
	if err := f.currentSocket(t).write(ws.NewPingFrame(payload)); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// pushFragmented sends the notification body on the current socket as a text message of two
// fragments with a Ping of payload between them (RFC 6455 §5.4 lets control frames come between
// fragments).
func (f *fakeRC) pushFragmented(t testing.TB, body []byte, payload []byte) {
	t.Helper()
	msg := notificationMessage(body)
	half := len(msg) / 2
	err := f.currentSocket(t).write(ws.NewFrame(ws.OpText, false, []byte(msg[:half])), ws.NewPingFrame(payload),
		ws.NewFrame(ws.OpContinuation, true, []byte(msg[half:])))
	if err != nil {
		t.Fatalf("fragmented notification: %v", err)
	}
}

func (f *fakeRC) currentSocket(t testing.TB) *fakeSocket {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.current == nil {
		t.Fatal("no WebSocket connection")
	}
	return f.current
}

// pongPayloads returns the payloads of the Pongs the gateway received, in order.
func (f *fakeRC) pongPayloads() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pongs)
}

// recoveries is how many sessions the gateway recovered.
func (f *fakeRC) recoveries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recovered
}

// wscNamed returns the context token each WebSocket connection named ("" for none), in order.
func (f *fakeRC) wscNamed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.wscAsked)
}

// holdSockets makes new WebSocket connections wait until releaseSockets.
func (f *fakeRC) holdSockets() {
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.mu.Unlock()
}

// releaseSockets lets the held WebSocket connections in, and those after them.
func (f *fakeRC) releaseSockets() {
	f.mu.Lock()
	if f.gate != nil {
		close(f.gate)
		f.gate = nil
	}
	f.mu.Unlock()
}

// dropSockets closes every WebSocket connection, as a network failure would.
func (f *fakeRC) dropSockets() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.wsConns {
		c.Close()
	}
	f.wsConns = nil
}

func (f *fakeRC) callLog(w http.ResponseWriter, r *http.Request) {
	if !f.authorized(w, r) {
		return
	}
	f.mu.Lock()
	hook := f.onCallLog
	f.mu.Unlock()
	if hook != nil {
		hook(r)
	}
	f.mu.Lock()
	f.logCalls++
	rateHeaders := func(remaining int) {
		if f.noRateHeaders {
			return
		}
		w.Header().Set("X-Rate-Limit-Group", "heavy")
		w.Header().Set("X-Rate-Limit-Limit", "10")
		w.Header().Set("X-Rate-Limit-Remaining", strconv.Itoa(remaining))
		w.Header().Set("X-Rate-Limit-Window", "60")
	}
	if f.fail429 > 0 {
		f.fail429--
		rateHeaders(0)
		f.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"errorCode":"CMN-301","message":"Request rate exceeded","errors":[{"errorCode":"CMN-301","message":"Request rate exceeded"}]}`)
		return
	}
	pages := f.pages
	rateHeaders(f.rateRemaining)
	f.mu.Unlock()
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	page = max(page, 1)
	var recs []callLogRecord
	if page <= len(pages) {
		recs = pages[page-1]
	}
	body := map[string]any{"uri": "https://platform.ringcentral.com/restapi/v1.0/account/~/call-log?page=" + strconv.Itoa(page), "records": recs,
		"paging": map[string]any{"page": page, "perPage": 2}}
	nav := map[string]any{}
	if page < len(pages) {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(page+1))
		nav["nextPage"] = map[string]string{"uri": "http://" + r.Host + r.URL.Path + "?" + q.Encode()}
	}
	body["navigation"] = nav
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// scenario reads a testdata file of notification bodies.
func scenario(t testing.TB, name string) []json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var ns []json.RawMessage
	if err := json.Unmarshal(b, &ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// callLogPages reads the testdata call log.
func callLogPages(t testing.TB) [][]callLogRecord {
	t.Helper()
	b, err := os.ReadFile("testdata/call_log_pages.json")
	if err != nil {
		t.Fatal(err)
	}
	var pages [][]callLogRecord
	if err := json.Unmarshal(b, &pages); err != nil {
		t.Fatal(err)
	}
	return pages
}
