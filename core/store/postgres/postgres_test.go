package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
	"github.com/callwire/callwire/core/store/storetest"
	"github.com/callwire/callwire/internal/testwait"
)

// openStore returns a migrated store in a schema of its own, closed when t ends.
func openStore(t testing.TB, url string, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// TestContract runs the contract suite, recording every statement the store runs, then checks
// that each of them bounds every tenant table it reads or changes by org_id (orgfilter_test.go),
// as distributing the tables by organization needs (docs/scaling.md, "Citus").
func TestContract(t *testing.T) {
	rec := newSQLRecorder()
	t.Run("suite", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			url := pgtest.URL(t)
			openStore(t, url, postgres.Options{}) // migrated apart, so that only the store's own statements are recorded
			s, err := postgres.OpenTraced(t.Context(), url, postgres.Options{}, rec)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
	t.Run("every query of a tenant table filters on org_id", func(t *testing.T) {
		url := pgtest.URL(t)
		openStore(t, url, postgres.Options{})
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.WithoutCancel(t.Context()))
		checkOrgFilters(t, conn, rec.statements())
	})
}

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), url, postgres.Options{MaxConns: 2})
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			errs[i] = s.Migrate(t.Context())
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	s := openStore(t, url, postgres.Options{}) // migrates once more: nothing to do
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestMigrateMissingSchema(t *testing.T) {
	url := pgtest.URL(t)
	url = strings.Replace(url, "search_path=", "search_path=no_such_schema_", 1)
	s, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if err := s.Migrate(t.Context()); err == nil {
		t.Fatal("Migrate into a schema that does not exist succeeded")
	}
}

