package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

// roundTripConn counts round trips: runs of writes that end when an answer arrives.
type roundTripConn struct {
	net.Conn
	mu      sync.Mutex
	trips   int
	writing bool
}

func (c *roundTripConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if !c.writing {
		c.trips++
		c.writing = true
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// Read ends a round trip when an answer arrives, not when the read begins: pgx may already be
// reading (its background reader, started while a large write blocks) before the write that the
// answer answers, and counting from the read's start would fold two round trips into one.
func (c *roundTripConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.writing = false
		c.mu.Unlock()
	}
	return n, err
}

func (c *roundTripConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trips
}

// openCounting returns a migrated store of one connection whose round trips conn counts.
func openCounting(t *testing.T) (*Store, func() int) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []*roundTripConn
	dialer := &net.Dialer{}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		rc := &roundTripConn{Conn: c}
		mu.Lock()
		conns = append(conns, rc)
		mu.Unlock()
		return rc, nil
	}
	s, err := openConfig(t.Context(), cfg, Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s, func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range conns {
			n += c.count()
		}
		return n
	}
}

// shapedWrite returns a write of org's: calls new calls filed under tag, each with events events
// of type typ.
func shapedWrite(org string, now time.Time, tag string, calls, events int, typ string) store.Write {
	w := store.Write{OrgID: org, ReceivedAt: now}
	for i := range calls {
		c := store.CallWrite{Provider: "sip", ProviderCallID: fmt.Sprintf("%s-c%d", tag, i),
			Direction: "inbound", State: store.StateRinging, Block: json.RawMessage(`{}`),
			BlockAt: now, FirstAt: now, LastAt: now}
		for j := range events {
			c.Events = append(c.Events, store.EventWrite{ID: uuid.NewString(), Type: typ,
				DedupeKey: fmt.Sprintf("%s:%d", typ, j), Sequence: int64(j), OccurredAt: now, OrderAt: now,
				Body: json.RawMessage(`{"type":"` + typ + `"}`)})
		}
		w.Calls = append(w.Calls, c)
	}
	return w
}

