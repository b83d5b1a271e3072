package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/callwire/callwire/core/lookup"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/popup/popuptest"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/metrictest"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
)

var t0 = time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)

func parse(t *testing.T, body string) []event.Parsed {
	t.Helper()
	ps, _, err := event.ParseBody([]byte(body))
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	return ps
}

func ev(typ, callID string, seq int, at time.Time, extra string) string {
	return fmt.Sprintf(`{"type":%q,"providerCallId":%q,"sequence":%d,"occurredAt":%q,"call":{"direction":"inbound","from":{"number":"+15551230000"}}%s}`,
		typ, callID, seq, at.Format(time.RFC3339Nano), extra)
}

func batch(evs ...string) string { return `{"events":[` + strings.Join(evs, ",") + `]}` }

func TestPlan(t *testing.T) {
	ids := 0
	newID := func() string { ids++; return fmt.Sprintf("e%d", ids) }
	tests := []struct {
		name      string
		body      string
		wantCalls int
		check     func(t *testing.T, calls []*plannedCall)
	}{
		{"groups by call in first-seen order", batch(ev("call_ended", "b", 3, t0, ""), ev("call_received", "a", 1, t0, ""), ev("call_answered", "b", 2, t0, "")), 2,
			func(t *testing.T, calls []*plannedCall) {
				if calls[0].write.ProviderCallID != "b" || calls[1].write.ProviderCallID != "a" {
					t.Errorf("order %q %q", calls[0].write.ProviderCallID, calls[1].write.ProviderCallID)
				}
				if got := calls[0].write.Events[0].Type; got != "call_answered" {
					t.Errorf("first event of b after sort = %s, want call_answered (sequence 2 before 3)", got)
				}
				if calls[0].write.State != store.StateEnded || calls[1].write.State != store.StateRinging {
					t.Errorf("states %v %v", calls[0].write.State, calls[1].write.State)
				}
			}},
		{"sequence before clock", batch(ev("call_answered", "a", 1, t0.Add(-2*time.Minute), ""), ev("call_received", "a", 0, t0.Add(-time.Minute), "")), 1,
			func(t *testing.T, calls []*plannedCall) {
				if calls[0].write.Events[0].Type != "call_received" {
					t.Errorf("sequence 0 must sort first")
				}
				if !calls[0].write.FirstAt.Equal(t0.Add(-2*time.Minute)) || !calls[0].write.LastAt.Equal(t0.Add(-time.Minute)) {
					t.Errorf("first/last %v %v", calls[0].write.FirstAt, calls[0].write.LastAt)
				}
			}},
		{"clock breaks sequence ties", batch(ev("call_hold", "a", 0, t0.Add(time.Second), `,"providerEventId":"h2"`), ev("call_hold", "a", 0, t0, `,"providerEventId":"h1"`)), 1,
			func(t *testing.T, calls []*plannedCall) {
				if calls[0].write.Events[0].DedupeKey != "h1" {
					t.Errorf("earlier clock must sort first, got %s", calls[0].write.Events[0].DedupeKey)
				}
				if calls[0].write.State != store.StateUnknown {
					t.Errorf("hold alone must leave the state unknown, got %v", calls[0].write.State)
				}
			}},
		{"future clamped for ordering, body kept", batch(ev("call_received", "a", 0, t0.Add(time.Hour), ""), ev("call_answered", "a", 0, t0, "")), 1,
			func(t *testing.T, calls []*plannedCall) {
				w := calls[0].write
				if w.Events[0].Type != "call_answered" {
					// clamped to now (t0+1s), so call_answered at t0 sorts first
					t.Errorf("clamped event sorted wrong: %s first", w.Events[0].Type)
				}
				rec := w.Events[1]
				if !rec.OrderAt.Equal(t0.Add(time.Second)) || !rec.OccurredAt.Equal(t0.Add(time.Hour)) {
					t.Errorf("order %v occurred %v", rec.OrderAt, rec.OccurredAt)
				}
				if !strings.Contains(string(rec.Body), t0.Add(time.Hour).Format(time.RFC3339)) {
					t.Errorf("body lost the reporter's stamp: %s", rec.Body)
				}
			}},
		{"dedupe within request", batch(ev("call_hold", "a", 0, t0, ""), ev("call_hold", "a", 0, t0, `,"released":true`)), 1,
			func(t *testing.T, calls []*plannedCall) {
				if n := len(calls[0].write.Events); n != 1 {
					t.Fatalf("want 1 unique event, got %d", n)
				}
				if calls[0].slots[1] != 0 {
					t.Errorf("second maps to slot %d", calls[0].slots[1])
				}
			}},
		{"provider separates calls", batch(ev("call_received", "a", 0, t0, ""), ev("call_received", "a", 0, t0, `,"provider":"twilio"`)), 2, nil},
		{"latest event's block wins", batch(
			`{"type":"call_answered","providerCallId":"a","sequence":2,"occurredAt":"2026-03-01T09:30:00Z","call":{"direction":"inbound","trunk":"late"}}`,
			`{"type":"call_received","providerCallId":"a","sequence":1,"occurredAt":"2026-03-01T09:30:00Z","call":{"direction":"outbound","trunk":"early"}}`), 1,
			func(t *testing.T, calls []*plannedCall) {
				w := calls[0].write
				if !strings.Contains(string(w.Block), "late") || w.Direction != "inbound" || w.BlockSequence != 2 {
					t.Errorf("block %s dir %s seq %d", w.Block, w.Direction, w.BlockSequence)
				}
				if calls[0].received != 1 {
					t.Errorf("received index %d", calls[0].received)
				}
			}},
		{"state never needs order: missed then received", batch(ev("call_missed", "a", 2, t0, ""), ev("call_received", "a", 1, t0, "")), 1,
			func(t *testing.T, calls []*plannedCall) {
				if calls[0].write.State != store.StateEnded {
					t.Errorf("state %v", calls[0].write.State)
				}
			}},
	}
	// Each case is planned in fresh memory, and then again in memory every case before it used
	// (as a Service reuses it): both plans must be alike.
	used := new(planMemory)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := parse(t, tt.body)
			start := ids
			calls := plan(events, t0.Add(time.Second), newID, new(planMemory))
			ids = start
			again := plan(events, t0.Add(time.Second), newID, used)
			if !reflect.DeepEqual(again, calls) {
				t.Errorf("planned in reused memory:\n%+v\nin fresh memory:\n%+v", again, calls)
			}
			if len(calls) != tt.wantCalls {
				t.Fatalf("calls = %d, want %d", len(calls), tt.wantCalls)
			}
			for _, c := range calls {
				for j, ew := range c.write.Events {
					if want := events[c.unique[j]].Event.DedupeKey(); ew.DedupeKey != want {
						t.Errorf("event %d's dedupe key %q, want %q", j, ew.DedupeKey, want)
					}
				}
			}
			if tt.check != nil {
				tt.check(t, calls)
			}
			used.forget()
		})
	}
}