// withParam adds a connection parameter to url, a postgres:// URL or a key=value string.
func withParam(url, key, value string) string {
	if strings.Contains(url, "://") {
		return url + "&" + key + "=" + value
	}
	return url + " " + key + "=" + value
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// base is the reference instant of these tests, in whole microseconds.
var base = time.Date(2025, time.June, 1, 12, 0, 0, 123456000, time.UTC)

// sampleWrite returns a write for org of the calls named, each with events events.
func sampleWrite(org string, events int, callIDs ...string) store.Write {
	w := store.Write{OrgID: org, ReceivedAt: base.Add(time.Minute)}
	for _, pcid := range callIDs {
		c := store.CallWrite{
			Provider: "sip", ProviderCallID: pcid, Direction: "inbound",
			State: store.StateRinging, Block: json.RawMessage(`{"direction":"inbound"}`),
			BlockSequence: int64(events), BlockAt: base, FirstAt: base, LastAt: base,
		}
		for j := range events {
			typ := []string{"call_received", "call_hold", "call_recorded"}[j%3]
			c.Events = append(c.Events, store.EventWrite{
				ID: newID(), Type: typ, DedupeKey: fmt.Sprintf("%s:%d", typ, j), Sequence: int64(j),
				OccurredAt: base, OrderAt: base,
				Body: json.RawMessage(fmt.Sprintf(`{"type":%q,"sequence":%d}`, typ, j)),
			})
		}
		w.Calls = append(w.Calls, c)
	}
	return w
}

// refreshIDs returns w with fresh event IDs, as a retried request carries.
func refreshIDs(w store.Write) store.Write {
	out := w
	out.Calls = make([]store.CallWrite, len(w.Calls))
	for i, c := range w.Calls {
		c.Events = append([]store.EventWrite(nil), c.Events...)
		for j := range c.Events {
			c.Events[j].ID = newID()
		}
		out.Calls[i] = c
	}
	return out
}

func createOrg(t *testing.T, s store.Store) string {
	t.Helper()
	org := newID()
	if err := s.CreateOrg(t.Context(), store.Org{ID: org, Name: "clinic", CreatedAt: base}); err != nil {
		t.Fatalf("CreateOrg: %v", err)
	}
	return org
}

// TestWriteCallsRace has many writers send the same Write at once: one of them creates each
// call, each event is stored once, and every result names the stored IDs.
func TestWriteCallsRace(t *testing.T) {
	for _, tt := range []struct {
		name     string
		freshIDs bool // each writer carries its own IDs, as separate requests do
		shuffle  bool // each writer lists the calls in its own order
		calls    int
	}{
		{"same IDs, one call", false, false, 1},
		{"fresh IDs, one call", true, false, 1},
		{"fresh IDs, many calls, shuffled", true, true, 7},
		{"same IDs, many calls, shuffled", false, true, 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, pgtest.URL(t), postgres.Options{MaxConns: 20})
			org := createOrg(t, s)
			var pcids []string
			for i := range tt.calls {
				pcids = append(pcids, fmt.Sprintf("race-%d", i))
			}
			w := sampleWrite(org, 5, pcids...)

			const writers = 50
			writes := make([]store.Write, writers)
			results := make([][]store.CallResult, writers)
			errs := make([]error, writers)
			for i := range writers {
				writes[i] = w
				if tt.freshIDs {
					writes[i] = refreshIDs(w)
				}
				if tt.shuffle {
					calls := append([]store.CallWrite(nil), writes[i].Calls...)
					rand.Shuffle(len(calls), func(a, b int) { calls[a], calls[b] = calls[b], calls[a] })
					writes[i].Calls = calls
				}
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range writers {
				wg.Go(func() {
					<-start
					results[i], errs[i] = s.WriteCalls(t.Context(), writes[i])
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("writer %d: %v", i, err)
				}
			}

			for _, pcid := range pcids {
				call, events, err := s.GetCall(t.Context(), org, "sip", pcid)
				if err != nil {
					t.Fatalf("GetCall(%s): %v", pcid, err)
				}
				if len(events) != 5 {
					t.Fatalf("%s has %d events, want 5", pcid, len(events))
				}
				storedID := map[string]string{}
				for _, e := range events {
					storedID[e.DedupeKey] = e.ID
					if e.CallID != call.ID {
						t.Errorf("event %s has call ID %q, want %q", e.DedupeKey, e.CallID, call.ID)
					}
				}
				created := 0
				fresh := map[string]int{}
				for i := range writers {
					for k, c := range writes[i].Calls {
						if c.ProviderCallID != pcid {
							continue
						}
						r := results[i][k]
						if r.ID != call.ID {
							t.Errorf("writer %d: call ID %q, want the stored %q", i, r.ID, call.ID)
						}
						if r.Created {
							created++
							if want := store.CallID(org, c.Provider, c.ProviderCallID); call.ID != want {
								t.Errorf("writer %d created the call but it is stored as %q, not %q", i, call.ID, want)
							}
						}
						for j, e := range r.Events {
							key := c.Events[j].DedupeKey
							if e.ID != storedID[key] {
								t.Errorf("writer %d event %s: ID %q, want the stored %q", i, key, e.ID, storedID[key])
							}
							if !e.Duplicate {
								fresh[key]++
								if c.Events[j].ID != e.ID {
									t.Errorf("writer %d stored event %s as %q, not its %q", i, key, e.ID, c.Events[j].ID)
								}
							}
						}
					}
				}
				if created != 1 {
					t.Errorf("%s: %d writers saw Created, want exactly 1", pcid, created)
				}
				for key := range storedID {
					if fresh[key] != 1 {
						t.Errorf("%s event %s: %d writers stored it, want exactly 1", pcid, key, fresh[key])
					}
				}
			}
		})
	}
}

// TestBodyByteForByte stores bodies that a JSON round trip would change and reads them back.
func TestBodyByteForByte(t *testing.T) {
	s := openStore(t, pgtest.URL(t), postgres.Options{})
	org := createOrg(t, s)
	bodies := []string{
		`{"nul":"a\u0000b","esc":"\u00e9\ud83d\ude00\/\b\f\n\r\t\"\\"}`,
		`{ "spaced" : [ 1 , 2 ] ,` + "\n\t" + `"z":null }`,
		`{"dup":1,"dup":2,"b":1,"a":2}`,
		`{"big":1e400,"neg0":-0,"long":1.00000000000000000000001,"int":123456789012345678901234567890}`,
		`{"raw":"grüße 👋 日本語","html":"<a href='x'>&amp;</a>"}`,
		`{"deep":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `}`,
		`{"big":"` + strings.Repeat("x", 1<<20) + `"}`,
		`[1,2,3]`,
		"\n  {\"leading\":\"and trailing whitespace\"}  \r\n",
		`"just a string"`,
	}
	w := store.Write{OrgID: org, ReceivedAt: base}
	c := store.CallWrite{Provider: "sip", ProviderCallID: "bodies", Direction: "inbound",
		Block: json.RawMessage(`{}`), BlockAt: base, FirstAt: base, LastAt: base}
	for i, b := range bodies {
		c.Events = append(c.Events, store.EventWrite{ID: newID(), Type: "call_hold",
			DedupeKey: fmt.Sprintf("k%d", i), Sequence: int64(i), OccurredAt: base, OrderAt: base,
			Body: json.RawMessage(b)})
	}
	w.Calls = []store.CallWrite{c}
	if _, err := s.WriteCalls(t.Context(), w); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
	_, events, err := s.GetCall(t.Context(), org, "sip", "bodies")
	if err != nil {
		t.Fatalf("GetCall: %v", err)
	}
	if len(events) != len(bodies) {
		t.Fatalf("got %d events, want %d", len(events), len(bodies))
	}
	for i, e := range events {
		if !bytes.Equal(e.Body, []byte(bodies[i])) {
			got, want := string(e.Body), bodies[i]
			if len(got) > 200 {
				got, want = got[:200]+"...", want[:200]+"..."
			}
			t.Errorf("body %d = %q, want %q", i, got, want)
		}
	}
}

// TestUnreachable opens a store on a port nothing listens on.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s, err := postgres.Open(t.Context(), "postgres://postgres@"+addr+"/test?sslmode=disable&connect_timeout=1",
		postgres.Options{AcquireTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open does not connect, yet it failed: %v", err)
	}
	defer s.Close()
	checks := map[string]error{
		"Ping":    s.Ping(t.Context()),
		"Migrate": s.Migrate(t.Context()),
	}
	_, checks["WriteCalls"] = s.WriteCalls(t.Context(), sampleWrite(newID(), 1, "c"))
	_, checks["GetOrg"] = s.GetOrg(t.Context(), newID())
	checks["CreateOrg"] = s.CreateOrg(t.Context(), store.Org{ID: newID(), Name: "x"})
	for name, err := range checks {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s error = %v, want one wrapping store.ErrUnavailable", name, err)
		}
	}
}

// TestTerminatedBackend kills the store's server processes under it: the next operation fails
// as unavailable, and the one after that works on a new connection.
func TestTerminatedBackend(t *testing.T) {
	app := "callwire_terminate_" + strings.ReplaceAll(newID(), "-", "")
	url := withParam(pgtest.URL(t), "application_name", app)
	s := openStore(t, url, postgres.Options{MaxConns: 1})
	org := createOrg(t, s)
	if _, err := s.WriteCalls(t.Context(), sampleWrite(org, 2, "before")); err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}

	admin, err := pgx.Connect(t.Context(), os.Getenv(pgtest.EnvURL))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(t.Context())
	var killed int
	// OFFSET 0 keeps the filter from being merged with the call, so that only the store's
	// backends are terminated.
	err = admin.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000))
		FROM (SELECT pid FROM pg_stat_activity WHERE application_name = $1 OFFSET 0) AS s`, app).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d backends (%v), want 1", killed, err)
	}

	_, err = s.WriteCalls(t.Context(), sampleWrite(org, 2, "during"))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("WriteCalls on a terminated connection: error = %v, want one wrapping store.ErrUnavailable", err)
	}
	if _, _, err := s.GetCall(t.Context(), org, "sip", "during"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetCall after the failed write: error = %v, want ErrNotFound", err)
	}
	if _, err := s.WriteCalls(t.Context(), sampleWrite(org, 2, "after")); err != nil {
		t.Errorf("WriteCalls on a new connection: %v", err)
	}
}

