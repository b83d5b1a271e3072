package httpapi

import (
	"strconv"
	"unicode/utf8"

	"github.com/callwire/callwire/core/ingest"
)

// The success body of POST /api/v1/calls/events is written here, field by field, from the
// pipeline's result: the shape belongs to the HTTP API, and writing it straight from
// ingest.Result needs neither a copy of every entry into tagged structs nor reflection. It is
// byte for byte what encoding/json (without HTML escaping) makes of
//
//	{"success": true,
//	 "calls":  [{"id", "providerCallId", "provider", "created", "crmClients": [{"externalId", "name"}]}],
//	 "events": [{"id", "type", "dedupeKey", "duplicate"}]}
//
// which body_test.go checks.

// successSize estimates the length of the success body, so that it is built in one allocation.
func successSize(res ingest.Result) int {
	n := 64
	for _, c := range res.Calls {
		n += 96 + len(c.ID) + len(c.ProviderCallID) + len(c.Provider)
		for _, cl := range c.Clients {
			n += 32 + len(cl.ExternalID) + len(cl.Name)
		}
	}
	for _, e := range res.Events {
		n += 64 + len(e.ID) + len(e.Type) + len(e.DedupeKey)
	}
	return n
}

// appendSuccess appends the success body for res to b.
func appendSuccess(b []byte, res ingest.Result) []byte {
	b = append(b, `{"success":true,"calls":[`...)
	for i, c := range res.Calls {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, c.ID)
		b = append(b, `,"providerCallId":`...)
		b = appendJSONString(b, c.ProviderCallID)
		b = append(b, `,"provider":`...)
		b = appendJSONString(b, c.Provider)
		b = append(b, `,"created":`...)
		b = strconv.AppendBool(b, c.Created)
		b = append(b, `,"crmClients":[`...)
		for j, cl := range c.Clients {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"externalId":`...)
			b = appendJSONString(b, cl.ExternalID)
			b = append(b, `,"name":`...)
			b = appendJSONString(b, cl.Name)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"events":[`...)
	for i, e := range res.Events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, e.ID)
		b = append(b, `,"type":`...)
		b = appendJSONString(b, e.Type)
		b = append(b, `,"dedupeKey":`...)
		b = appendJSONString(b, e.DedupeKey)
		b = append(b, `,"duplicate":`...)
		b = strconv.AppendBool(b, e.Duplicate)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as encoding/json escapes it with HTML
// escaping off: '"' and '\\' and control characters escaped, invalid UTF-8 replaced by U+FFFD,
// and U+2028 and U+2029 escaped so that the text is also valid JavaScript.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