// TestDedupeKeys holds the keys plan cuts from one string to be the events' own.
func TestDedupeKeys(t *testing.T) {
	events := []event.Parsed{
		{Event: event.Event{Type: event.CallReceived}},
		{Event: event.Event{Type: event.CallHold, Sequence: -12}},
		{Event: event.Event{Type: event.CallHold, Sequence: 3, ProviderEventID: "evt-42"}},
		{Event: event.Event{Type: event.CallEnded, Sequence: math.MaxInt64}},
		{Event: event.Event{Type: event.Type(strings.Repeat("t", 70)), Sequence: 7}},
	}
	got := dedupeKeys(nil, events)
	for i := range events {
		if want := events[i].Event.DedupeKey(); got[i] != want {
			t.Errorf("event %d: key %q, want %q", i, got[i], want)
		}
	}
	if len(dedupeKeys(nil, nil)) != 0 {
		t.Error("keys for no events")
	}
}

// TestPopupIDStable pins the derived popup id: popups in flight carry it, so a release must
// derive the same ones as the releases before it (store.TestCallIDStable pins the call id).
func TestPopupIDStable(t *testing.T) {
	const org, provider, pcid = "clinic-1", "sip", "a84b4c76e66710@pc33.example.com"
	if got, want := PopupID(org, provider, pcid), "88b31308e964ed22823b01cd6997d18c"; got != want {
		t.Errorf("PopupID = %s, want %s", got, want)
	}
}

// recorder notes the order of lookups, publishes and writes.
type recorder struct {
	mu     sync.Mutex
	steps  []string
	known  map[string]bool
	calls  map[string]json.RawMessage // callID -> stored clients
	states map[string]store.State     // callID -> stored state
	events map[string]string          // callID/dedupe -> id

	lookupErr  error
	lookupWait time.Duration
	publishErr error
	writeErr   error
	popups     []popup.Popup
	// deadlines notes, for each lookup and publish in turn, whether its context had a deadline.
	deadlines []string

	// holdWrites, when not nil, holds every write until it is closed; writers counts the
	// writes waiting or done.
	holdWrites chan struct{}
	writers    int
}

