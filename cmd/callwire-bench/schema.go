package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/internal/pgurl"
)

// createSchema makes a schema with a fresh random name in the database at base and returns its
// name, a connection URL whose search_path is that schema alone, and the server's version.
func createSchema(ctx context.Context, base string) (schema, schemaURL, version string, err error) {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	schema = "callwire_bench_" + hex.EncodeToString(b[:])
	schemaURL, err = pgurl.WithSearchPath(base, schema)
	if err != nil {
		return "", "", "", fmt.Errorf("database url: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, base)
	if err != nil {
		return "", "", "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(cctx)
	if err := conn.QueryRow(cctx, "SELECT current_setting('server_version')").Scan(&version); err != nil {
		return "", "", "", fmt.Errorf("server version: %w", err)
	}
	if _, err := conn.Exec(cctx, "CREATE SCHEMA "+schema); err != nil {
		return "", "", "", fmt.Errorf("create schema %s: %w", schema, err)
	}
	return schema, schemaURL, version, nil
}

// dropSchema drops schema and everything in it. It runs at the end of the bench, so it takes
// its own deadline rather than a context that may already have ended.
func dropSchema(ctx context.Context, base, schema string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(dctx, base)
	if err != nil {
		return fmt.Errorf("drop schema %s: connect: %w", schema, err)
	}
	defer conn.Close(dctx)
	if _, err := conn.Exec(dctx, "SET lock_timeout = '20s'"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	if _, err := conn.Exec(dctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

// serverDatabaseURL returns the URL to hand the server through CALLWIRE_DATABASE_URL, which must
// be a postgres:// URL (the configuration refuses other forms).
func serverDatabaseURL(schemaURL string) (string, error) {
	if strings.HasPrefix(schemaURL, "postgres://") || strings.HasPrefix(schemaURL, "postgresql://") {
		return schemaURL, nil
	}
	return "", fmt.Errorf("the server needs a postgres:// URL; got a key=value connection string")
}

// analyze refreshes the planner's statistics of the bench tables, as autovacuum would in a
// deployment; a PostgreSQL run with autovacuum off would otherwise plan on empty-table guesses
// for the whole run.
func analyze(ctx context.Context, schemaURL string) error {
	actx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(actx, schemaURL)
	if err != nil {
		return fmt.Errorf("analyze: connect: %w", err)
	}
	defer conn.Close(actx)
	if _, err := conn.Exec(actx, "ANALYZE orgs, api_keys, calls, call_events"); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// countEvents returns how many calls and events the bench schema holds.
func countEvents(ctx context.Context, schemaURL string) (calls, events int64, err error) {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, schemaURL)
	if err != nil {
		return 0, 0, fmt.Errorf("count: connect: %w", err)
	}
	defer conn.Close(cctx)
	err = conn.QueryRow(cctx, "SELECT (SELECT count(*) FROM calls), (SELECT count(*) FROM call_events)").Scan(&calls, &events)
	if err != nil {
		return 0, 0, fmt.Errorf("count: %w", err)
	}
	return calls, events, nil
}
