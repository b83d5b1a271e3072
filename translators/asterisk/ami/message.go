// Package ami reads and writes the Asterisk Manager Interface (AMI) wire protocol and holds one
// manager session over TCP or TLS.
//
// The protocol is text: after a banner line ("Asterisk Call Manager/x.y.z") each side sends
// messages made of "Key: Value" lines ended by an empty line. Keys may repeat and are compared
// without regard to case. Reader and Writer handle the wire format; Conn logs in, correlates
// actions with their responses (and event lists) by ActionID, keeps the session alive with Ping
// and delivers every event in the order Asterisk sent it. Conn does not reconnect: the caller
// dials again and rebuilds its state (see docs/asterisk.md).
package ami

import "strings"

// Field is one "Key: Value" line of a message.
type Field struct {
	Key   string
	Value string
}

// Message is one AMI message (an action, a response or an event): its fields in the order they
// were sent. Keys may repeat (Variable, Output, ChanVariable...). The zero Message is empty and
// ready to use.
type Message struct {
	Fields []Field
}

// NewMessage returns a message of the given key/value pairs, in order; a trailing key without a
// value gets the empty value.
func NewMessage(kv ...string) Message {
	m := Message{Fields: make([]Field, 0, (len(kv)+1)/2)}
	for i := 0; i < len(kv); i += 2 {
		f := Field{Key: kv[i]}
		if i+1 < len(kv) {
			f.Value = kv[i+1]
		}
		m.Fields = append(m.Fields, f)
	}
	return m
}

// Add appends a field, keeping any earlier field of the same key.
func (m *Message) Add(key, value string) {
	m.Fields = append(m.Fields, Field{Key: key, Value: value})
}

// Get returns the value of the first field whose key equals key without regard to case, or ""
// when there is none. Use Lookup to tell an empty value from a missing key.
func (m Message) Get(key string) string {
	v, _ := m.Lookup(key)
	return v
}

// Lookup returns the value of the first field whose key equals key without regard to case and
// whether there was one.
func (m Message) Lookup(key string) (string, bool) {
	for _, f := range m.Fields {
		if strings.EqualFold(f.Key, key) {
			return f.Value, true
		}
	}
	return "", false
}

// GetAll returns the values of every field whose key equals key without regard to case, in
// order, or nil when there is none.
func (m Message) GetAll(key string) []string {
	var out []string
	for _, f := range m.Fields {
		if strings.EqualFold(f.Key, key) {
			out = append(out, f.Value)
		}
	}
	return out
}

// Event returns the value of the Event field ("" when the message is not an event).
func (m Message) Event() string { return m.Get("Event") }

// Response returns the value of the Response field ("" when the message is not a response).
func (m Message) Response() string { return m.Get("Response") }

// ActionID returns the value of the ActionID field.
func (m Message) ActionID() string { return m.Get("ActionID") }

// IsEvent reports whether the message carries an Event field.
func (m Message) IsEvent() bool {
	_, ok := m.Lookup("Event")
	return ok
}

// IsResponse reports whether the message carries a Response field.
func (m Message) IsResponse() bool {
	_, ok := m.Lookup("Response")
	return ok
}

// Clone returns a deep copy of m.
func (m Message) Clone() Message {
	if m.Fields == nil {
		return Message{}
	}
	return Message{Fields: append([]Field(nil), m.Fields...)}
}

// String returns m in wire form with "\n" line ends, for logs and test failures. The value of
// a Secret field is replaced by "********".
func (m Message) String() string {
	var b strings.Builder
	for _, f := range m.Fields {
		b.WriteString(f.Key)
		b.WriteString(": ")
		if strings.EqualFold(f.Key, "Secret") {
			b.WriteString("********")
		} else {
			b.WriteString(f.Value)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
