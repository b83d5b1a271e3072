package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
)

// A write's statements (writeManySQL for several calls, upsertCallSQL and the events' insert for
// one) carry a request's events, payloads and all, in parameters: over 150 KB for a group of 256
// events of 400 bytes. pgx encodes parameters through a plan per value (and per element of an
// array) into a buffer it shrinks back to 256 bytes after every statement, so each write would
// grow it anew. params writes the statements' parameters in PostgreSQL's binary format (the
// formats of array_recv, textrecv, json_recv, int2recv, int8recv, timestamptz_recv and
// bytearecv) into one buffer that the store keeps for the next write: the bytes pgx would send,
// without its allocations or its plans. BenchmarkParams measures this against pgx's own encoding
// of the same arguments (docs/decisions.md, "A write's parameters are written by hand").

// getWriteParams returns params no other write uses: one a finished write left, or a new one.
//
// A write's params keep buffers the size of its statement, up to a group's (256 events, over
// 100 KB each for the parameters and for the buffer lent to the connection). In a sync.Pool,
// shared with the reads, every params a read had taken would come to hold a write's buffers too,
// and so many write-sized buffers would take a large part of the server's live heap, which under
// the memory limit leaves that much less between collections. Writes run only with a place at
// the gate, so as many params as places serve them all, kept across collections, and the reads
// keep their small ones apart.
func (s *Store) getWriteParams() *params {
	select {
	case p := <-s.writeParams:
		return p
	default:
		return new(params)
	}
}

// putWriteParams gives p back for the next write; it is dropped when the store keeps as many as
// there are places, which no write beyond the gate's should make.
func (s *Store) putWriteParams(p *params) {
	select {
	case s.writeParams <- p:
	default:
	}
}

// params is a statement's parameters in binary format, written one after the other.
type params struct {
	buf []byte
	// ends[i] is the end of parameter i in buf; a parameter that is NULL has end -1 and takes
	// no bytes.
	ends []int
	oids []uint32
	// events and eventCalls are scratch for writeMany: a batch's events in order, and the
	// call of each.
	events     []*store.EventWrite
	eventCalls []*store.CallWrite
	// vals is values' result, kept for the next statement.
	vals [][]byte
	// wire is the write buffer exec lends a connection's frontend for a statement's messages
	// (see lendWire), nil while a frontend may still hold it.
	wire []byte
}

// paramsKept is the largest buffer a store keeps for its next batch: a batch of 50 events of
// the largest allowed size needs more, and allocates it.
const paramsKept = 256 << 10

// reset readies p for a statement whose parameters take about size bytes.
func (p *params) reset(size int) {
	if cap(p.buf) > paramsKept {
		p.buf = nil
	}
	if cap(p.wire) > paramsKept {
		p.wire = nil
	}
	if cap(p.buf) < size {
		p.buf = make([]byte, 0, size)
	}
	p.buf, p.ends, p.oids = p.buf[:0], p.ends[:0], p.oids[:0]
}

// values returns the parameters, each a slice of p's buffer (nil for NULL), in the order they
// were written; they are valid until p is reset or values is called again.
func (p *params) values() [][]byte {
	out := slices.Grow(p.vals[:0], len(p.ends))[:len(p.ends)]
	p.vals = out
	start := 0
	for i, end := range p.ends {
		if end < 0 {
			out[i] = nil
			continue
		}
		out[i] = p.buf[start:end:end]
		start = end
	}
	return out
}

// exec runs the prepared statement sd on conn with p's parameters, sent in binary format, and
// hands each row, its columns as text, to row (see eachRow).
//
// A connection's frontend (pgproto3) encodes a statement's messages into a write buffer that it
// grows by appending and, after each flush, replaces by a fresh one of 1 KiB when it grew past
// that, so every write's statement would grow it again, by doubling, to the statement's size
// (BenchmarkParams counts this in). So when the messages will not fit in 1 KiB, exec first
// lends the frontend p's wire buffer, big enough for them, and afterwards takes it back for p's
// next statement, unless the frontend still holds it (the statement was never flushed) or the
// connection was closed.
func (p *params) exec(ctx context.Context, conn *pgxpool.Conn, sd *pgconn.StatementDescription, row func(v [][]byte) error) error {
	pc := conn.Conn().PgConn()
	values := p.values()
	size := messagesSize + len(sd.Name)
	for _, v := range values {
		size += 4 + len(v)
	}
	// A closed connection's frontend is pgconn's alone: it sends Terminate from a goroutine of
	// its own. Only this goroutine, which holds the connection, closes it.
	fe := pc.Frontend()
	lent := size > frontendKept && !pc.IsClosed()
	if lent {
		fe.Send(lendWire{p, size})
	}
	err := eachRow(pc.ExecStatement(ctx, sd, values, binaryParams, nil), row)
	switch {
	case lent && pc.IsClosed():
		p.wire = nil
	case lent:
		fe.Send(reclaimWire{p})
	}
	return err
}

