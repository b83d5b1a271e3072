package callmodel

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// The raw of an event a message caused is a JSON object:
//
//	{"sip": the message's text, "truncated": true and "sipBytes": its length when the text was
//	 cut to maxRawSIP bytes, "transport", "src", "dst": where it went, "seenAt": when}
//
// It is written straight into one buffer (event.AppendJSONString escapes the text as
// encoding/json would): encoding/json's copies of the text were a fifth of what the call model
// allocated per call. It is written in canonical form, compact and with strings HTML-escaped
// as json.Marshal writes them, so that the event can be encoded without checking and
// compacting it again (event.Event.AppendJSONTrustingRaw).

// renderRaw renders the raw of the message: its text (as seen, else rendered from the parsed
// message), bounded to maxRawSIP bytes, with where it went and when.
func renderRaw(w *wire) json.RawMessage {
	var text string
	var data []byte
	if len(w.m.Data) > 0 {
		data = w.m.Data
	} else if w.m.SIP != nil {
		text = w.m.SIP.String()
	}
	n := len(data) + len(text)
	truncated := n > maxRawSIP
	if truncated {
		if data != nil {
			text, data = string(data[:maxRawSIP]), nil
		} else {
			text = text[:maxRawSIP]
		}
		text = strings.ToValidUTF8(text, "")
	}
	b := make([]byte, 0, min(n, maxRawSIP)+min(n, maxRawSIP)/8+192)
	b = append(b, `{"sip":`...)
	if data != nil {
		b = event.AppendJSONString(b, data, true)
	} else {
		b = event.AppendJSONString(b, text, true)
	}
	if truncated {
		b = append(b, `,"truncated":true,"sipBytes":`...)
		b = strconv.AppendInt(b, int64(n), 10)
	}
	if w.m.Transport != "" {
		b = append(b, `,"transport":`...)
		b = event.AppendJSONString(b, w.m.Transport, true)
	}
	if w.m.Src.IsValid() {
		b = append(b, `,"src":"`...)
		b = w.m.Src.AppendTo(b)
		b = append(b, '"')
	}
	if w.m.Dst.IsValid() {
		b = append(b, `,"dst":"`...)
		b = w.m.Dst.AppendTo(b)
		b = append(b, '"')
	}
	b = append(b, `,"seenAt":"`...)
	b = w.m.At.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}
