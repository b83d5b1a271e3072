package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/sdktest"
)

// postAll posts body n times at once, copy i to posters[i%len(posters)], and returns the replies
// in copy order.
func postAll(n int, body string, posters ...*env) []reply {
	replies := make([]reply, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			replies[i] = posters[i%len(posters)].post(body)
		}()
	}
	close(gate)
	wg.Wait()
	return replies
}

func TestConcurrentIdenticalRetries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		body := batch(ev("call_received", "race", 0, ""), ev("call_answered", "race", 1, ""), ev("call_ended", "race", 2, ""))
		const n = 50
		replies := postAll(n, body, e)
		created, status201 := 0, 0
		ids := map[string]bool{}
		for _, r := range replies {
			if r.status != 200 && r.status != 201 {
				t.Fatalf("status %d %s", r.status, r.raw)
			}
			if r.status == 201 {
				status201++
			}
			if r.body.Calls[0].Created {
				created++
			}
			for _, ev := range r.body.Events {
				ids[ev.ID] = true
			}
		}
		if created != 1 || status201 != 1 {
			t.Errorf("created %d times, 201 %d times; want exactly one", created, status201)
		}
		if len(ids) != 3 {
			t.Errorf("%d distinct event ids across replies, want 3", len(ids))
		}
		if _, evs := e.call(e.org, "sip", "race"); len(evs) != 3 {
			t.Errorf("%d events stored, want 3", len(evs))
		}
	})
}

// TestConcurrentIdenticalRetriesRingOnce races copies of one call_received through one replica
// with the in-process broker, and through two replicas sharing a PostgreSQL store and Redis: each
// desk sees one popup, the call is stored once, and one answer says it was created.
func TestConcurrentIdenticalRetriesRingOnce(t *testing.T) {
	const copies = 20
	for _, tc := range []struct {
		name     string
		backend  backend
		redis    bool
		replicas int
	}{
		{"embedded, in-process broker", backends()[0], false, 1},
		{"postgres, in-process broker", backends()[1], false, 1},
		{"postgres, redis, two replicas", backends()[1], true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Popups.Heartbeat = streamHeartbeat
			// Generous, so that a loaded machine cannot turn a copy's publish into a miss.
			cfg.Ingest.PublishTimeout = 5 * time.Second
			if tc.redis {
				cfg.Broker.Redis.URL = popuptest.RedisURL(t)
			}
			db := tc.backend.db(t)
			var replicas []*env
			for i := range tc.replicas {
				// Each replica has a store of its own on the same database, as separate processes do.
				st := openStoreAt(t, db)
				if i == 0 {
					_, e := replica(t, st, cfg, server.Options{}, "", "", "")
					replicas = append(replicas, e)
				} else {
					first := replicas[0]
					_, e := replica(t, st, cfg, server.Options{}, first.org, first.clientID, first.secret)
					replicas = append(replicas, e)
				}
			}
			org := replicas[0].org
			deskID, deskSecret := replicas[0].newKey(org, nil, auth.ScopePopupsRead)
			var desks []*popupStream
			for _, e := range replicas {
				s := e.stream(deskID, deskSecret, "?locations=front")
				s.ready()
				desks = append(desks, s)
			}

			replies := postAll(copies, ev("call_received", "race", 0, `,"locations":["front"]`), replicas...)
			created, status201 := 0, 0
			for i, r := range replies {
				if r.status != http.StatusOK && r.status != http.StatusCreated {
					t.Fatalf("copy %d: status %d %s", i, r.status, r.raw)
				}
				if r.status == http.StatusCreated {
					status201++
				}
				if r.body.Calls[0].Created {
					created++
				}
				if r.body.Calls[0].ID != replies[0].body.Calls[0].ID {
					t.Errorf("copy %d names call %s, copy 0 %s", i, r.body.Calls[0].ID, replies[0].body.Calls[0].ID)
				}
			}
			if created != 1 || status201 != 1 {
				t.Errorf("created %d times, 201 %d times; want exactly one", created, status201)
			}
			call, evs := replicas[0].call(org, "sip", "race")
			if call.ID != replies[0].body.Calls[0].ID || len(evs) != 1 {
				t.Errorf("stored call %s with %d events, want %s with 1", call.ID, len(evs), replies[0].body.Calls[0].ID)
			}

			// The next call rings after the racing copies have all answered: whatever a desk
			// receives before it is everything the copies published.
			last := replicas[len(replicas)-1]
			if r := last.post(ev("call_received", "marker", 0, `,"locations":["front"]`)); r.status != http.StatusCreated {
				t.Fatalf("marker: %d %s", r.status, r.raw)
			}
			for d, desk := range desks {
				rang := 0
				for {
					p := desk.popup()
					if p.ProviderCallID == "marker" {
						break
					}
					rang++
					if p.ProviderCallID != "race" || p.CallID != call.ID || p.ID != ingest.PopupID(org, "sip", "race") {
						t.Errorf("desk %d received %+v", d, p)
					}
				}
				if rang != 1 {
					t.Errorf("desk on replica %d received %d popups for the call, want 1", d, rang)
				}
				// Nor does anything trail in after.
				desk.quiet(2 * streamHeartbeat)
			}
			var published, repeat, late, missed float64
			for _, e := range replicas {
				published += e.metric(`callwire_popups_total{outcome="published"}`)
				repeat += e.metric(`callwire_popups_total{outcome="repeat"}`)
				late += e.metric(`callwire_popups_total{outcome="late"}`)
				missed += e.metric(`callwire_popups_total{outcome="missed"}`)
			}
			// Each other copy found the ringing claimed or on file (or, when the embedded store's
			// two reads straddle another copy's write, the call ringing already: late). None is a
			// missed popup.
			if published != 2 || repeat+late != copies-1 || missed != 0 {
				t.Errorf("popups published %v (with the marker), repeat %v, late %v, missed %v; want 2, %d in all, 0",
					published, repeat, late, missed, copies-1)
			}
		})
	}
}