// frontendKept is the largest write buffer a frontend keeps after a flush (pgproto3's).
const frontendKept = 1024

// messagesSize bounds the bytes of exec's messages (Bind, Execute, Sync) beside the statement's
// name and the parameters, which take four bytes each plus their values.
const messagesSize = 64

// lendWire is a message of no bytes: sent to a frontend, it makes p's wire buffer, grown to hold
// n bytes more than the frontend has pending, the frontend's write buffer.
type lendWire struct {
	p *params
	n int
}

func (lendWire) Frontend() {}

func (lendWire) Decode([]byte) error { return errors.New("lendWire is never received") }

// Encode returns dst in p's wire buffer, with room for n more bytes.
func (m lendWire) Encode(dst []byte) ([]byte, error) {
	if cap(dst)-len(dst) >= m.n {
		return dst, nil
	}
	if cap(m.p.wire) < len(dst)+m.n {
		m.p.wire = make([]byte, 0, len(dst)+m.n)
	}
	return append(m.p.wire[:0], dst...), nil
}

// reclaimWire is a message of no bytes: sent to a frontend, it forgets p's wire buffer if the
// frontend still holds it, so that no other statement writes into it.
type reclaimWire struct{ p *params }

func (reclaimWire) Frontend() {}

func (reclaimWire) Decode([]byte) error { return errors.New("reclaimWire is never received") }

// Encode returns dst unchanged.
func (m reclaimWire) Encode(dst []byte) ([]byte, error) {
	if sameArray(dst, m.p.wire) {
		m.p.wire = nil
	}
	return dst, nil
}

// sameArray reports whether a and b share their backing array's end.
func sameArray(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:cap(a)][cap(a)-1] == &b[:cap(b)][cap(b)-1]
}

// check returns an error unless the statement's parameter types, as the server described them,
// are those p wrote.
func (p *params) check(oids []uint32) error {
	return p.checkFrom(0, len(p.oids), oids)
}

// checkFrom is check for the statement whose parameters are p's from to to.
func (p *params) checkFrom(from, to int, oids []uint32) error {
	if len(oids) != to-from {
		return fmt.Errorf("the statement takes %d parameters, %d written", len(oids), to-from)
	}
	for i, o := range oids {
		if o != p.oids[from+i] {
			return fmt.Errorf("parameter $%d is of type %d, written as %d", i+1, o, p.oids[from+i])
		}
	}
	return nil
}

func (p *params) end(oid uint32) {
	p.ends = append(p.ends, len(p.buf))
	p.oids = append(p.oids, oid)
}

func (p *params) null(oid uint32) {
	p.ends = append(p.ends, -1)
	p.oids = append(p.oids, oid)
}

// text writes a text value.
func (p *params) text(s string) {
	p.buf = append(p.buf, s...)
	p.end(pgtype.TextOID)
}

// bytea writes a bytea value, NULL when b is nil.
func (p *params) bytea(b []byte) {
	if b == nil {
		p.null(pgtype.ByteaOID)
		return
	}
	p.buf = append(p.buf, b...)
	p.end(pgtype.ByteaOID)
}

// timestamptz writes t, or NULL when t is nil.
func (p *params) timestamptz(t *time.Time) {
	if t == nil {
		p.null(pgtype.TimestamptzOID)
		return
	}
	p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(microsSince2000(*t)))
	p.end(pgtype.TimestamptzOID)
}

// zeroNullTimestamptz writes t, or NULL when t is zero.
func (p *params) zeroNullTimestamptz(t time.Time) {
	if t.IsZero() {
		p.null(pgtype.TimestamptzOID)
		return
	}
	p.timestamptz(&t)
}

