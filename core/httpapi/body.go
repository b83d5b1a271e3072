package httpapi

import (
	"strconv"

	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/internal/jsontext"
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
		b = jsontext.AppendString(b, c.ID)
		b = append(b, `,"providerCallId":`...)
		b = jsontext.AppendString(b, c.ProviderCallID)
		b = append(b, `,"provider":`...)
		b = jsontext.AppendString(b, c.Provider)
		b = append(b, `,"created":`...)
		b = strconv.AppendBool(b, c.Created)
		b = append(b, `,"crmClients":[`...)
		for j, cl := range c.Clients {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"externalId":`...)
			b = jsontext.AppendString(b, cl.ExternalID)
			b = append(b, `,"name":`...)
			b = jsontext.AppendString(b, cl.Name)
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
		b = jsontext.AppendString(b, e.ID)
		b = append(b, `,"type":`...)
		b = jsontext.AppendString(b, e.Type)
		b = append(b, `,"dedupeKey":`...)
		b = jsontext.AppendString(b, e.DedupeKey)
		b = append(b, `,"duplicate":`...)
		b = strconv.AppendBool(b, e.Duplicate)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
