package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/callwire/callwire/core/store"
)

// BenchmarkParams encodes the parameters of two realistic writes, and the Bind message that
// carries them, two ways: written by params as the store writes them (its buffers kept from one
// write to the next, the message encoded into the buffer exec lends the connection), and as
// plain pgx arguments (the Go values of the same statement's parameters, built from the write as
// plain code would build them, the arrays as slices, and encoded by pgx's
// ExtendedQueryBuilder as pgx.Conn does for a prepared statement, the message encoded into a
// frontend's write buffer as pgproto3 leaves it after each flush). The writes are a group of
// 256 events (five batches of ten calls of five events, and six lone call_received; writeMany)
// and one call of three events (oneCallSQL), each event's body about 400 bytes, as
// BenchmarkWriteCalls writes them. Both ways give the same bytes (checked before the runs); no
// database is needed.
func BenchmarkParams(b *testing.B) {
	group, order, received := benchGroup()
	one := benchWrite("one", 1, 3)
	for _, bc := range []struct {
		name   string
		write  func(p *params) string
		oids   []uint32
		plain  func() []any
		events int
	}{
		{"group", func(p *params) string { name, _ := p.manyCalls(group, order, received); return name },
			writeManyOIDs(true), func() []any { return plainManyArgs(group, order, received) }, 256},
		{"one", func(p *params) string { p.oneCall(one); return oneCallName + "checked_3" },
			oneCallOIDs(3, true), func() []any { return plainOneArgs(one) }, 3},
	} {
		sd := &pgconn.StatementDescription{Name: bc.write(new(params)), ParamOIDs: bc.oids}
		if err := agree(bc.write, sd, bc.plain); err != nil {
			b.Fatalf("%s: %v", bc.name, err)
		}
		b.Run(bc.name+"/params", func(b *testing.B) {
			b.ReportAllocs()
			p := new(params)
			for b.Loop() {
				bc.write(p)
				if err := p.check(sd.ParamOIDs); err != nil {
					b.Fatal(err)
				}
				if _, err := paramsBind(p, sd); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/pgx", func(b *testing.B) {
			b.ReportAllocs()
			m := pgtype.NewMap()
			var eqb pgx.ExtendedQueryBuilder
			for b.Loop() {
				if _, err := pgxBind(m, &eqb, sd, bc.plain()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// paramsBind encodes the Bind message of sd with p's parameters as exec sends it: the frontend's
// write buffer as pgproto3 leaves it after a flush (1 KiB) is swapped, when the message will not
// fit, for p's wire buffer, which lendWire grows to fit and the next statement reuses.
func paramsBind(p *params, sd *pgconn.StatementDescription) ([]byte, error) {
	values := p.values()
	size := messagesSize + len(sd.Name)
	for _, v := range values {
		size += 4 + len(v)
	}
	dst := make([]byte, 0, frontendKept)
	if size > frontendKept {
		var err error
		if dst, err = (lendWire{p, size}).Encode(dst); err != nil {
			return nil, err
		}
	}
	return (&pgproto3.Bind{PreparedStatement: sd.Name, ParameterFormatCodes: binaryParams, Parameters: values}).Encode(dst)
}

// pgxBind encodes the Bind message of sd with args as pgx.Conn does for a prepared statement: its
// parameters encoded by eqb with m, into a frontend's write buffer as pgproto3 leaves it after a
// flush (1 KiB).
func pgxBind(m *pgtype.Map, eqb *pgx.ExtendedQueryBuilder, sd *pgconn.StatementDescription, args []any) ([]byte, error) {
	if err := eqb.Build(m, sd, args); err != nil {
		return nil, err
	}
	return (&pgproto3.Bind{PreparedStatement: sd.Name, ParameterFormatCodes: eqb.ParamFormats, Parameters: eqb.ParamValues,
		ResultFormatCodes: eqb.ResultFormats}).Encode(make([]byte, 0, frontendKept))
}

// agree returns an error unless params and pgx give every parameter of sd the same bytes, and
// params' types are sd's.
func agree(write func(p *params) string, sd *pgconn.StatementDescription, plain func() []any) error {
	p := new(params)
	write(p)
	if err := p.check(sd.ParamOIDs); err != nil {
		return err
	}
	var eqb pgx.ExtendedQueryBuilder
	if err := eqb.Build(pgtype.NewMap(), sd, plain()); err != nil {
		return err
	}
	for i, v := range p.values() {
		if w := eqb.ParamValues[i]; !bytes.Equal(v, w) || (v == nil) != (w == nil) {
			return fmt.Errorf("parameter $%d: params wrote %q, pgx %q", i+1, v, w)
		}
	}
	return nil
}

// benchWrite is a write of the given number of new calls, each with the given number of events,
// its calls keyed by prefix, with bodies of about 400 bytes and a key check, as the endpoint
// writes a report.
func benchWrite(prefix string, calls, events int) store.Write {
	at := time.Date(2026, 3, 1, 9, 30, 0, 123456789, time.UTC)
	w := store.Write{OrgID: "0190f3c4-7a1b-7c2d-8e3f-000000000001", ReceivedAt: at.Add(time.Second),
		Check: &store.KeyCheck{ClientID: "ck_0123456789abcdef", SecretHash: bytes.Repeat([]byte{7}, 32), At: at}}
	pad := strings.Repeat("x", 360)
	types := []string{"call_received", "call_answered", "call_ended", "call_recorded", "call_transcribed"}
	for c := range calls {
		cw := store.CallWrite{
			Provider: "sip", ProviderCallID: fmt.Sprintf("%s-%d@carrier.example", prefix, c), Direction: "inbound",
			State: store.StateRinging, Block: json.RawMessage(`{"direction":"inbound","from":{"number":"+442071234567"},"to":{"number":"+442071234500"}}`),
			BlockSequence: 1, BlockAt: at, FirstAt: at, LastAt: at.Add(time.Duration(events) * time.Second),
			Summary: store.Summary{FromKey: "+442071234567", ToKey: "+442071234500", Locations: json.RawMessage(`["front-desk"]`), Callback: "+442071234567"},
		}
		if c%2 == 0 {
			cw.Clients = json.RawMessage(`[{"externalId":"crm-1","name":"Ada Lovelace"}]`)
		}
		if events > 1 {
			cw.State, cw.Summary.AnsweredAt, cw.Summary.AnsweredBy = store.StateAnswered, at.Add(time.Second), "201"
		}
		for j := range events {
			typ := types[j%len(types)]
			cw.Events = append(cw.Events, store.EventWrite{
				ID: fmt.Sprintf("0190f3c4-7a1b-7c2d-8e3f-%06d%06d", c, j), Type: typ, DedupeKey: fmt.Sprintf("%s:%d", typ, j+1),
				Sequence: int64(j + 1), OccurredAt: at.Add(time.Duration(j) * time.Second), OrderAt: at.Add(time.Duration(j) * time.Second),
				Body: json.RawMessage(fmt.Sprintf(`{"type":%q,"sequence":%d,"pad":%q}`, typ, j+1, pad)),
			})
		}
		w.Calls = append(w.Calls, cw)
	}
	return w
}

// benchGroup is a group as group.go writes it: five batches of ten calls of five events and six
// lone call_received, 256 events in all, each write with its received time; and the order of
// its calls.
func benchGroup() (store.Write, []int, []time.Time) {
	var g store.Write
	var received []time.Time
	for i := range 11 {
		w := benchWrite(fmt.Sprintf("w%d", i), 10, 5)
		if i >= 5 {
			w = benchWrite(fmt.Sprintf("w%d", i), 1, 1)
		}
		if i == 0 {
			g = w
			g.Calls = nil
		}
		g.Calls = append(g.Calls, w.Calls...)
		for range w.Calls {
			received = append(received, w.ReceivedAt.Add(time.Duration(i)*time.Millisecond))
		}
	}
	order := make([]int, len(g.Calls))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return strings.Compare(g.Calls[a].ProviderCallID, g.Calls[b].ProviderCallID)
	})
	return g, order, received
}

// plainNullTime is t, or nil (NULL) when t is zero.
func plainNullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// plainJSON is v, or nil (NULL) when it is empty.
func plainJSON(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return nil
	}
	return v
}

// plainManyArgs is writeManySQL's parameters (checkedWriteManySQL's when w has a key check) as
// plain pgx arguments, the values that params.manyCalls writes.
func plainManyArgs(w store.Write, order []int, received []time.Time) []any {
	nc := len(w.Calls)
	var (
		recv, answered, ended                                 = make([]*time.Time, nc), make([]*time.Time, nc), make([]*time.Time, nc)
		ids, providers, pcids, directions, answeredBy         = make([]string, nc), make([]string, nc), make([]string, nc), make([]string, nc), make([]string, nc)
		fromKeys, toKeys, fromExts, toExts, callbacks         = make([]string, nc), make([]string, nc), make([]string, nc), make([]string, nc), make([]string, nc)
		states, flags                                         = make([]int16, nc), make([]int16, nc)
		blocks, clients, locations                            = make([]json.RawMessage, nc), make([]json.RawMessage, nc), make([]json.RawMessage, nc)
		blockSeqs                                             = make([]int64, nc)
		blockAts, firstAts, lastAts                           = make([]time.Time, nc), make([]time.Time, nc), make([]time.Time, nc)
		eProviders, ePCIDs, eIDs, eTypes, eKeys, eProviderIDs []string
		eSeqs                                                 []int64
		eOccurred, eOrder                                     []time.Time
		eBodies                                               []json.RawMessage
	)
	for k, i := range order {
		c := &w.Calls[i]
		if received != nil {
			recv[k] = plainNullTime(received[i])
		} else {
			recv[k] = plainNullTime(w.ReceivedAt)
		}
		ids[k], providers[k], pcids[k], directions[k] = store.CallID(w.OrgID, c.Provider, c.ProviderCallID), c.Provider, c.ProviderCallID, c.Direction
		states[k], blocks[k], blockSeqs[k] = int16(c.State), plainJSON(c.Block), c.BlockSequence
		blockAts[k], firstAts[k], lastAts[k], clients[k] = c.BlockAt, c.FirstAt, c.LastAt, plainJSON(c.Clients)
		m := &c.Summary
		answered[k], answeredBy[k], ended[k], flags[k] = plainNullTime(m.AnsweredAt), m.AnsweredBy, plainNullTime(m.EndedAt), int16(m.Flags)
		fromKeys[k], toKeys[k], fromExts[k], toExts[k] = m.FromKey, m.ToKey, m.FromExt, m.ToExt
		locations[k], callbacks[k] = plainJSON(m.Locations), m.Callback
		for _, e := range c.Events {
			eProviders, ePCIDs = append(eProviders, c.Provider), append(ePCIDs, c.ProviderCallID)
			eIDs, eTypes, eKeys = append(eIDs, e.ID), append(eTypes, e.Type), append(eKeys, e.DedupeKey)
			eSeqs, eProviderIDs = append(eSeqs, e.Sequence), append(eProviderIDs, e.ProviderEventID)
			eOccurred, eOrder, eBodies = append(eOccurred, e.OccurredAt), append(eOrder, e.OrderAt), append(eBodies, plainJSON(e.Body))
		}
	}
	args := []any{w.OrgID, recv, ids, providers, pcids, directions, states, blocks, blockSeqs, blockAts, firstAts, lastAts, clients,
		eProviders, ePCIDs, eIDs, eTypes, eKeys, eSeqs, eProviderIDs, eOccurred, eOrder, eBodies,
		answered, answeredBy, ended, flags, fromKeys, toKeys, fromExts, toExts, locations, callbacks}
	if w.Check != nil {
		args = append(args, w.Check.ClientID, w.Check.SecretHash, w.Check.At)
	}
	return args
}

// plainOneArgs is oneCallSQL's parameters (its checked form's when w has a key check) as plain
// pgx arguments, the values that params.oneCall writes.
func plainOneArgs(w store.Write) []any {
	c := &w.Calls[0]
	m := &c.Summary
	args := []any{w.OrgID, store.CallID(w.OrgID, c.Provider, c.ProviderCallID), c.Provider, c.ProviderCallID, c.Direction,
		int16(c.State), plainJSON(c.Block), c.BlockSequence, c.BlockAt, c.FirstAt, c.LastAt, plainJSON(c.Clients),
		plainNullTime(w.ReceivedAt), plainNullTime(m.AnsweredAt), m.AnsweredBy, plainNullTime(m.EndedAt), int16(m.Flags),
		m.FromKey, m.ToKey, m.FromExt, m.ToExt, plainJSON(m.Locations), m.Callback}
	if w.Check != nil {
		args = append(args, w.Check.ClientID, w.Check.SecretHash, w.Check.At)
	}
	for _, e := range c.Events {
		args = append(args, e.ID, e.Type, e.DedupeKey, e.Sequence, e.ProviderEventID, e.OccurredAt, e.OrderAt, plainJSON(e.Body))
	}
	return args
}

// writeManyOIDs is the types of writeManySQL's parameters, as its comment lists them (and the
// key check's, when checked).
func writeManyOIDs(checked bool) []uint32 {
	oids := []uint32{pgtype.TextOID, pgtype.TimestamptzArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
		pgtype.TextArrayOID, pgtype.Int2ArrayOID, pgtype.JSONArrayOID, pgtype.Int8ArrayOID, pgtype.TimestamptzArrayOID,
		pgtype.TimestamptzArrayOID, pgtype.TimestamptzArrayOID, pgtype.JSONArrayOID,
		pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
		pgtype.Int8ArrayOID, pgtype.TextArrayOID, pgtype.TimestamptzArrayOID, pgtype.TimestamptzArrayOID, pgtype.JSONArrayOID,
		pgtype.TimestamptzArrayOID, pgtype.TextArrayOID, pgtype.TimestamptzArrayOID, pgtype.Int2ArrayOID, pgtype.TextArrayOID,
		pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.JSONArrayOID, pgtype.TextArrayOID}
	if checked {
		oids = append(oids, keyCheckOIDs()...)
	}
	return oids
}

// oneCallOIDs is the types of oneCallSQL's parameters for n events, as its comment lists them.
func oneCallOIDs(n int, checked bool) []uint32 {
	oids := []uint32{pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int2OID,
		pgtype.JSONOID, pgtype.Int8OID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.JSONOID,
		pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TextOID, pgtype.TimestamptzOID, pgtype.Int2OID, pgtype.TextOID,
		pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.JSONOID, pgtype.TextOID}
	if checked {
		oids = append(oids, keyCheckOIDs()...)
	}
	for range n {
		oids = append(oids, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int8OID, pgtype.TextOID,
			pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.JSONOID)
	}
	return oids
}

// keyCheckOIDs is the types of the key check's three parameters.
func keyCheckOIDs() []uint32 { return []uint32{pgtype.TextOID, pgtype.ByteaOID, pgtype.TimestamptzOID} }