// microsSince2000 is t as PostgreSQL stores a timestamptz: microseconds since 2000-01-01 UTC,
// the nanoseconds truncated (as pgx encodes it).
func microsSince2000(t time.Time) int64 {
	const unixTo2000 = 946_684_800 * 1_000_000
	return t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - unixTo2000
}

// array writes the header of a one-dimensional array of n elements of type elem; its elements
// follow. It returns where the header's null flag is, for an array with NULL elements to set.
func (p *params) array(elem uint32, n int) int {
	p.buf = binary.BigEndian.AppendUint32(p.buf, 1) // dimensions
	flag := len(p.buf)
	p.buf = binary.BigEndian.AppendUint32(p.buf, 0) // has nulls
	p.buf = binary.BigEndian.AppendUint32(p.buf, elem)
	p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(n))
	p.buf = binary.BigEndian.AppendUint32(p.buf, 1) // lower bound
	return flag
}

// nullElement appends a NULL element to the array whose header's null flag is at flag, and sets
// the flag.
func (p *params) nullElement(flag int) {
	p.buf = binary.BigEndian.AppendUint32(p.buf, ^uint32(0)) // -1: NULL
	binary.BigEndian.PutUint32(p.buf[flag:], 1)
}

// appendElement appends one array element's length and bytes to buf.
func appendElement[T ~string | ~[]byte](buf []byte, v T) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
	return append(buf, v...)
}

// textArray writes a text[] of the n values of at.
func (p *params) textArray(n int, at func(int) string) {
	p.array(pgtype.TextOID, n)
	for i := range n {
		p.buf = appendElement(p.buf, at(i))
	}
	p.end(pgtype.TextArrayOID)
}

// fixedArray writes an array of n elements of width bytes each, which put appends, one by one.
func (p *params) fixedArray(elem, array uint32, n int, width uint32, put func(i int)) {
	p.array(elem, n)
	for i := range n {
		p.buf = binary.BigEndian.AppendUint32(p.buf, width)
		put(i)
	}
	p.end(array)
}

// int2Array writes a smallint[] of the n values of at.
func (p *params) int2Array(n int, at func(int) int16) {
	p.fixedArray(pgtype.Int2OID, pgtype.Int2ArrayOID, n, 2, func(i int) {
		p.buf = binary.BigEndian.AppendUint16(p.buf, uint16(at(i)))
	})
}

// int8Array writes a bigint[] of the n values of at.
func (p *params) int8Array(n int, at func(int) int64) {
	p.fixedArray(pgtype.Int8OID, pgtype.Int8ArrayOID, n, 8, func(i int) {
		p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(at(i)))
	})
}

// timestamptzArray writes a timestamptz[] of the n values of at.
func (p *params) timestamptzArray(n int, at func(int) time.Time) {
	p.fixedArray(pgtype.TimestamptzOID, pgtype.TimestamptzArrayOID, n, 8, func(i int) {
		p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(microsSince2000(at(i))))
	})
}

// nullTimestamptzArray writes a timestamptz[] of the n values of at, a zero time as NULL.
func (p *params) nullTimestamptzArray(n int, at func(int) time.Time) {
	flag := p.array(pgtype.TimestamptzOID, n)
	for i := range n {
		t := at(i)
		if t.IsZero() {
			p.nullElement(flag)
			continue
		}
		p.buf = binary.BigEndian.AppendUint32(p.buf, 8)
		p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(microsSince2000(t)))
	}
	p.end(pgtype.TimestamptzArrayOID)
}

// jsonArray writes a json[] of the n values of at, an empty value as NULL.
func (p *params) jsonArray(n int, at func(int) json.RawMessage) {
	flag := p.array(pgtype.JSONOID, n)
	for i := range n {
		v := at(i)
		if len(v) == 0 {
			p.nullElement(flag)
			continue
		}
		p.buf = appendElement(p.buf, v)
	}
	p.end(pgtype.JSONArrayOID)
}

// timestamptzAt writes t.
func (p *params) timestamptzAt(t time.Time) {
	p.timestamptz(&t)
}

// int2 writes a smallint.
func (p *params) int2(v int16) {
	p.buf = binary.BigEndian.AppendUint16(p.buf, uint16(v))
	p.end(pgtype.Int2OID)
}

