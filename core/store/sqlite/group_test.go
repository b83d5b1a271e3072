package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/internal/writeq"
	"github.com/callwire/callwire/internal/testwait"
)

// groupWrite is a write of one call with one event, for the organization org.
func groupWrite(org, id string) store.Write {
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	return store.Write{OrgID: org, ReceivedAt: at, Calls: []store.CallWrite{{
		Provider: "sip", ProviderCallID: id, Direction: "inbound", State: store.StateRinging,
		Block: json.RawMessage(`{"direction":"inbound"}`), BlockSequence: 1, BlockAt: at, FirstAt: at, LastAt: at,
		Events: []store.EventWrite{{ID: "event-" + id, Type: "call_received", DedupeKey: "seq:1:call_received",
			Sequence: 1, OccurredAt: at, OrderAt: at, Body: json.RawMessage(`{"type":"call_received"}`)}},
	}}}
}

func openGroupStore(t *testing.T) *Store {
	t.Helper()
	return openGroupStoreAt(t, filepath.Join(t.TempDir(), "callwire.db"))
}

// openGroupStoreAt opens and migrates a store at path, with the organization "org".
func openGroupStoreAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateOrg(t.Context(), store.Org{ID: "org", Name: "Clinic", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return s
}

// holdWriteLock takes the write lock of the SQLite file at path on a connection of its own, as
// another process would, and returns what gives it up; it is given up when t ends at the latest.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		db.Close()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(context.WithoutCancel(t.Context()), "ROLLBACK"); err != nil {
				t.Errorf("give up the write lock: %v", err)
			}
			conn.Close()
			db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// queued waits until n writes wait in s's queue.
func queued(t *testing.T, s *Store, n int) {
	t.Helper()
	testwait.NoError(t, 10*time.Second, func() error {
		if got := s.queue.Len(); got != n {
			return fmt.Errorf("%d writes queued, want %d", got, n)
		}
		return nil
	})
}

// TestGroupKeepsEachWriteAtomic: writes that waited together are committed in one group, and one
// that fails (its organization does not exist, its key does not pass) fails alone and leaves
// nothing, while the others in the group are stored.
func TestGroupKeepsEachWriteAtomic(t *testing.T) {
	s := openGroupStore(t)
	s.gate <- struct{}{} // hold the writer, so that every write queues
	writes := []store.Write{
		groupWrite("org", "a"),
		groupWrite("no-such-org", "b"),
		groupWrite("org", "c"),
		groupWrite("org", "d"),
	}
	bad := groupWrite("org", "e")
	bad.Check = &store.KeyCheck{ClientID: "nobody", SecretHash: []byte("x"), At: time.Now()}
	writes = append(writes, bad)

	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() { _, errs[i] = s.WriteCalls(t.Context(), w) })
		queued(t, s, i+1) // in this order
	}
	s.release()
	wg.Wait()

	for i, want := range []error{nil, store.ErrNotFound, nil, nil, store.ErrKeyRejected} {
		if want == nil && errs[i] != nil || want != nil && !errors.Is(errs[i], want) {
			t.Errorf("write %d: error %v, want %v", i, errs[i], want)
		}
	}
	for _, id := range []string{"a", "c", "d"} {
		if _, evs, err := s.GetCall(t.Context(), "org", "sip", id); err != nil || len(evs) != 1 {
			t.Errorf("call %s: %d events, error %v; want stored", id, len(evs), err)
		}
	}
	for _, c := range []struct{ org, id string }{{"no-such-org", "b"}, {"org", "e"}} {
		if _, _, err := s.GetCall(t.Context(), c.org, "sip", c.id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("call %s of a failed write: error %v, want ErrNotFound", c.id, err)
		}
	}
}

// TestGroupWithdrawsAWriteWhoseContextEnds: a write still waiting when its context ends is not
// written, and fails with ErrUnavailable; the others wait on.
func TestGroupWithdrawsAWriteWhoseContextEnds(t *testing.T) {
	s := openGroupStore(t)
	s.gate <- struct{}{}
	ctx, cancel := context.WithCancel(t.Context())
	var gone, kept error
	var wg sync.WaitGroup
	wg.Go(func() { _, gone = s.WriteCalls(ctx, groupWrite("org", "gone")) })
	queued(t, s, 1)
	wg.Go(func() { _, kept = s.WriteCalls(t.Context(), groupWrite("org", "kept")) })
	queued(t, s, 2)
	cancel()
	queued(t, s, 1)
	s.release()
	wg.Wait()
	if !errors.Is(gone, store.ErrUnavailable) {
		t.Errorf("cancelled write: error %v, want ErrUnavailable", gone)
	}
	if kept != nil {
		t.Errorf("other write: %v", kept)
	}
	if _, _, err := s.GetCall(t.Context(), "org", "sip", "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancelled write stored (error %v)", err)
	}
}

