package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// TestHotStatementsKeepTheirPlans runs every statement of the write path (the ringing reads and
// the writes, with and without a key check, resends included) many times with shapes that vary
// as reports do, on one connection, then asks PostgreSQL how it planned them. A prepared
// statement is planned afresh for its first five runs; after that it should run its cached
// generic plan. One whose custom plans stay cheaper than the generic one in the planner's
// estimates (an array's length it can see in each run's parameters, say) is planned on every
// run, which costs PostgreSQL more than running it.
func TestHotStatementsKeepTheirPlans(t *testing.T) {
	s, org := openWithOrg(t, Options{MaxConns: 1}) // one connection: every statement's plans on it
	check := liveKey(t, s, org)

	now := time.Now().UTC()
	write := func(round, calls, events int) store.Write {
		return shapedWrite(org, now, fmt.Sprintf("r%d", round), calls, events, "call_received")
	}
	refs := func(w store.Write) []store.EventRef {
		var out []store.EventRef
		for _, c := range w.Calls {
			out = append(out, store.EventRef{Provider: c.Provider, ProviderCallID: c.ProviderCallID, DedupeKey: c.Events[0].DedupeKey})
		}
		return out
	}
	const rounds = 40
	for r := range rounds {
		for k, chk := range []*store.KeyCheck{nil, check} {
			round := 2*r + k // new calls for every round and check
			shapes := []store.Write{
				write(round, 2+r%8, 1+r%3),             // a few calls, a few events each
				write(round+1000, 10+r%41, 1),          // 10 to 50 calls
				write(round+2000, 1, 1+r%maxEventRows), // one call, its events as rows
				write(round+3000, 1, 5+r%6),            // one call, more events than rows
			}
			for _, w := range shapes {
				w.Check = chk
				if _, err := s.Ringing(t.Context(), org, refs(w), chk); err != nil {
					t.Fatal(err)
				}
				if _, err := s.WriteCalls(t.Context(), w); err != nil {
					t.Fatal(err)
				}
				// The resend: every ringing on file, every event a duplicate.
				if _, err := s.Ringing(t.Context(), org, refs(w), chk); err != nil {
					t.Fatal(err)
				}
				if _, err := s.WriteCalls(t.Context(), w); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	conn, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var version int
	if err := conn.QueryRow(t.Context(), `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		t.Skipf("PostgreSQL %d counts no plans in pg_prepared_statements (14 and later do)", version)
	}
	rows, err := conn.Query(t.Context(), `SELECT name, generic_plans, custom_plans,
		left(regexp_replace(statement, '\s+', ' ', 'g'), 60) FROM pg_prepared_statements ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var name, stmt string
		var generic, custom int64
		if err := rows.Scan(&name, &generic, &custom, &stmt); err != nil {
			t.Fatal(err)
		}
		seen++
		t.Logf("%s: %d generic plans, %d custom: %s", name, generic, custom, stmt)
		// Every statement of the write path runs at least 20 times above (the rows of one
		// call's events: one statement per count, four counts, with and without the check).
		if generic+custom >= 20 && custom > 5 {
			t.Errorf("%s was planned for %d of its %d runs; it should run its generic plan after five",
				name, custom, generic+custom)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("no prepared statement of the store's found")
	}
}