// TestWriteCallsUnknownOrg writes calls for an organization that does not exist.
func TestWriteCallsUnknownOrg(t *testing.T) {
	s := openStore(t, pgtest.URL(t), postgres.Options{})
	_, err := s.WriteCalls(t.Context(), sampleWrite(newID(), 1, "c"))
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("WriteCalls error = %v, want ErrNotFound", err)
	}
}

// TestWriteCallsDuplicateDedupeKey refuses a CallWrite that names one dedupe key twice.
func TestWriteCallsDuplicateDedupeKey(t *testing.T) {
	s := openStore(t, pgtest.URL(t), postgres.Options{})
	org := createOrg(t, s)
	w := sampleWrite(org, 2, "c")
	w.Calls[0].Events[1].DedupeKey = w.Calls[0].Events[0].DedupeKey
	if _, err := s.WriteCalls(t.Context(), w); err == nil {
		t.Fatal("WriteCalls with a repeated dedupe key succeeded")
	}
	if _, _, err := s.GetCall(t.Context(), org, "sip", "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetCall after the refused write: error = %v, want ErrNotFound", err)
	}
}

// TestWriteCallsRepeatedCall refuses a Write that names one call twice (store.Write), with an
// error that says so, and writes nothing.
func TestWriteCallsRepeatedCall(t *testing.T) {
	s := openStore(t, pgtest.URL(t), postgres.Options{})
	org := createOrg(t, s)
	w := sampleWrite(org, 1, "c", "d")
	w.Calls = append(w.Calls, sampleWrite(org, 1, "c").Calls[0])
	_, err := s.WriteCalls(t.Context(), w)
	if err == nil || !strings.Contains(err.Error(), "appears twice") {
		t.Fatalf("WriteCalls naming a call twice: error = %v, want one saying so", err)
	}
	for _, id := range []string{"c", "d"} {
		if _, _, err := s.GetCall(t.Context(), org, "sip", id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetCall(%s) after the refused write: error = %v, want ErrNotFound", id, err)
		}
	}
}