// waitWriters waits until n writes have reached the store.
func (r *recorder) waitWriters(t *testing.T, n int) {
	t.Helper()
	testwait.Until(t, 10*time.Second, fmt.Sprintf("%d writes to reach the store", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.writers >= n
	})
}

func newRecorder() *recorder {
	return &recorder{known: map[string]bool{}, calls: map[string]json.RawMessage{}, states: map[string]store.State{}, events: map[string]string{}}
}

func (r *recorder) step(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
}

// noteDeadline notes whether the context of the step what had a deadline.
func (r *recorder) noteDeadline(ctx context.Context, what string) {
	_, ok := ctx.Deadline()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deadlines = append(r.deadlines, fmt.Sprintf("%s %t", what, ok))
}

func (r *recorder) Lookup(ctx context.Context, orgID, number string) ([]popup.Client, error) {
	r.step("lookup " + number)
	r.noteDeadline(ctx, "lookup")
	if r.lookupWait > 0 {
		select {
		case <-time.After(r.lookupWait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if r.lookupErr != nil {
		return nil, r.lookupErr
	}
	return []popup.Client{{ExternalID: "c1", Name: "Ada Lovelace"}}, nil
}

func (r *recorder) Publish(ctx context.Context, p popup.Popup) error {
	r.step("publish " + p.ProviderCallID)
	r.noteDeadline(ctx, "publish")
	r.mu.Lock()
	r.popups = append(r.popups, p)
	r.mu.Unlock()
	return r.publishErr
}

func (r *recorder) Ringing(ctx context.Context, orgID string, refs []store.EventRef, _ *store.KeyCheck) ([]store.Ringing, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]store.Ringing, len(refs))
	for i, ref := range refs {
		id := store.CallID(orgID, ref.Provider, ref.ProviderCallID)
		_, out[i].Known = r.events[id+"/"+ref.DedupeKey]
		out[i].State = r.states[id]
	}
	return out, nil
}

func (r *recorder) WriteCalls(ctx context.Context, w store.Write) ([]store.CallResult, error) {
	r.step("write")
	r.mu.Lock()
	r.writers++
	hold := r.holdWrites
	r.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if r.writeErr != nil {
		return nil, r.writeErr
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []store.CallResult
	for _, c := range w.Calls {
		id := store.CallID(w.OrgID, c.Provider, c.ProviderCallID)
		stored, exists := r.calls[id]
		if c.Clients != nil {
			stored = c.Clients
		}
		r.calls[id] = stored
		r.states[id] = max(r.states[id], c.State)
		res := store.CallResult{ID: id, Created: !exists, Clients: stored}
		for _, e := range c.Events {
			k := id + "/" + e.DedupeKey
			if id, ok := r.events[k]; ok {
				res.Events = append(res.Events, store.EventResult{ID: id, Duplicate: true})
				continue
			}
			r.events[k] = e.ID
			res.Events = append(res.Events, store.EventResult{ID: e.ID})
		}
		out = append(out, res)
	}
	return out, nil
}

func newService(t *testing.T, r *recorder) *Service {
	t.Helper()
	s, err := New(Options{Writer: r, Lookup: r, Publisher: r, LookupTimeout: 50 * time.Millisecond, Now: func() time.Time { return t0.Add(time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIngestOrder(t *testing.T) {
	r := newRecorder()
	s := newService(t, r)
	res, err := s.Ingest(t.Context(), "org1", "trace1", parse(t, ev("call_received", "a", 0, t0, "")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.steps, ","); got != "lookup +15551230000,publish a,write" {
		t.Fatalf("steps %s, want lookup, publish, then write", got)
	}
	if !res.Created() || len(res.Calls[0].Clients) != 1 || res.Calls[0].Clients[0].Name != "Ada Lovelace" {
		t.Fatalf("result %+v", res)
	}
	p := r.popups[0]
	if p.CallID != res.Calls[0].ID || p.TraceID != "trace1" || p.Locations[0] != "main" || p.Lookup != popup.LookupMatched {
		t.Errorf("popup %+v", p)
	}

	// The identical retry: no popup, every event a duplicate, not created. Its lookup was
	// asked while the store was read, before the retry was known for one, and its answer is
	// not used.
	r.steps = nil
	res, err = s.Ingest(t.Context(), "org1", "trace2", parse(t, ev("call_received", "a", 0, t0, "")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.steps, ","); got != "lookup +15551230000,write" {
		t.Errorf("retry steps %s, want the lookup then the write, no publish", got)
	}
	if res.Created() || !res.Events[0].Duplicate || len(res.Calls[0].Clients) != 1 {
		t.Errorf("retry result %+v", res)
	}
}

// patient is a recorder that says whether asking it may wait (waiter).
type patient struct {
	*recorder
	waits bool
}

func (p patient) MayWait(context.Context, string) bool { return p.waits }

// TestRingsThatCannotWait: rings whose lookup and broker both say they cannot wait run in turn,
// in the request's order. The lookups always share the request's lookup deadline; a publish has
// a deadline of its own only when the broker may wait (or does not say).
func TestRingsThatCannotWait(t *testing.T) {
	body := batch(ev("call_received", "a", 0, t0, ""), ev("call_ended", "a", 1, t0, ""),
		ev("call_received", "b", 0, t0, ""), ev("call_received", "c", 0, t0, ""))
	inTurn := "lookup +15551230000,publish a,lookup +15551230000,publish b,lookup +15551230000,publish c,write"
	for _, tc := range []struct {
		name                string
		lookup, publisher   func(*recorder) any
		lookupDL, publishDL bool
		wantSteps           string
	}{
		{"neither waits", waits(false), waits(false), true, false, inTurn},
		{"the lookup may wait", waits(true), waits(false), true, false, ""},
		{"the broker may wait", waits(false), waits(true), true, true, ""},
		{"neither says", plain, plain, true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			s, err := New(Options{Writer: r, Lookup: tc.lookup(r).(CallerLookup), Publisher: tc.publisher(r).(Publisher),
				Now: func() time.Time { return t0.Add(time.Minute) }})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Ingest(t.Context(), "org1", "t", parse(t, body), nil); err != nil {
				t.Fatal(err)
			}
			if tc.wantSteps != "" {
				if got := strings.Join(r.steps, ","); got != tc.wantSteps {
					t.Errorf("steps %s, want %s", got, tc.wantSteps)
				}
			}
			if len(r.popups) != 3 || len(r.steps) != 7 {
				t.Fatalf("%d popups in steps %q, want 3", len(r.popups), r.steps)
			}
			for _, d := range r.deadlines {
				want := strings.HasPrefix(d, "lookup") && tc.lookupDL || strings.HasPrefix(d, "publish") && tc.publishDL
				if !strings.HasSuffix(d, fmt.Sprint(want)) {
					t.Errorf("deadlines %q: want lookups %t, publishes %t", r.deadlines, tc.lookupDL, tc.publishDL)
					break
				}
			}
		})
	}
}

func waits(w bool) func(*recorder) any { return func(r *recorder) any { return patient{r, w} } }

func plain(r *recorder) any { return r }

func TestOnlyCallReceivedRings(t *testing.T) {
	r := newRecorder()
	s := newService(t, r)
	body := batch(ev("call_placed", "p", 0, t0, ""), ev("call_answered", "p", 1, t0, ""), ev("call_ended", "p", 2, t0, ""),
		ev("call_missed", "q", 0, t0, ""), ev("call_hold", "q", 1, t0, ""))
	if _, err := s.Ingest(t.Context(), "org1", "t", parse(t, body), nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.steps, ","); got != "write" {
		t.Errorf("steps %s, want only the write", got)
	}
}

// TestPopupKeepsNothingOfTheEvents: once Ingest returns, its caller may reuse the events'
// memory (the service's parser does), and a popup the publisher kept must not change with it.
func TestPopupKeepsNothingOfTheEvents(t *testing.T) {
	r := newRecorder()
	s := newService(t, r)
	events := parse(t, batch(ev("call_received", "a", 0, t0, ""), ev("call_received", "b", 0, t0, "")))
	if _, err := s.Ingest(t.Context(), "org1", "t", events, nil); err != nil {
		t.Fatal(err)
	}
	if len(r.popups) != 2 {
		t.Fatalf("%d popups, want 2", len(r.popups))
	}
	var want []string
	for _, p := range r.popups {
		want = append(want, fmt.Sprint(*p.From))
	}
	for i := range events {
		*events[i].Event.Call.From = event.Party{Number: "+15550000000"}
	}
	for i, p := range r.popups {
		if got := fmt.Sprint(*p.From); got != want[i] {
			t.Errorf("popup %d's parties changed with the events' memory: %s, was %s", i, got, want[i])
		}
	}
}

func TestAnonymousCallerPopsUpWithoutLookup(t *testing.T) {
	r := newRecorder()
	s := newService(t, r)
	body := `{"type":"call_received","providerCallId":"anon","occurredAt":"2026-03-01T09:30:00Z","locations":["front","back","front"],"call":{"direction":"inbound","from":{"kind":"anonymous"}}}`
	res, err := s.Ingest(t.Context(), "org1", "t", parse(t, body), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.steps, ","); got != "publish anon,write" {
		t.Errorf("steps %s", got)
	}
	if r.popups[0].Lookup != popup.LookupSkipped || len(r.popups[0].Locations) != 2 {
		t.Errorf("popup %+v", r.popups[0])
	}
	if res.Calls[0].Clients == nil {
		t.Error("crmClients must be an empty array, not null")
	}
}

// The caller lookup over HTTP is the pipeline's CallerLookup, and tells whether it may wait.
var (
	_ CallerLookup = (*lookup.Lookup)(nil)
	_ waiter       = (*lookup.Lookup)(nil)
)

// TestBrokersThatMayWait: the in-process broker never waits; Redis does not say, so its
// publishes keep their deadline.
func TestBrokersThatMayWait(t *testing.T) {
	if mayWait(t.Context(), popup.NewMemory(popup.MemoryOptions{}), "org1") {
		t.Error("the in-process broker may wait")
	}
	if !mayWait(t.Context(), (*popup.Redis)(nil), "org1") {
		t.Error("Redis cannot wait")
	}
	if mayWait(t.Context(), nil, "org1") {
		t.Error("no broker may wait")
	}
}

func TestLookupNotConfigured(t *testing.T) {
	r := newRecorder()
	r.lookupErr = fmt.Errorf("org1: %w", lookup.ErrNotConfigured)
	s := newService(t, r)
	if _, err := s.Ingest(t.Context(), "org1", "t", parse(t, ev("call_received", "a", 0, t0, "")), nil); err != nil {
		t.Fatal(err)
	}
	if len(r.popups) != 1 || r.popups[0].Lookup != popup.LookupNotSet {
		t.Errorf("popups %+v, want one with lookup %q", r.popups, popup.LookupNotSet)
	}
}

func TestSurvivableFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(r *recorder)
	}{
		{"lookup refuses", func(r *recorder) { r.lookupErr = errors.New("401 from client system") }},
		{"lookup times out", func(r *recorder) { r.lookupWait = time.Second }},
		{"broker down", func(r *recorder) { r.publishErr = errors.New("connection refused") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			tc.setup(r)
			s := newService(t, r)
			start := time.Now()
			res, err := s.Ingest(t.Context(), "org1", "t", parse(t, ev("call_received", "a", 0, t0, "")), nil)
			if err != nil {
				t.Fatal(err)
			}
			if time.Since(start) > 900*time.Millisecond {
				t.Errorf("lookup timeout did not bound the request")
			}
			if !res.Created() || len(res.Events) != 1 {
				t.Errorf("call not recorded: %+v", res)
			}
			if strings.Join(r.steps, ",")[len(strings.Join(r.steps, ","))-5:] != "write" {
				t.Errorf("steps %v", r.steps)
			}
			if r.lookupErr != nil || r.lookupWait > 0 {
				if r.popups[0].Lookup != popup.LookupFailed || len(r.popups[0].Clients) != 0 {
					t.Errorf("popup after failed lookup %+v", r.popups[0])
				}
			}
		})
	}
}

// TestStoreErrors checks that the errors a caller branches on are this package's, with the
// store's still in the chain, so that the HTTP layer need not know the store.
func TestStoreErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		storeErr error
		want     error
	}{
		{"unavailable", store.ErrUnavailable, ErrUnavailable},
		{"deadline", context.DeadlineExceeded, ErrUnavailable},
		{"key rejected", store.ErrKeyRejected, ErrKeyRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRecorder()
			r.writeErr = fmt.Errorf("pool: %w", tc.storeErr)
			s := newService(t, r)
			_, err := s.Ingest(t.Context(), "org1", "t", parse(t, ev("call_ended", "a", 0, t0, "")), nil)
			if !errors.Is(err, tc.want) || !errors.Is(err, tc.storeErr) {
				t.Fatalf("err = %v, want %v wrapping %v", err, tc.want, tc.storeErr)
			}
		})
	}
}

func TestResponseMapsIntraRequestDuplicates(t *testing.T) {
	r := newRecorder()
	s := newService(t, r)
	body := batch(ev("call_hold", "a", 0, t0, ""), ev("call_ended", "a", 1, t0, ""), ev("call_hold", "a", 0, t0, `,"released":true`))
	res, err := s.Ingest(t.Context(), "org1", "t", parse(t, body), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Events[0].Duplicate || !res.Events[2].Duplicate || res.Events[0].ID != res.Events[2].ID {
		t.Errorf("events %+v", res.Events)
	}
	if res.Events[1].Type != "call_ended" || res.Events[1].DedupeKey != "call_ended:1" {
		t.Errorf("events[1] %+v", res.Events[1])
	}
	if res.Events[0].DedupeKey != "call_hold:0" || res.Events[2].DedupeKey != "call_hold:0" {
		t.Errorf("events %+v", res.Events)
	}
}

func TestFailureLogsCarryTraceAndOrg(t *testing.T) {
	r := newRecorder()
	r.lookupErr = errors.New("401 from client system")
	r.publishErr = errors.New("connection refused")
	var buf bytes.Buffer
	s, err := New(Options{Writer: r, Lookup: r, Publisher: r, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(t.Context(), "org1", "trace-42", parse(t, ev("call_received", "a", 0, t0, "")), nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a line for the failed lookup and one for the missed popup, got %q", lines)
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["trace_id"] != "trace-42" || rec["org_id"] != "org1" || rec["error"] == nil {
			t.Errorf("log line lacks the request's ids or the error: %s", l)
		}
	}
}

func TestPopupIDIsTheRinging(t *testing.T) {
	a := PopupID("o1", "sip", "x")
	if len(a) != 32 {
		t.Errorf("popup id %q, want 32 hex digits", a)
	}
	if a != PopupID("o1", "sip", "x") {
		t.Error("popup id not stable")
	}
	for _, other := range []string{PopupID("o2", "sip", "x"), PopupID("o1", "sipx", ""), PopupID("o1", "sip", "y"),
		strings.ReplaceAll(store.CallID("o1", "sip", "x"), "-", "")} {
		if a == other {
			t.Errorf("collision: %s", a)
		}
	}
}

// TestCopiesRacingRingOnce sends copies of one ringing through the pipeline at once, all before
// any is on file, with the in-process broker: the desks see one popup, and the other copies are
// counted as repeats, not as missed popups. Reports of the call's ringing under other dedupe
// keys are the same ringing.
func TestCopiesRacingRingOnce(t *testing.T) {
	const copies = 20
	for _, tt := range []struct {
		name string
		body func(i int) string
	}{
		{"identical", func(int) string { return ev("call_received", "a", 0, t0, "") }},
		{"other dedupe keys", func(i int) string {
			return ev("call_received", "a", i%3, t0, fmt.Sprintf(`,"providerEventId":"pe-%d"`, i%2))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRecorder()
			reg := prometheus.NewRegistry()
			b := popup.NewMemory(popup.MemoryOptions{})
			defer b.Close()
			s, err := New(Options{Writer: r, Lookup: r, Publisher: b, Registerer: reg, LookupTimeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			sub, err := b.Subscribe(t.Context(), "org1", []string{"main"})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			// Every copy reads "not on file" before any is written, as racing requests do.
			r.holdWrites = make(chan struct{})
			var wg sync.WaitGroup
			for i := range copies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := s.Ingest(t.Context(), "org1", fmt.Sprintf("trace-%d", i), parse(t, tt.body(i)), nil); err != nil {
						t.Error(err)
					}
				}()
			}
			r.waitWriters(t, copies)
			close(r.holdWrites)
			wg.Wait()
			p := popuptest.Receive(t, sub)
			if p.ID != PopupID("org1", "sip", "a") || p.ProviderCallID != "a" {
				t.Errorf("popup %+v", p)
			}
			if err := b.Publish(t.Context(), popuptest.Sample("org1", "marker", "main")); err != nil {
				t.Fatal(err)
			}
			if p := popuptest.Receive(t, sub); p.ID != "marker" {
				t.Errorf("a second popup %s (%s) arrived for the same ringing", p.ID, p.TraceID)
			}
			want := map[string]float64{"published": 1, "repeat": copies - 1, "missed": 0}
			for outcome, n := range want {
				if got := metrictest.Sum(t, reg, "callwire_popups_total", "outcome", outcome); got != n {
					t.Errorf("callwire_popups_total{outcome=%q} = %v, want %v", outcome, got, n)
				}
			}
		})
	}
}

// eachBenchRequest runs once, as a sub-benchmark of b for each request the benchmarks use: a
// batch of ten whole calls from t0, five events each (call_received to call_transcribed, as the
// bulk mix of the load bench sends them), and a lone call_received.
func eachBenchRequest(b *testing.B, once func(b *testing.B, events []event.Parsed)) {
	var evs []string
	for c := range 10 {
		id := fmt.Sprintf("call-%d", c)
		for s, typ := range []string{"call_received", "call_answered", "call_ended", "call_recorded", "call_transcribed"} {
			extra := map[string]string{"call_recorded": `,"url":"https://rec.example/1"`, "call_transcribed": `,"text":"hello"`}[typ]
			evs = append(evs, ev(typ, id, s+1, t0.Add(time.Duration(s)*time.Second), extra))
		}
	}
	for _, tc := range []struct{ name, body string }{
		{"batch of 10 calls", batch(evs...)},
		{"one call_received", evs[0]},
	} {
		events, _, err := event.ParseBody([]byte(tc.body))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				once(b, events)
			}
		})
	}
}

// BenchmarkPlan plans a batch of ten calls of five events each, and a lone call_received, as the
// endpoint does for every request; its allocations are plan's own (the event ids excluded).
func BenchmarkPlan(b *testing.B) {
	eachBenchRequest(b, func(b *testing.B, events []event.Parsed) {
		if calls := plan(events, t0.Add(time.Minute), func() string { return "e" }, new(planMemory)); len(calls) == 0 {
			b.Fatal("no calls")
		}
	})
}

// leanStore answers a ring's read with nothing on file and stores every write as new, keeping
// nothing: it stands for the store in BenchmarkIngest, whose figures are the service's own.
type leanStore struct{}

func (leanStore) Ringing(_ context.Context, _ string, refs []store.EventRef, _ *store.KeyCheck) ([]store.Ringing, error) {
	return make([]store.Ringing, len(refs)), nil
}

func (leanStore) WriteCalls(_ context.Context, w store.Write) ([]store.CallResult, error) {
	out := make([]store.CallResult, len(w.Calls))
	for i, c := range w.Calls {
		out[i] = store.CallResult{ID: store.CallID(w.OrgID, c.Provider, c.ProviderCallID), Created: true, Events: make([]store.EventResult, len(c.Events))}
		for j, e := range c.Events {
			out[i].Events[j].ID = e.ID
		}
	}
	return out, nil
}

func (leanStore) Lookup(context.Context, string, string) ([]popup.Client, error) {
	return nil, lookup.ErrNotConfigured
}

func (leanStore) Publish(context.Context, popup.Popup) error { return nil }

// MayWait says that the lookup and the broker answer at once, as an organization with no client
// system and the in-process broker do.
func (leanStore) MayWait(context.Context, string) bool { return false }

// leanButSilent is a leanStore that does not say whether it may wait, as Redis does not: its
// rings take goroutines and deadlines.
type leanButSilent struct{ CallerLookup }

func (leanButSilent) Publish(context.Context, popup.Popup) error { return nil }

// BenchmarkIngest runs a request through the service with a store, lookup and broker that cost
// nothing (an organization with no client system, the in-process broker): a batch of ten new
// calls of five events, ten of them ringing, and a lone call_received.
func BenchmarkIngest(b *testing.B) { benchmarkIngest(b, leanStore{}, leanStore{}) }

// BenchmarkIngestMayWait is BenchmarkIngest with a lookup and a broker that may wait (that do
// not say otherwise), but answer at once.
func BenchmarkIngestMayWait(b *testing.B) {
	benchmarkIngest(b, leanButSilent{leanStore{}}, leanButSilent{leanStore{}})
}

func benchmarkIngest(b *testing.B, l CallerLookup, p Publisher) {
	s, err := New(Options{Writer: leanStore{}, Lookup: l, Publisher: p, Logger: slog.New(slog.DiscardHandler),
		Registerer: prometheus.NewRegistry(), Now: func() time.Time { return t0.Add(time.Minute) }})
	if err != nil {
		b.Fatal(err)
	}
	eachBenchRequest(b, func(b *testing.B, events []event.Parsed) {
		if _, err := s.Ingest(b.Context(), "org1", "trace1", events, nil); err != nil {
			b.Fatal(err)
		}
	})
}

// overlap is a recorder whose read of what is on file waits for a lookup to begin, so that a
// ring whose lookup followed the read would never get one; it counts the lookups that ended.
type overlap struct {
	*recorder
	asked   chan struct{}
	once    sync.Once
	ended   atomic.Int32
	readErr error
}

func newOverlap() *overlap { return &overlap{recorder: newRecorder(), asked: make(chan struct{})} }

func (o *overlap) Lookup(ctx context.Context, orgID, number string) ([]popup.Client, error) {
	o.once.Do(func() { close(o.asked) })
	defer o.ended.Add(1)
	return o.recorder.Lookup(ctx, orgID, number)
}

func (o *overlap) Ringing(ctx context.Context, orgID string, refs []store.EventRef, check *store.KeyCheck) ([]store.Ringing, error) {
	select {
	case <-o.asked:
	case <-time.After(10 * time.Second):
		return nil, errors.New("no lookup began while the store was read")
	}
	if o.readErr != nil {
		return nil, o.readErr
	}
	return o.recorder.Ringing(ctx, orgID, refs, check)
}

// TestLookupWhileReading: a client system that may wait is asked while the store is read, so a
// popup waits for the slower of the two, not both. Only a call not on file uses the answer; a
// lookup for one on file (a retry, a late ring) or of a request whose read failed is not cut
// short, and Ingest returns only once it has ended, so that nothing of the request outlives it.
func TestLookupWhileReading(t *testing.T) {
	received := func(id string) string { return ev("call_received", id, 0, t0, "") }
	for _, tc := range []struct {
		name    string
		before  []string // reports ingested first, normally
		body    string
		readErr error
		steps   string
		popups  []string
		clients map[string]int // call -> clients stored with it, after the report
	}{
		{name: "new call", body: received("a"),
			steps: "lookup +15551230000,publish a,write", popups: []string{"a"}, clients: map[string]int{"a": 1}},
		{name: "retry", before: []string{received("a")}, body: received("a"),
			steps: "lookup +15551230000,write", clients: map[string]int{"a": 1}},
		{name: "late ring", before: []string{ev("call_answered", "a", 1, t0, "")}, body: received("a"),
			steps: "lookup +15551230000,write", clients: map[string]int{"a": 0}},
		{name: "one new, one retry", before: []string{received("a")}, body: batch(received("a"), received("b")),
			steps: "lookup +15551230000,lookup +15551230000,publish b,write", popups: []string{"b"},
			clients: map[string]int{"a": 1, "b": 1}},
		{name: "read fails", body: received("a"), readErr: fmt.Errorf("pool: %w", store.ErrUnavailable),
			steps: "lookup +15551230000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOverlap()
			o.lookupWait = 20 * time.Millisecond // every lookup still under way when the read ends
			s, err := New(Options{Writer: o, Lookup: o, Publisher: o.recorder, LookupTimeout: 5 * time.Second,
				Now: func() time.Time { return t0.Add(time.Minute) }})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range tc.before {
				if _, err := s.Ingest(t.Context(), "org1", "t", parse(t, b), nil); err != nil {
					t.Fatal(err)
				}
			}
			started := o.ended.Load()
			o.steps, o.popups = nil, nil
			o.readErr = tc.readErr
			_, err = s.Ingest(t.Context(), "org1", "t", parse(t, tc.body), nil)
			if tc.readErr != nil {
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("err = %v, want ErrUnavailable", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			asked := int32(strings.Count(tc.steps, "lookup"))
			if got := o.ended.Load() - started; got != asked {
				t.Errorf("%d lookups had ended when Ingest returned, want %d", got, asked)
			}
			// Every call's caller has the same number, so concurrent lookups note the same step
			// in whatever order they run.
			if got := strings.Join(o.steps, ","); got != tc.steps {
				t.Errorf("steps %s, want %s", got, tc.steps)
			}
			var got []string
			for _, p := range o.popups {
				got = append(got, p.ProviderCallID)
				if p.Lookup != popup.LookupMatched || len(p.Clients) != 1 {
					t.Errorf("popup %s: lookup %q, clients %+v", p.ProviderCallID, p.Lookup, p.Clients)
				}
			}
			if !reflect.DeepEqual(got, tc.popups) {
				t.Errorf("popups %v, want %v", got, tc.popups)
			}
			for call, want := range tc.clients {
				var cs []popup.Client
				if raw := o.calls[store.CallID("org1", "sip", call)]; raw != nil {
					if err := json.Unmarshal(raw, &cs); err != nil {
						t.Fatal(err)
					}
				}
				if len(cs) != want {
					t.Errorf("call %s stored with %d clients, want %d", call, len(cs), want)
				}
			}
		})
	}
}

// panicky is a recorder whose lookups panic.
type panicky struct{ *recorder }

func (panicky) Lookup(context.Context, string, string) ([]popup.Client, error) {
	panic("adapter client bug")
}

// TestLookupThatPanics: a lookup that panics, on the goroutine it runs on beside the read, costs
// the popup its names, never the popup or the call.
func TestLookupThatPanics(t *testing.T) {
	r := newRecorder()
	s, err := New(Options{Writer: r, Lookup: panicky{r}, Publisher: r, LookupTimeout: time.Second,
		Now: func() time.Time { return t0.Add(time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Ingest(t.Context(), "org1", "t", parse(t, ev("call_received", "a", 0, t0, "")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created() || len(res.Calls[0].Clients) != 0 {
		t.Errorf("result %+v, want the call created with no clients", res)
	}
	if len(r.popups) != 1 || r.popups[0].Lookup != popup.LookupFailed || len(r.popups[0].Clients) != 0 {
		t.Errorf("popups %+v, want one with lookup %q and no clients", r.popups, popup.LookupFailed)
	}
}