// TestWriteCallsOneRoundTrip checks that a Write of many calls and events costs one round trip
// once the connection has prepared the statements, and a Write that finds some of its events
// already on file (a resend) one more, to read their IDs.
func TestWriteCallsOneRoundTrip(t *testing.T) {
	s, trips := openCounting(t)
	org := uuid.NewString()
	if err := s.CreateOrg(t.Context(), store.Org{ID: org, Name: "clinic"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	writes := 0
	write := func(calls, events int) store.Write {
		writes++
		return shapedWrite(org, now, fmt.Sprintf("w%d", writes), calls, events, "call_hold")
	}
	// Warm up: the first Write of each shape on a connection prepares the statements it has not
	// prepared yet, a round trip each. One call with a few events is one statement, its events
	// rows of parameters; with many, two (the upsert, then the events as an array each);
	// several calls one.
	for _, size := range []struct{ calls, events, trips int }{{1, 1, 2}, {1, 50, 3}, {2, 1, 2}} {
		before := trips()
		if _, err := s.WriteCalls(t.Context(), write(size.calls, size.events)); err != nil {
			t.Fatal(err)
		}
		if n := trips() - before; n != size.trips {
			t.Errorf("first WriteCalls of %d calls of %d events on a connection took %d round trips, want %d (prepare, then write)",
				size.calls, size.events, n, size.trips)
		}
	}
	for _, size := range []struct{ calls, events int }{{1, 1}, {1, 50}, {10, 5}, {50, 1}} {
		before := trips()
		if _, err := s.WriteCalls(t.Context(), write(size.calls, size.events)); err != nil {
			t.Fatal(err)
		}
		if n := trips() - before; n != 1 {
			t.Errorf("WriteCalls of %d calls with %d events each took %d round trips, want 1", size.calls, size.events, n)
		}
	}
	// A resend: every event is on file. One more round trip reads their IDs (the first time, one
	// more again prepares that read); the answer names the IDs stored the first time.
	first := write(2, 3)
	stored, err := s.WriteCalls(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{3, 2} {
		resend := first
		for i := range resend.Calls {
			for j := range resend.Calls[i].Events {
				resend.Calls[i].Events[j].ID = uuid.NewString()
			}
		}
		before := trips()
		got, err := s.WriteCalls(t.Context(), resend)
		if err != nil {
			t.Fatal(err)
		}
		if n := trips() - before; n != want {
			t.Errorf("a resend took %d round trips, want %d", n, want)
		}
		for i := range got {
			for j, e := range got[i].Events {
				if !e.Duplicate || e.ID != stored[i].Events[j].ID {
					t.Errorf("resend, call %d event %d: %+v, want a duplicate with ID %s", i, j, e, stored[i].Events[j].ID)
				}
			}
		}
	}
	// A key check rides in the write's first statement: still one round trip.
	check := liveKey(t, s, org)
	w := write(2, 3)
	w.Check = check
	if _, err := s.WriteCalls(t.Context(), w); err != nil { // prepares the guarded upsert
		t.Fatal(err)
	}
	w = write(3, 2)
	w.Check = check
	before := trips()
	if _, err := s.WriteCalls(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	if n := trips() - before; n != 1 {
		t.Errorf("WriteCalls with a key check took %d round trips, want 1", n)
	}
	refs := []store.EventRef{{Provider: "sip", ProviderCallID: "w1-c0", DedupeKey: "call_hold:0"},
		{Provider: "sip", ProviderCallID: "none", DedupeKey: "call_received:0"}}
	if _, err := s.Ringing(t.Context(), org, refs, check); err != nil { // prepares
		t.Fatal(err)
	}
	before = trips()
	if got, err := s.Ringing(t.Context(), org, refs, check); err != nil || !got[0].Known || got[1] != (store.Ringing{}) {
		t.Fatalf("Ringing = %+v, %v", got, err)
	}
	if n := trips() - before; n != 1 {
		t.Errorf("Ringing with a key check took %d round trips, want 1", n)
	}
	before = trips()
	if _, _, err := s.GetCall(t.Context(), org, "sip", "w1-c0"); err != nil {
		t.Fatal(err)
	}
	if n := trips() - before; n > 2 { // one, plus one to prepare on first use
		t.Errorf("GetCall took %d round trips, want at most 2", n)
	}
}

// openWithOrg returns a migrated store opened with opts, in a schema of the test's own, and an
// organization on file.
func openWithOrg(t *testing.T, opts Options) (*Store, string) {
	t.Helper()
	s, err := Open(t.Context(), pgtest.URL(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	org := uuid.NewString()
	if err := s.CreateOrg(t.Context(), store.Org{ID: org, Name: "clinic"}); err != nil {
		t.Fatal(err)
	}
	return s, org
}

// liveKey stores a key of org and returns a check that proves it live.
func liveKey(t *testing.T, s *Store, org string) *store.KeyCheck {
	t.Helper()
	k := store.Key{ClientID: "cw_ci_" + uuid.NewString(), OrgID: org, Scopes: []string{"org.calls.events"},
		SecretHash: []byte(uuid.NewString()), SecretLast8: "abcdefgh", CreatedAt: time.Now().UTC()}
	if err := s.CreateKey(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	return &store.KeyCheck{ClientID: k.ClientID, SecretHash: k.SecretHash, At: time.Now().UTC()}
}

// TestKeyCheckFalseRejects replaces callwire_key_rejected with one that returns false instead of
// raising: with a key on file no more, every guarded read and write must still refuse, and
// write nothing.
func TestKeyCheckFalseRejects(t *testing.T) {
	s, org := openWithOrg(t, Options{})
	check := liveKey(t, s, org)
	check.SecretHash = []byte("not the key's secret")
	if _, err := s.pool.Exec(t.Context(), `CREATE OR REPLACE FUNCTION callwire_key_rejected()
		RETURNS boolean LANGUAGE sql VOLATILE AS 'SELECT false'`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	w := store.Write{OrgID: org, ReceivedAt: now, Check: check, Calls: []store.CallWrite{{
		Provider: "sip", ProviderCallID: "c1", Direction: "inbound", State: store.StateRinging,
		Block: json.RawMessage(`{}`), BlockAt: now, FirstAt: now, LastAt: now,
		Events: []store.EventWrite{{ID: uuid.NewString(), Type: "call_received", DedupeKey: "call_received:0",
			OccurredAt: now, OrderAt: now, Body: json.RawMessage(`{"type":"call_received"}`)}},
	}}}
	if _, err := s.WriteCalls(t.Context(), w); !errors.Is(err, store.ErrKeyRejected) {
		t.Errorf("WriteCalls: %v, want ErrKeyRejected", err)
	}
	if _, _, err := s.GetCall(t.Context(), org, "sip", "c1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the call was written under a rejected key: %v", err)
	}
	for _, refs := range [][]store.EventRef{nil, {{Provider: "sip", ProviderCallID: "c1", DedupeKey: "call_received:0"}}} {
		if _, err := s.Ringing(t.Context(), org, refs, check); !errors.Is(err, store.ErrKeyRejected) {
			t.Errorf("Ringing of %d refs: %v, want ErrKeyRejected", len(refs), err)
		}
	}
}

// TestAcquireTimeout exhausts the pool: the next operation waits the acquire timeout, then
// fails as unavailable.
func TestAcquireTimeout(t *testing.T) {
	s, err := Open(t.Context(), pgtest.URL(t), Options{MaxConns: 1, AcquireTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	held, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = s.Ping(t.Context())
	elapsed := time.Since(start)
	held.Release()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping on an exhausted pool: error = %v, want one wrapping store.ErrUnavailable", err)
	}
	if elapsed < 200*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("Ping gave up after %v, want about 200ms", elapsed)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping once the connection is back: %v", err)
	}

	// A caller's own cancellation is not the store being unavailable.
	held, err = s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Ping(ctx); errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Ping with a cancelled context: error = %v, want context.Canceled only", err)
	}
}

func TestClassify(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		err         error
		unavailable bool
	}{
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&pgconn.PgError{Code: "53300"}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "57P02"}, true},
		{&pgconn.PgError{Code: "57P03"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "08P01"}, true},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "08000"}), true},
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "42P01"}, false},
		{&pgconn.PgError{Code: "22021"}, false},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{&net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, true},
		{errors.New("cannot encode parameter"), false},
	}
	for _, tt := range tests {
		got := classify(ctx, nil, tt.err)
		if errors.Is(got, store.ErrUnavailable) != tt.unavailable {
			t.Errorf("classify(%v) = %v; unavailable = %v, want %v", tt.err, got, !tt.unavailable, tt.unavailable)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("classify(%v) = %v, which no longer wraps the original error", tt.err, got)
		}
	}

	deadline, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if got := classify(deadline, nil, errors.New("timeout")); !errors.Is(got, store.ErrUnavailable) || !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("classify under an expired deadline = %v, want ErrUnavailable and DeadlineExceeded", got)
	}
}