// TestRefusedForGood connects to a database that does not exist: a configuration error, not
// an outage.
func TestRefusedForGood(t *testing.T) {
	url := pgtest.URL(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	missing := fmt.Sprintf("postgres://%s@%s:%d/no_such_database_%d?sslmode=disable",
		cfg.User, cfg.Host, cfg.Port, time.Now().UnixNano())
	s, err := postgres.Open(t.Context(), missing, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.GetOrg(t.Context(), "x")
	if err == nil || errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetOrg on a missing database: error = %v, want a permanent error", err)
	}
}

// BenchmarkRinging reads what a ring needs to know of calls on file, for one ref (a call's
// call_received) and for batches of three, ten and fifty calls.
func BenchmarkRinging(b *testing.B) {
	s := openStore(b, pgtest.URL(b), postgres.Options{})
	org := newID()
	if err := s.CreateOrg(b.Context(), store.Org{ID: org, Name: "clinic", CreatedAt: base}); err != nil {
		b.Fatal(err)
	}
	var ids []string
	for i := range 50 {
		ids = append(ids, fmt.Sprintf("ring-%d", i))
	}
	w := sampleWrite(org, 3, ids...)
	if _, err := s.WriteCalls(b.Context(), w); err != nil {
		b.Fatal(err)
	}
	var refs []store.EventRef
	for _, c := range w.Calls {
		refs = append(refs, store.EventRef{Provider: c.Provider, ProviderCallID: c.ProviderCallID, DedupeKey: c.Events[0].DedupeKey})
	}
	for _, n := range []int{1, 3, 10, 50} {
		b.Run(fmt.Sprintf("refs=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rs, err := s.Ringing(b.Context(), org, refs[:n], nil)
				if err != nil || len(rs) != n || !rs[0].Known {
					b.Fatalf("%v %+v", err, rs)
				}
			}
		})
	}
}