// int8 writes a bigint.
func (p *params) int8(v int64) {
	p.buf = binary.BigEndian.AppendUint64(p.buf, uint64(v))
	p.end(pgtype.Int8OID)
}

// json writes a json value, NULL when v is empty.
func (p *params) json(v json.RawMessage) {
	if len(v) == 0 {
		p.null(pgtype.JSONOID)
		return
	}
	p.buf = append(p.buf, v...)
	p.end(pgtype.JSONOID)
}

// eventArrays writes the n events of at as the eight arrays insertEventsSQL and writeManySQL
// take in this order: id, type, dedupe key, sequence, provider event ID, occurredAt, order time,
// body.
func (p *params) eventArrays(n int, at func(int) *store.EventWrite) {
	p.textArray(n, func(k int) string { return at(k).ID })
	p.textArray(n, func(k int) string { return at(k).Type })
	p.textArray(n, func(k int) string { return at(k).DedupeKey })
	p.int8Array(n, func(k int) int64 { return at(k).Sequence })
	p.textArray(n, func(k int) string { return at(k).ProviderEventID })
	p.timestamptzArray(n, func(k int) time.Time { return at(k).OccurredAt })
	p.timestamptzArray(n, func(k int) time.Time { return at(k).OrderAt })
	p.jsonArray(n, func(k int) json.RawMessage { return at(k).Body })
}

// eventSize is about the bytes an event takes among a write's parameters.
func eventSize(e *store.EventWrite) int {
	return 96 + len(e.ID) + len(e.Type) + len(e.DedupeKey) + len(e.ProviderEventID) + len(e.Body)
}

// keyCheck writes the three parameters of the key check (keyCheckAt24 and the others): client
// ID, secret hash, time.
func (p *params) keyCheck(c *store.KeyCheck) {
	p.text(c.ClientID)
	p.bytea(c.SecretHash)
	p.timestamptzAt(c.At)
}

// prepared prepares sql under name on conn (nothing to do once the connection has it) and checks
// that p's parameters are of the types the statement declares; what names the statement in
// that error.
func prepared(ctx context.Context, conn *pgxpool.Conn, p *params, name, sql, what string) (*pgconn.StatementDescription, error) {
	sd, err := conn.Conn().Prepare(ctx, name, sql)
	if err != nil {
		return nil, err
	}
	if err := p.check(sd.ParamOIDs); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return sd, nil
}

// upsertCall resets p for a write of the one call c whose parameters past the upsert's take
// about extra bytes beside the events, and writes upsertCallSQL's thirteen parameters.
func (p *params) upsertCall(w *store.Write, c *store.CallWrite, extra int) {
	size := 384 + extra + len(w.OrgID) + store.CallIDLen + len(c.Provider) + len(c.ProviderCallID) + len(c.Direction) + len(c.Block) + len(c.Clients) + len(c.Summary.Locations) + len(c.Summary.Callback)
	for j := range c.Events {
		size += eventSize(&c.Events[j])
	}
	p.reset(size)
	p.text(w.OrgID)
	p.buf = store.AppendCallID(p.buf, w.OrgID, c.Provider, c.ProviderCallID)
	p.end(pgtype.TextOID)
	p.text(c.Provider)
	p.text(c.ProviderCallID)
	p.text(c.Direction)
	p.int2(int16(c.State))
	p.json(c.Block)
	p.int8(c.BlockSequence)
	p.timestamptzAt(c.BlockAt)
	p.timestamptzAt(c.FirstAt)
	p.timestamptzAt(c.LastAt)
	p.json(c.Clients)
	p.timestamptz(nullTime(w.ReceivedAt))
	p.summary(&c.Summary)
	p.text(c.Summary.Callback)
}

// summary writes the parameters of a call's summary (upsertCallValues' $14 to $22).
func (p *params) summary(m *store.Summary) {
	p.zeroNullTimestamptz(m.AnsweredAt)
	p.text(m.AnsweredBy)
	p.zeroNullTimestamptz(m.EndedAt)
	p.int2(int16(m.Flags))
	p.text(m.FromKey)
	p.text(m.ToKey)
	p.text(m.FromExt)
	p.text(m.ToExt)
	p.json(m.Locations)
}
