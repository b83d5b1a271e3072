// Package storetest is the contract suite every store.Store implementation runs. An
// implementation's own test calls Run with a factory that hands out a fresh, empty, migrated store:
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s := openTestStore(t) // registers its own cleanup with t.Cleanup
//			return s
//		})
//	}
//
// The suite asserts only what store.go documents. Times it writes are whole microseconds, so a
// store with microsecond resolution passes; JSON other than event bodies (call blocks, client
// matches) is compared by value, not by bytes.
package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/callwire/callwire/core/store"
)

// Run runs the whole contract suite against the store implementation that open produces. Each
// subtest calls open once; open must return a fresh, empty, migrated store and register its own
// cleanup (closing the store, removing its data) with t.Cleanup. The suite never calls Close.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	groups := []struct {
		name  string
		tests []contractTest
	}{
		{"Orgs", orgTests()},
		{"OrgLookup", lookupTests()},
		{"OrgRegion", regionTests()},
		{"Retention", retentionTests()},
		{"Keys", keyTests()},
		{"Calls", callTests()},
		{"Summary", summaryTests()},
		{"History", historyTests()},
		{"Events", eventTests()},
		{"Isolation", isolationTests()},
		{"Atomicity", atomicityTests()},
		{"Concurrency", concurrencyTests()},
		{"KeyCheck", keyCheckTests()},
		{"Ringing", ringingTests()},
		{"RingingCalls", ringingCallsTests()},
		{"Callbacks", callbackTests()},
		{"CallbacksRecompute", callbackRecomputeTests()},
		{"CallbacksRace", callbackRaceTests()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					s := open(t)
					if s == nil {
						t.Fatal("open returned a nil store")
					}
					tc.run(t, s)
				})
			}
		})
	}
}

// contractTest is one subtest of the suite; it gets a fresh store.
type contractTest struct {
	name string
	run  func(t *testing.T, s store.Store)
}

// at returns the suite's reference instant shifted by d seconds. The instant carries microseconds
// so that a store which truncates to seconds fails, and no nanoseconds so that a store with
// microsecond resolution passes.
func at(d int) time.Time {
	return time.Date(2025, time.March, 14, 9, 26, 53, 589793000, time.UTC).Add(time.Duration(d) * time.Second)
}

// newID returns a fresh opaque identifier.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// newOrg creates an organization with a fresh ID and returns that ID.
func newOrg(t *testing.T, s store.Store) string {
	t.Helper()
	id := newID()
	if err := s.CreateOrg(t.Context(), store.Org{ID: id, Name: "Clinic " + id, CreatedAt: at(0)}); err != nil {
		t.Fatalf("CreateOrg: %v", err)
	}
	return id
}

// ev builds an event of the given type and sequence, ordered at instant when, with a dedupe key of
// "<type>:<sequence>" and a fresh ID.
func ev(typ string, seq int64, when time.Time) store.EventWrite {
	body := fmt.Sprintf(`{"type":%q,"sequence":%d,"occurredAt":%q}`, typ, seq, when.Format(time.RFC3339Nano))
	return store.EventWrite{
		ID:         newID(),
		Type:       typ,
		DedupeKey:  fmt.Sprintf("%s:%d", typ, seq),
		Sequence:   seq,
		OccurredAt: when,
		OrderAt:    when,
		Body:       json.RawMessage(body),
	}
}

// cw builds a call write for the given call from its events: state st, block position at the
// last event, FirstAt and LastAt spanning the events' OrderAt.
func cw(provider, providerCallID string, st store.State, events ...store.EventWrite) store.CallWrite {
	c := store.CallWrite{
		Provider:       provider,
		ProviderCallID: providerCallID,
		Direction:      "inbound",
		State:          st,
		Events:         events,
	}
	for i, e := range events {
		if i == 0 || e.OrderAt.Before(c.FirstAt) {
			c.FirstAt = e.OrderAt
		}
		if i == 0 || e.OrderAt.After(c.LastAt) {
			c.LastAt = e.OrderAt
		}
	}
	if n := len(events); n > 0 {
		last := events[n-1]
		c.BlockSequence = last.Sequence
		c.BlockAt = last.OrderAt
		c.Block = json.RawMessage(fmt.Sprintf(`{"direction":"inbound","from":{"kind":"e164","number":"+15550100%03d"}}`, last.Sequence%1000))
	}
	return c
}

// callID is the ID of the call c writes under org.
func callID(org string, c store.CallWrite) string {
	return store.CallID(org, c.Provider, c.ProviderCallID)
}

// refresh returns a copy of w with fresh event IDs, as a retry of the same request would carry.
func refresh(w store.Write) store.Write {
	out := w
	out.Calls = make([]store.CallWrite, len(w.Calls))
	for i, c := range w.Calls {
		evs := make([]store.EventWrite, len(c.Events))
		for j, e := range c.Events {
			e.ID = newID()
			evs[j] = e
		}
		c.Events = evs
		out.Calls[i] = c
	}
	return out
}

