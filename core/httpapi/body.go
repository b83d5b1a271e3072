package httpapi

import (
	"strconv"

	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/sdk/event"
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
		b = event.AppendJSONString(b, c.ID, false)
		b = append(b, `,"providerCallId":`...)
		b = event.AppendJSONString(b, c.ProviderCallID, false)
		b = append(b, `,"provider":`...)
		b = event.AppendJSONString(b, c.Provider, false)
		b = append(b, `,"created":`...)
		b = strconv.AppendBool(b, c.Created)
		b = append(b, `,"crmClients":[`...)
		for j, cl := range c.Clients {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"externalId":`...)
			b = event.AppendJSONString(b, cl.ExternalID, false)
			b = append(b, `,"name":`...)
			b = event.AppendJSONString(b, cl.Name, false)
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
		b = event.AppendJSONString(b, e.ID, false)
		b = append(b, `,"type":`...)
		b = event.AppendJSONString(b, e.Type, false)
		b = append(b, `,"dedupeKey":`...)
		b = event.AppendJSONString(b, e.DedupeKey, false)
		b = append(b, `,"duplicate":`...)
		b = strconv.AppendBool(b, e.Duplicate)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
