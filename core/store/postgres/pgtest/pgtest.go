// Package pgtest gives a test its own PostgreSQL schema (URL), and a streaming replica of the
// test server (StartStandby).
//
// The database is named by the environment variable CALLWIRE_TEST_DATABASE_URL, for example
//
//	CALLWIRE_TEST_DATABASE_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// When it is unset, URL skips the test with a loud message, or fails it when
// CALLWIRE_REQUIRE_SERVICES=1 is set. Typical use:
//
//	s, err := postgres.Open(ctx, pgtest.URL(t), postgres.Options{})
//	...
//	t.Cleanup(func() { s.Close() })
//	if err := s.Migrate(ctx); err != nil { ... }
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/internal/pgurl"
)

// EnvURL is the environment variable naming the PostgreSQL database tests may create schemas in.
const EnvURL = "CALLWIRE_TEST_DATABASE_URL"

// EnvRequire is the environment variable that, set to "1", turns a missing EnvURL from a skip
// into a failure.
const EnvRequire = "CALLWIRE_REQUIRE_SERVICES"

// URL creates a schema with a fresh random name in the database named by EnvURL and returns a
// connection URL whose search_path is that schema alone, so that everything the test creates
// through it lands there. The schema is dropped, with everything in it, in t.Cleanup; register
// the closing of any pool opened on the URL after calling URL, so that it runs first.
//
// URL skips t (or fails it, under EnvRequire=1) when EnvURL is unset, and fails t when the
// database cannot be reached. Both URL forms are accepted: postgres:// URLs and key=value
// connection strings.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		const example = " (for example " + EnvURL + "='postgres://postgres@127.0.0.1:5432/test?sslmode=disable')"
		if os.Getenv(EnvRequire) == "1" {
			t.Fatal("pgtest: this test needs PostgreSQL and " + EnvRequire + "=1, but " + EnvURL + " is not set" + example)
		}
		t.Skip("pgtest: SKIPPING: this test needs PostgreSQL and " + EnvURL + " is not set" + example)
	}

	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	schema := "callwire_test_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() { dropSchema(t, base, schema) })

	u, err := pgurl.WithSearchPath(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	return u
}

// dropSchema drops schema and everything in it.
func dropSchema(t testing.TB, base, schema string) {
	t.Helper()
	// The test's own context has ended by the time cleanups run.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Errorf("pgtest: drop schema %s: connect: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	// A pool left open by the test may hold locks; do not wait on it forever.
	if _, err := conn.Exec(ctx, "SET lock_timeout = '10s'"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
		return
	}
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}
