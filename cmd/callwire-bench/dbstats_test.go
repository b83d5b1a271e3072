package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

func TestSampleDB(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	a := sampleDB(ctx, url)
	if !a.ok {
		t.Fatal("sampleDB could not read the statistics of a reachable PostgreSQL")
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// Some committed work that writes WAL, then the statistics flushed so the next reading sees it.
	for _, sql := range []string{
		`CREATE TABLE t (v text)`,
		`INSERT INTO t SELECT repeat('x', 100) FROM generate_series(1, 100)`,
		`SELECT pg_stat_force_next_flush()`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	b := sampleDB(ctx, url)
	d := a.delta(b, 100)
	if d == nil {
		t.Fatal("no delta between two good readings")
	}
	if d.WALBytesPerEvent <= 0 || d.CommitsPerEvent <= 0 || d.Checkpoints < 0 || d.BlocksReadPerEvent < 0 {
		t.Fatalf("delta %+v: want WAL and commits", *d)
	}
	if a.delta(b, 0) != nil || (dbSample{}).delta(b, 100) != nil {
		t.Fatal("a delta over no events, or from a failed reading, must be nil")
	}
	if s := sampleDB(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1"); s.ok {
		t.Fatal("a reading from an unreachable server is ok")
	}
}
