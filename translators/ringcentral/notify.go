package ringcentral

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// WebSocket message types of RingCentral's WebSocket gateway.
const (
	msgClientRequest      = "ClientRequest"
	msgServerNotification = "ServerNotification"
	msgConnectionDetails  = "ConnectionDetails"
	msgHeartbeat          = "Heartbeat"
	msgError              = "Error"
)

// wsMeta is the first element of every WebSocket message: what the message is.
type wsMeta struct {
	Type      string            `json:"type"`
	MessageID string            `json:"messageId"`
	Status    int               `json:"status,omitempty"`
	Method    string            `json:"method,omitempty"`
	Path      string            `json:"path,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	// WSC is the WebSocket session context, which a reconnect names to recover the session.
	WSC *wscToken `json:"wsc,omitempty"`
}

// maxMessage bounds a WebSocket message the decoder takes.
const maxMessage = 4 << 20

// decodeMessage splits a WebSocket message, a JSON array [meta, body], into its parts. body is
// nil when the message has none (a heartbeat).
func decodeMessage(b []byte) (wsMeta, json.RawMessage, error) {
	var meta wsMeta
	if len(b) > maxMessage {
		return meta, nil, fmt.Errorf("message of %d bytes is larger than %d", len(b), maxMessage)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil {
		return meta, nil, fmt.Errorf("message is not a JSON array: %w", err)
	}
	if len(parts) == 0 || len(parts) > 2 {
		return meta, nil, fmt.Errorf("message has %d parts, not 1 or 2", len(parts))
	}
	if err := json.Unmarshal(parts[0], &meta); err != nil {
		return meta, nil, fmt.Errorf("message header: %w", err)
	}
	if meta.Type == "" {
		return meta, nil, errors.New("message header has no type")
	}
	if len(parts) == 2 && !bytes.Equal(bytes.TrimSpace(parts[1]), []byte("null")) {
		return meta, parts[1], nil
	}
	return meta, nil, nil
}

// flexString is an identifier RingCentral writes as a JSON string or a number.
type flexString string

// UnmarshalJSON takes a string, a number or null.
func (f *flexString) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*f = flexString(n.String())
		return nil
	}
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	return fmt.Errorf("%.40s is not a string or number", b)
}

// notification is a ServerNotification's body: one event of a subscription.
type notification struct {
	UUID           string          `json:"uuid"`
	Event          string          `json:"event"`
	Timestamp      string          `json:"timestamp"`
	SubscriptionID string          `json:"subscriptionId"`
	Body           json.RawMessage `json:"body"`
}

// sessionEvent is the body of an account telephony-sessions notification: the state of some
// parties of one telephony session.
type sessionEvent struct {
	Sequence           int64        `json:"sequence"`
	SessionID          flexString   `json:"sessionId"`
	TelephonySessionID string       `json:"telephonySessionId"`
	ServerID           string       `json:"serverId"`
	EventTime          string       `json:"eventTime"`
	Parties            []eventParty `json:"parties"`

	at time.Time // EventTime parsed
}

// eventParty is one party of a telephony session as a notification reports it.
type eventParty struct {
	AccountID   flexString `json:"accountId"`
	ExtensionID flexString `json:"extensionId"`
	ID          string     `json:"id"`
	Direction   string     `json:"direction"`
	To          endpoint   `json:"to"`
	From        endpoint   `json:"from"`
	Status      struct {
		Code   string `json:"code"`
		Reason string `json:"reason"`
	} `json:"status"`
	MissedCall bool `json:"missedCall"`
	StandAlone bool `json:"standAlone"`
}

// endpoint is one end of a party (or of a call-log record).
type endpoint struct {
	PhoneNumber     string     `json:"phoneNumber"`
	ExtensionNumber string     `json:"extensionNumber"`
	ExtensionID     flexString `json:"extensionId"`
	Name            string     `json:"name"`
}

// decodeSessionEvent reads a ServerNotification body into a telephony-session event. ok is false
// (and err nil) for a notification of another event filter, which the translator ignores.
func decodeSessionEvent(body json.RawMessage) (ev sessionEvent, ok bool, err error) {
	var n notification
	if err := json.Unmarshal(body, &n); err != nil {
		return ev, false, fmt.Errorf("notification: %w", err)
	}
	if !isSessionsFilter(n.Event) {
		return ev, false, nil
	}
	if err := json.Unmarshal(n.Body, &ev); err != nil {
		return ev, false, fmt.Errorf("telephony session notification: %w", err)
	}
	if !usableID(ev.TelephonySessionID) {
		return ev, false, errors.New("telephony session notification without a usable telephonySessionId")
	}
	if ev.Sequence < 0 {
		return ev, false, errors.New("telephony session notification with a negative sequence")
	}
	t, err := time.Parse(time.RFC3339Nano, ev.EventTime)
	if err != nil {
		t, err = time.Parse(time.RFC3339Nano, n.Timestamp)
	}
	if err != nil || t.Year() < 2000 || t.Year() > 9000 {
		return ev, false, fmt.Errorf("telephony session notification without a valid eventTime: %q", ev.EventTime)
	}
	ev.at = t.UTC()
	for i, p := range ev.Parties {
		if !usableID(p.ID) || len(p.ID) > 128 {
			ev.Parties[i].ID = "p" + strconv.Itoa(i)
		}
	}
	return ev, true, nil
}

// isSessionsFilter reports whether an event filter is an account (or extension) telephony
// sessions filter, with or without query parameters.
func isSessionsFilter(f string) bool {
	if i := bytes.IndexByte([]byte(f), '?'); i >= 0 {
		f = f[:i]
	}
	return len(f) >= len("/telephony/sessions") && f[len(f)-len("/telephony/sessions"):] == "/telephony/sessions"
}

// usableID reports whether s can be part of an event's ids: 1 to 256 bytes without control
// characters.
func usableID(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