// TestGroupWritesEveryWriteOnce: a queue longer than one group is written in several groups,
// every write once.
func TestGroupWritesEveryWriteOnce(t *testing.T) {
	s := openGroupStore(t)
	s.gate <- struct{}{}
	n := maxGroupWrites*2 + 3
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = s.WriteCalls(t.Context(), groupWrite("org", fmt.Sprint("call-", i))) })
	}
	queued(t, s, n)
	s.release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	var calls, events int
	if err := s.reader.QueryRowContext(t.Context(), `SELECT (SELECT count(*) FROM calls), (SELECT count(*) FROM call_events)`).
		Scan(&calls, &events); err != nil {
		t.Fatal(err)
	}
	if calls != n || events != n {
		t.Errorf("%d calls and %d events stored, want %d of each", calls, events, n)
	}
}

// TestGroupBounds: a group takes at most maxGroupWrites writes and, past its first write, at most
// maxGroupEvents events.
func TestGroupBounds(t *testing.T) {
	var q writeq.Queue
	for i := range maxGroupWrites + 5 {
		q.Push(writeq.NewJob(t.Context(), groupWrite("org", fmt.Sprint(i))))
	}
	if got := len(takeGroup(&q)); got != maxGroupWrites {
		t.Errorf("first group: %d writes, want %d", got, maxGroupWrites)
	}
	if got := len(takeGroup(&q)); got != 5 {
		t.Errorf("second group: %d writes, want 5", got)
	}
	big := groupWrite("org", "big")
	for len(big.Calls[0].Events) < maxGroupEvents {
		big.Calls[0].Events = append(big.Calls[0].Events, big.Calls[0].Events[0])
	}
	q.Push(writeq.NewJob(t.Context(), groupWrite("org", "small")))
	q.Push(writeq.NewJob(t.Context(), big))
	q.Push(writeq.NewJob(t.Context(), groupWrite("org", "after")))
	for i, want := range []int{1, 1, 1} {
		if got := len(takeGroup(&q)); got != want {
			t.Errorf("group %d: %d writes, want %d", i, got, want)
		}
	}
	if got := takeGroup(&q); len(got) != 0 {
		t.Errorf("empty queue gave %d writes", len(got))
	}
}

// TestGroupPutsBackWritesWhenTheFirstGivesUp: when the file's write lock is held elsewhere and
// the group's first write gives up waiting for it, that write fails alone; the others wait for
// the next group and are written once the lock is free.
func TestGroupPutsBackWritesWhenTheFirstGivesUp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "callwire.db")
	s := openGroupStoreAt(t, path)
	release := holdWriteLock(t, path)

	s.gate <- struct{}{}
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var first, second error
	firstDone := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(firstDone)
		_, first = s.WriteCalls(short, groupWrite("org", "first"))
	})
	queued(t, s, 1)
	wg.Go(func() { _, second = s.WriteCalls(t.Context(), groupWrite("org", "second")) })
	queued(t, s, 2)
	s.release()
	select { // the first gives up waiting for the lock; the second is put back and waits
	case <-firstDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the first write did not give up")
	}
	release()
	wg.Wait()
	if !errors.Is(first, store.ErrUnavailable) {
		t.Errorf("first write: error %v, want ErrUnavailable", first)
	}
	if second != nil {
		t.Errorf("second write: %v", second)
	}
	if _, evs, err := s.GetCall(t.Context(), "org", "sip", "second"); err != nil || len(evs) != 1 {
		t.Errorf("second call: %d events, error %v; want stored", len(evs), err)
	}
	if _, _, err := s.GetCall(t.Context(), "org", "sip", "first"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("first call stored (error %v)", err)
	}
}

// TestWriteManyCalls: a write of many calls, some on file and some new, more than one run of
// each, gives every call its result (the stored ID, Created only for the new) and stores each
// event once.
func TestWriteManyCalls(t *testing.T) {
	s := openGroupStore(t)
	many := func(from, to int) store.Write {
		w := groupWrite("org", "x")
		w.Calls = nil
		for i := from; i < to; i++ {
			c := groupWrite("org", fmt.Sprint("many-", i)).Calls[0]
			c.Events[0].ID = fmt.Sprint("event-", i, "-", from)
			w.Calls = append(w.Calls, c)
		}
		return w
	}
	if _, err := s.WriteCalls(t.Context(), many(0, 67)); err != nil {
		t.Fatal(err)
	}
	res, err := s.WriteCalls(t.Context(), many(30, 160))
	if err != nil {
		t.Fatal(err)
	}
	for n, r := range res {
		i := 30 + n
		if want := i >= 67; r.Created != want || r.ID != store.CallID("org", "sip", fmt.Sprint("many-", i)) {
			t.Errorf("call %d: created %v, id %q; want created %v", i, r.Created, r.ID, want)
		}
		if dup := i < 67; r.Events[0].Duplicate != dup {
			t.Errorf("call %d: event duplicate %v, want %v", i, r.Events[0].Duplicate, dup)
		}
	}
	var calls, events int
	if err := s.reader.QueryRowContext(t.Context(), `SELECT (SELECT count(*) FROM calls), (SELECT count(*) FROM call_events)`).
		Scan(&calls, &events); err != nil {
		t.Fatal(err)
	}
	if calls != 160 || events != 160 {
		t.Errorf("%d calls and %d events stored, want 160 of each", calls, events)
	}
}