// TestWriteCutOffWhileWaiting has a batch, big enough for the store to lend the connection a
// write buffer, wait on a call another transaction holds until its deadline closes the
// connection; the next writes, on the one connection the pool then has, store what they are
// given. With -race it also holds the store to leave a closed connection's frontend alone.
func TestWriteCutOffWhileWaiting(t *testing.T) {
	url := pgtest.URL(t)
	s := openStore(t, url, postgres.Options{MaxConns: 1})
	org := createOrg(t, s)
	if _, err := s.WriteCalls(t.Context(), sampleWrite(org, 1, "held")); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(t.Context())
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM calls WHERE provider_call_id = 'held' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	pad := json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 2000)))
	batch := func(ids ...string) store.Write {
		w := sampleWrite(org, 2, ids...)
		for _, c := range w.Calls {
			for j := range c.Events {
				c.Events[j].Body = pad
			}
		}
		return w
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = s.WriteCalls(ctx, batch("cut-1", "held", "cut-2"))
	cancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write cut off by its deadline: error = %v, want ErrUnavailable", err)
	}
	// The deadline's cancel reaches the waiting statement on its own time: let it, so that the
	// cut-off write is not left to finish once the call is released.
	testwait.Until(t, 5*time.Second, "the cut-off statement to stop waiting", func() bool {
		var waiting int
		if err := holder.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`,
			holder.PgConn().PID()).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting == 0
	})
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, w := range []store.Write{batch("after-1", "after-2"), batch("after-3", "after-4"), sampleWrite(org, 3, "after-5")} {
		rs, err := s.WriteCalls(t.Context(), w)
		if err != nil {
			t.Fatalf("a write after the cut: %v", err)
		}
		for i, r := range rs {
			for j, e := range r.Events {
				if e.Duplicate || e.ID != w.Calls[i].Events[j].ID {
					t.Errorf("call %d event %d: %+v, want stored as %s", i, j, e, w.Calls[i].Events[j].ID)
				}
			}
		}
	}
	var n int
	if err := holder.QueryRow(t.Context(), `SELECT count(*) FROM call_events e JOIN calls c ON c.org_id = e.org_id AND c.id = e.call_id
		WHERE c.provider_call_id LIKE 'cut-%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the cut-off write stored %d events (%v), want none", n, err)
	}
}

// BenchmarkWriteCalls writes new calls as the endpoint does: one call of three events (a
// report's tail) and ten calls of five (a batch), each event's body about 400 bytes. Its
// allocations are the store's own per write.
func BenchmarkWriteCalls(b *testing.B) {
	s := openStore(b, pgtest.URL(b), postgres.Options{})
	org := newID()
	if err := s.CreateOrg(b.Context(), store.Org{ID: org, Name: "clinic", CreatedAt: base}); err != nil {
		b.Fatal(err)
	}
	pad := strings.Repeat("x", 360)
	for _, shape := range []struct{ calls, events int }{{1, 3}, {10, 5}} {
		b.Run(fmt.Sprintf("calls=%d,events=%d", shape.calls, shape.events), func(b *testing.B) {
			writes := make([]store.Write, b.N)
			for i := range writes {
				var ids []string
				for j := range shape.calls {
					ids = append(ids, fmt.Sprintf("bench-%s-%d", newID(), j))
				}
				writes[i] = sampleWrite(org, shape.events, ids...)
				for _, c := range writes[i].Calls {
					for j := range c.Events {
						c.Events[j].Body = json.RawMessage(fmt.Sprintf(`{"type":%q,"pad":%q}`, c.Events[j].Type, pad))
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				rs, err := s.WriteCalls(b.Context(), writes[i])
				if err != nil || len(rs) != shape.calls || rs[0].Events[0].Duplicate {
					b.Fatalf("%v %+v", err, rs)
				}
			}
		})
	}
}