// write applies w and fails the test on error.
func write(t *testing.T, s store.Store, w store.Write) []store.CallResult {
	t.Helper()
	res, err := s.WriteCalls(t.Context(), w)
	if err != nil {
		t.Fatalf("WriteCalls: %v", err)
	}
	if len(res) != len(w.Calls) {
		t.Fatalf("WriteCalls returned %d results for %d calls", len(res), len(w.Calls))
	}
	for i := range res {
		if len(res[i].Events) != len(w.Calls[i].Events) {
			t.Fatalf("WriteCalls result %d has %d events, want %d", i, len(res[i].Events), len(w.Calls[i].Events))
		}
	}
	return res
}

// getCall reads a call and fails the test on error.
func getCall(t *testing.T, s store.Store, orgID, provider, providerCallID string) (store.Call, []store.Event) {
	t.Helper()
	c, evs, err := s.GetCall(t.Context(), orgID, provider, providerCallID)
	if err != nil {
		t.Fatalf("GetCall(%q, %q): %v", provider, providerCallID, err)
	}
	return c, evs
}

// wantNoCall asserts that the call is not on file.
func wantNoCall(t *testing.T, s store.Store, orgID, provider, providerCallID string) {
	t.Helper()
	_, _, err := s.GetCall(t.Context(), orgID, provider, providerCallID)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetCall(%q, %q) error = %v, want ErrNotFound", provider, providerCallID, err)
	}
}

// wantErr asserts that err matches target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s error = %v, want %v", what, err, target)
	}
}

// sameTime asserts that got and want are the same instant.
func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %s, want %s", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
	}
}

// sameTimePtr asserts that got and want are both nil or the same instant.
func sameTimePtr(t *testing.T, what string, got, want *time.Time) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", what, got, want)
	default:
		sameTime(t, what, *got, *want)
	}
}

// sameJSON asserts that got and want hold the same JSON value; an empty want means "nothing
// stored" and accepts only an empty got.
func sameJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	if len(want) == 0 {
		if len(got) != 0 {
			t.Errorf("%s = %s, want nothing", what, got)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s = %q: not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: bad expectation %q: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// checkCall asserts that the stored call c reflects everything in want, as created by one write.
func checkCall(t *testing.T, c store.Call, orgID string, want store.CallWrite) {
	t.Helper()
	if c.ID == "" {
		t.Error("call ID is empty")
	}
	if c.OrgID != orgID {
		t.Errorf("OrgID = %q, want %q", c.OrgID, orgID)
	}
	if c.Provider != want.Provider || c.ProviderCallID != want.ProviderCallID {
		t.Errorf("call key = (%q, %q), want (%q, %q)", c.Provider, c.ProviderCallID, want.Provider, want.ProviderCallID)
	}
	if c.Direction != want.Direction {
		t.Errorf("Direction = %q, want %q", c.Direction, want.Direction)
	}
	if c.State != want.State {
		t.Errorf("State = %v, want %v", c.State, want.State)
	}
	sameJSON(t, "Block", c.Block, want.Block)
	if c.BlockSequence != want.BlockSequence {
		t.Errorf("BlockSequence = %d, want %d", c.BlockSequence, want.BlockSequence)
	}
	sameTime(t, "BlockAt", c.BlockAt, want.BlockAt)
	sameTime(t, "FirstAt", c.FirstAt, want.FirstAt)
	sameTime(t, "LastAt", c.LastAt, want.LastAt)
	sameJSON(t, "Clients", c.Clients, want.Clients)
	if c.CreatedAt.IsZero() || c.UpdatedAt.IsZero() {
		t.Errorf("CreatedAt = %v, UpdatedAt = %v; want both set", c.CreatedAt, c.UpdatedAt)
	}
}

// checkEvent asserts that the stored event e is want, stored by a write received at receivedAt.
func checkEvent(t *testing.T, e store.Event, callID string, want store.EventWrite, receivedAt time.Time) {
	t.Helper()
	if e.ID != want.ID {
		t.Errorf("event ID = %q, want %q", e.ID, want.ID)
	}
	if e.CallID != callID {
		t.Errorf("event %s CallID = %q, want %q", want.DedupeKey, e.CallID, callID)
	}
	if e.Type != want.Type || e.DedupeKey != want.DedupeKey || e.Sequence != want.Sequence || e.ProviderEventID != want.ProviderEventID {
		t.Errorf("event = (%q, %q, %d, %q), want (%q, %q, %d, %q)",
			e.Type, e.DedupeKey, e.Sequence, e.ProviderEventID,
			want.Type, want.DedupeKey, want.Sequence, want.ProviderEventID)
	}
	sameTime(t, "event "+want.DedupeKey+" OccurredAt", e.OccurredAt, want.OccurredAt)
	sameTime(t, "event "+want.DedupeKey+" OrderAt", e.OrderAt, want.OrderAt)
	sameTime(t, "event "+want.DedupeKey+" ReceivedAt", e.ReceivedAt, receivedAt)
	if !bytes.Equal(e.Body, want.Body) {
		t.Errorf("event %s Body = %q, want %q", want.DedupeKey, e.Body, want.Body)
	}
}

// eventIDs returns the IDs of evs in order.
func eventIDs(evs []store.Event) []string {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

// resultIDs returns the event IDs of r in order.
func resultIDs(r store.CallResult) []string {
	ids := make([]string, len(r.Events))
	for i, e := range r.Events {
		ids[i] = e.ID
	}
	return ids
}
