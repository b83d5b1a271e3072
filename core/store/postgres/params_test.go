package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

// TestParamsAgreeWithPgx sends the same values twice, written by params and encoded by pgx,
// and holds PostgreSQL's text of each to be the same: every type writeMany writes, with NULLs,
// empty arrays, times before 2000 and with nanoseconds, and text that is not ASCII.
func TestParamsAgreeWithPgx(t *testing.T) {
	conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())

	at := time.Date(2026, 11, 26, 13, 45, 7, 123456789, time.FixedZone("x", 3600))
	old := time.Date(1969, 7, 20, 20, 17, 40, 999, time.UTC)
	texts := []string{"", "call-1", "Zoë \"quoted\" {braces}, commas", "日本"}
	int2s := []int16{0, 3, -1, 32767}
	int8s := []int64{0, 1, -9, 1 << 62}
	times := []time.Time{at, old, {}, at.Add(time.Microsecond)}
	jsons := []json.RawMessage{json.RawMessage(`{"a":[1,2,"é"]}`), nil, json.RawMessage(`null`), json.RawMessage(` [ ] `)}
	cases := []struct {
		name string
		cast string
		pgx  any
		put  func(p *params)
	}{
		{"text", "text", texts[2], func(p *params) { p.text(texts[2]) }},
		{"timestamptz", "timestamptz", at, func(p *params) { p.timestamptz(&at) }},
		{"timestamptz NULL", "timestamptz", (*time.Time)(nil), func(p *params) { p.timestamptz(nil) }},
		{"smallint", "smallint", int16(-2), func(p *params) { p.int2(-2) }},
		{"bigint", "bigint", int64(-1) << 40, func(p *params) { p.int8(-1 << 40) }},
		{"json", "json", jsons[0], func(p *params) { p.json(jsons[0]) }},
		{"json NULL", "json", json.RawMessage(nil), func(p *params) { p.json(nil) }},
		{"timestamptz before 2000", "timestamptz", old, func(p *params) { p.timestamptzAt(old) }},
		{"bytea", "bytea", []byte{0, 1, 0xff}, func(p *params) { p.bytea([]byte{0, 1, 0xff}) }},
		{"bytea NULL", "bytea", []byte(nil), func(p *params) { p.bytea(nil) }},
		{"text[]", "text[]", texts, func(p *params) { p.textArray(len(texts), func(i int) string { return texts[i] }) }},
		{"text[] empty", "text[]", []string{}, func(p *params) { p.textArray(0, nil) }},
		{"smallint[]", "smallint[]", int2s, func(p *params) { p.int2Array(len(int2s), func(i int) int16 { return int2s[i] }) }},
		{"bigint[]", "bigint[]", int8s, func(p *params) { p.int8Array(len(int8s), func(i int) int64 { return int8s[i] }) }},
		{"timestamptz[]", "timestamptz[]", times, func(p *params) {
			p.timestamptzArray(len(times), func(i int) time.Time { return times[i] })
		}},
		{"json[]", "json[]", jsons, func(p *params) { p.jsonArray(len(jsons), func(i int) json.RawMessage { return jsons[i] }) }},
		{"json[] no NULL", "json[]", jsons[:1], func(p *params) { p.jsonArray(1, func(i int) json.RawMessage { return jsons[i] }) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sql := fmt.Sprintf("SELECT $1::%s::text, array_ndims($1::%[1]s), cardinality($1::%[1]s)", tc.cast)
			if !strings.HasSuffix(tc.cast, "[]") {
				sql = fmt.Sprintf("SELECT $1::%s::text, NULL::int, NULL::int", tc.cast)
			}
			if _, err := conn.Exec(t.Context(), "SET TIME ZONE 'UTC'"); err != nil {
				t.Fatal(err)
			}
			var want [3]*string
			if err := conn.QueryRow(t.Context(), sql, tc.pgx).Scan(&want[0], &want[1], &want[2]); err != nil {
				t.Fatalf("pgx: %v", err)
			}
			var p params
			p.reset(0)
			tc.put(&p)
			sd, err := conn.Prepare(t.Context(), "", sql)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.check(sd.ParamOIDs); err != nil {
				t.Fatal(err)
			}
			res := conn.PgConn().ExecPrepared(t.Context(), sd.Name, p.values(), binaryParams, nil).Read()
			if res.Err != nil {
				t.Fatalf("params: %v", res.Err)
			}
			if len(res.Rows) != 1 || len(res.Rows[0]) != 3 {
				t.Fatalf("params: %d rows", len(res.Rows))
			}
			for i, v := range res.Rows[0] {
				w := want[i]
				if (v == nil) != (w == nil) || (w != nil && string(v) != *w) {
					t.Errorf("column %d: params gave %q, pgx %v", i, v, deref(w))
				}
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return fmt.Sprintf("%q", *s)
}

// TestLendWire holds a frontend with a lent wire buffer to send the very bytes it sends without
// one, and the buffer to come back to params only once the frontend has let go of it.
func TestLendWire(t *testing.T) {
	bind := &pgproto3.Bind{PreparedStatement: "s", ParameterFormatCodes: binaryParams,
		Parameters: [][]byte{[]byte(strings.Repeat("a", 3000)), nil, []byte("b")}}
	send := func(p *params) []byte {
		var out bytes.Buffer
		fe := pgproto3.NewFrontend(strings.NewReader(""), &out)
		if p != nil {
			fe.Send(lendWire{p, 4000})
			if p.wire == nil || cap(p.wire) < 4000 {
				t.Fatalf("lent a buffer of %d bytes, want at least 4000", cap(p.wire))
			}
		}
		fe.SendBind(bind)
		fe.SendSync(&pgproto3.Sync{})
		if err := fe.Flush(); err != nil {
			t.Fatal(err)
		}
		if p != nil {
			lent := p.wire
			fe.Send(reclaimWire{p})
			if !sameArray(p.wire, lent) {
				t.Error("after a flush, the buffer did not come back")
			}
		}
		return out.Bytes()
	}
	if got, want := send(new(params)), send(nil); !bytes.Equal(got, want) {
		t.Errorf("with a lent buffer the frontend sent %d bytes, want the %d it sends without", len(got), len(want))
	}

	// Lent and never flushed (the statement was refused before it was sent): the frontend still
	// holds the buffer, so params must not use it again.
	p := new(params)
	fe := pgproto3.NewFrontend(strings.NewReader(""), io.Discard)
	fe.Send(lendWire{p, 4000})
	fe.Send(reclaimWire{p})
	if p.wire != nil {
		t.Error("the frontend holds the lent buffer, and params kept it")
	}
	// Lent again: a frontend with room enough is left as it is.
	p.wire = make([]byte, 0, 8000)
	fe.Send(lendWire{p, 10})
	fe.Send(reclaimWire{p})
	if p.wire == nil {
		t.Error("a buffer never lent was forgotten")
	}
}

// TestValuesReused holds a NULL to stay NULL when values reuses the slice of an earlier
// statement that had a value in its place.
func TestValuesReused(t *testing.T) {
	p := new(params)
	p.reset(64)
	p.text("first")
	p.bytea([]byte("x"))
	p.values()
	p.reset(64)
	p.bytea(nil)
	p.text("second")
	v := p.values()
	if len(v) != 2 || v[0] != nil || string(v[1]) != "second" {
		t.Errorf("values after reuse = %q, want [nil second]", v)
	}
}