func TestOppositeOrderBatchesDoNotDeadlock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		const rounds = 40
		var wg sync.WaitGroup
		errs := make(chan string, 2*rounds)
		for w, order := range [][2]string{{"A", "B"}, {"B", "A"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range rounds {
					id := func(c string) string {
						return ",\"providerEventId\":\"w" + strconv.Itoa(w) + "-" + c + "-" + strconv.Itoa(i) + "\""
					}
					r := e.post(batch(ev("call_hold", "dl-"+order[0], i, id(order[0])), ev("call_hold", "dl-"+order[1], i, id(order[1]))))
					if r.status != 200 && r.status != 201 {
						errs <- strconv.Itoa(r.status) + " " + string(r.raw)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for msg := range errs {
			t.Error(msg)
		}
		for _, c := range []string{"A", "B"} {
			if _, evs := e.call(e.org, "sip", "dl-"+c); len(evs) != 2*rounds {
				t.Errorf("call %s has %d events, want %d", c, len(evs), 2*rounds)
			}
		}
	})
}

func viaProxy(t *testing.T, raw string) (string, *sdktest.Proxy) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Skipf("database URL %q is not a URL with a host; cannot put a proxy in front of it", raw)
	}
	p := sdktest.NewProxy(t, u.Host)
	return p.URL(raw), p
}

func expect503(t *testing.T, r reply, what string) {
	t.Helper()
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("%s: status %d %s, want 503", what, r.status, r.raw)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("%s: Retry-After %q", what, r.header.Get("Retry-After"))
	}
}

func TestDatabaseDownAnswers503(t *testing.T) {
	dbURL, p := viaProxy(t, pgtest.URL(t))
	db := config.Defaults().Database
	db.URL = dbURL
	db.AcquireTimeout = 500 * time.Millisecond
	e := start(t, db)
	if r := e.post(ev("call_received", "down-0", 0, "")); r.status != 201 {
		t.Fatalf("before the outage: %d %s", r.status, r.raw)
	}
	p.Cut()
	for i, body := range []string{ev("call_received", "down-1", 0, ""), ev("call_ended", "down-2", 3, "")} {
		start := time.Now()
		expect503(t, e.post(body), "database down "+strconv.Itoa(i))
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("503 took %v", d)
		}
	}
	if r := e.do("GET", "/readyz", ""); r.status != 503 {
		t.Errorf("readyz while down: %d", r.status)
	}
	p.Restore()
	testwait.NoError(t, 10*time.Second, func() error {
		if r := e.post(ev("call_ended", "down-2", 3, "")); r.status != 201 {
			return fmt.Errorf("after the outage: %d %s", r.status, r.raw)
		}
		return nil
	})
	e.absent(e.org, "sip", "down-1")
}

// callsLock is an exclusive lock on the calls table, held by a connection of its own.
type callsLock struct {
	t       *testing.T
	dbURL   string
	pid     uint32
	release func()
}

// lockCalls holds an exclusive lock on the calls table until release is called (at the latest
// when the test ends).
func lockCalls(t *testing.T, dbURL string) *callsLock {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "LOCK TABLE calls IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	l := &callsLock{t: t, dbURL: dbURL, pid: conn.PgConn().PID(), release: func() {
		once.Do(func() {
			tx.Rollback(context.WithoutCancel(t.Context()))
			conn.Close(context.WithoutCancel(t.Context()))
		})
	}}
	t.Cleanup(l.release)
	return l
}

// awaitWaiter returns once some session waits on the lock, and fails the test after 10s.
func (l *callsLock) awaitWaiter() {
	l.t.Helper()
	conn, err := pgx.Connect(l.t.Context(), l.dbURL)
	if err != nil {
		l.t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(l.t.Context()))
	testwait.Until(l.t, 10*time.Second, "a session to wait on the calls lock", func() bool {
		var n int
		if err := conn.QueryRow(l.t.Context(),
			`SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, int(l.pid)).Scan(&n); err != nil {
			l.t.Fatal(err)
		}
		return n > 0
	})
}

func TestStoreTooSlowAnswers503AndWritesNothing(t *testing.T) {
	dbURL := pgtest.URL(t)
	db := config.Defaults().Database
	db.URL = dbURL
	e := start(t, db, func(c *config.Config, _ *server.Options) { c.Ingest.WriteTimeout = 300 * time.Millisecond })
	lock := lockCalls(t, dbURL)
	body := batch(ev("call_ended", "slow", 2, ""), ev("call_recorded", "slow", 3, `,"url":"https://x.example/s.wav"`))
	expect503(t, e.post(body), "store too slow")
	lock.release()
	e.absent(e.org, "sip", "slow")
	// The client resends, as a 503 asks it to. On a machine that pauses the process, the resend
	// itself can miss the 300 ms write timeout and get 503 again: the client resends again.
	r := e.post(body)
	for try := 1; r.status == http.StatusServiceUnavailable && try < 10; try++ {
		e.absent(e.org, "sip", "slow")
		r = e.post(body)
	}
	if r.status != 201 || r.body.Events[0].Duplicate {
		t.Fatalf("resend after 503: %d %s", r.status, r.raw)
	}
	if _, evs := e.call(e.org, "sip", "slow"); len(evs) != 2 {
		t.Errorf("%d events after resend", len(evs))
	}
}

func TestPoolExhaustedAnswers503(t *testing.T) {
	dbURL := pgtest.URL(t)
	db := config.Defaults().Database
	db.URL = dbURL
	db.MaxConns = 1
	db.AcquireTimeout = 200 * time.Millisecond
	e := start(t, db, func(c *config.Config, _ *server.Options) { c.Ingest.WriteTimeout = 3 * time.Second })
	lock := lockCalls(t, dbURL)
	// The first request takes the only connection and waits on the lock.
	first := make(chan reply, 1)
	go func() { first <- e.post(ev("call_ended", "pool-1", 1, "")) }()
	lock.awaitWaiter()
	expect503(t, e.post(ev("call_ended", "pool-2", 1, "")), "pool exhausted")
	lock.release()
	if r := <-first; r.status != 201 {
		t.Errorf("the waiting request: %d %s", r.status, r.raw)
	}
	e.absent(e.org, "sip", "pool-2")
}
