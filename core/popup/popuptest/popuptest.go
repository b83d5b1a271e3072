// Package popuptest is the contract every popup.Broker keeps, as a test suite, and gives tests a
// Redis server to run it against.
//
// A broker's tests call Run with a constructor:
//
//	func TestContract(t *testing.T) {
//		popuptest.Run(t, func(t *testing.T) popup.Broker { return popup.NewMemory(popup.MemoryOptions{}) })
//	}
//
// The Redis server is named by the environment variable CALLWIRE_TEST_REDIS_URL, for example
//
//	CALLWIRE_TEST_REDIS_URL='redis://127.0.0.1:6379/0'
//
// When it is unset, RedisURL skips the test with a loud message, or fails it when
// CALLWIRE_REQUIRE_SERVICES=1 is set. The server is shared: every test names its own
// organizations (OrgID), so that runs never see each other's popups.
package popuptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/sdk/event"
)

// EnvRedisURL is the environment variable naming the Redis server tests may publish on.
const EnvRedisURL = "CALLWIRE_TEST_REDIS_URL"

// EnvRequire is the environment variable that, set to "1", turns a missing EnvRedisURL from a
// skip into a failure.
const EnvRequire = "CALLWIRE_REQUIRE_SERVICES"

// Wait is how long the suite waits for a popup that should arrive.
const Wait = 5 * time.Second

// RedisURL returns the Redis URL named by EnvRedisURL. It skips t (or fails it, under
// EnvRequire=1) when the variable is unset.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvRedisURL)
	if u == "" {
		const example = " (for example " + EnvRedisURL + "='redis://127.0.0.1:6379/0')"
		if os.Getenv(EnvRequire) == "1" {
			t.Fatal("popuptest: this test needs Redis and " + EnvRequire + "=1, but " + EnvRedisURL + " is not set" + example)
		}
		t.Skip("popuptest: SKIPPING: this test needs Redis and " + EnvRedisURL + " is not set" + example)
	}
	return u
}

// OrgID returns an organization id no other test uses, so that tests sharing a broker server
// never receive each other's popups.
func OrgID(t testing.TB) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "test-" + name + "-" + hex.EncodeToString(b[:])
}

// Sample returns a popup with every field set, for orgID and locations.
func Sample(orgID, id string, locations ...string) popup.Popup {
	return popup.Popup{
		ID:             id,
		OrgID:          orgID,
		CallID:         "call-" + id,
		Provider:       "sip",
		ProviderCallID: "pc-" + id,
		Locations:      locations,
		Direction:      "inbound",
		From:           &event.Party{Kind: event.KindE164, Number: "+442071234567", Name: "Ada Lovelace"},
		To:             &event.Party{Kind: event.KindExtension, Extension: "101"},
		Trunk:          "trunk-1",
		Clients:        []popup.Client{{ExternalID: "c-1", Name: "Ada Lovelace"}},
		Lookup:         popup.LookupMatched,
		OccurredAt:     time.Date(2026, 11, 20, 9, 30, 0, 123456789, time.UTC),
		PublishedAt:    time.Now().UTC(),
		TraceID:        "trace-" + id,
	}
}

// Receive returns the next popup of s, failing t when none arrives within Wait or the
// subscription ends.
func Receive(t testing.TB, s popup.Subscription) popup.Popup {
	t.Helper()
	select {
	case p, ok := <-s.Popups():
		if !ok {
			t.Fatalf("subscription ended (err %v), want a popup", s.Err())
		}
		return p
	case <-time.After(Wait):
		t.Fatalf("no popup within %v", Wait)
	}
	panic("unreachable")
}

// Ended waits up to Wait for s's channel to be closed, failing t if a popup arrives or the
// channel stays open.
func Ended(t testing.TB, s popup.Subscription) {
	t.Helper()
	select {
	case p, ok := <-s.Popups():
		if ok {
			t.Fatalf("popup %s delivered, want the subscription ended", p.ID)
		}
	case <-time.After(Wait):
		t.Fatalf("subscription still open after %v", Wait)
	}
}

// Run runs the contract against a fresh broker from newBroker in each subtest. Run closes each
// broker when its subtest ends, so newBroker need not; Close must be safe to call twice.
func Run(t *testing.T, newBroker func(t *testing.T) popup.Broker) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b popup.Broker)
	}{
		{"DeliversToItsOrganizationAndLocationsOnly", testRouting},
		{"EveryFieldArrives", testFields},
		{"SeveralSubscribers", testSeveralSubscribers},
		{"SeveralLocationsOnce", testSeveralLocationsOnce},
		{"OrderPerLocation", testOrder},
		{"PublishedRightAfterSubscribeArrives", testRightAfterSubscribe},
		{"SubscriptionClose", testSubscriptionClose},
		{"SubscribeContextEnds", testSubscribeContext},
		{"BrokerCloseEndsSubscriptions", testBrokerClose},
		{"SlowSubscriberDoesNotBlockPublish", testSlowSubscriber},
		{"CancelledContextFailsFast", testCancelled},
		{"RefusesIncompleteRequests", testRefuses},
		{"Concurrent", testConcurrent},
		{"RepeatsPublishOnce", testRepeatsOnce},
		{"ConcurrentRepeatsPublishOnce", testConcurrentRepeats},
		{"FailedPublishClaimsNothing", testFailedPublishClaimsNothing},
		{"CallbacksNoticeReachesTheOrganizationOnly", testCallbacksRouting},
		{"CallbacksNoticesCoalesce", testCallbacksCoalesce},
		{"CallbacksNoticeRefusals", testCallbacksRefusals},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBroker(t)
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("close broker: %v", err)
				}
			})
			tc.fn(t, b)
		})
	}
}

func subscribe(t *testing.T, b popup.Broker, org string, locations ...string) popup.Subscription {
	t.Helper()
	s, err := b.Subscribe(t.Context(), org, locations)
	if err != nil {
		t.Fatalf("subscribe %s %v: %v", org, locations, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func publish(t *testing.T, b popup.Broker, p popup.Popup) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Wait)
	defer cancel()
	if err := b.Publish(ctx, p); err != nil {
		t.Fatalf("publish %s: %v", p.ID, err)
	}
}

// expect receives popups from s and fails unless their ids are ids, in that order. Publishing a
// marker after what must not arrive, and expecting the marker next, proves the absence.
func expect(t *testing.T, s popup.Subscription, ids ...string) {
	t.Helper()
	for _, want := range ids {
		if got := Receive(t, s); got.ID != want {
			t.Fatalf("received popup %q, want %q (in order %v)", got.ID, want, ids)
		}
	}
}

func testRouting(t *testing.T, b popup.Broker) {
	org, other := OrgID(t), OrgID(t)
	front := subscribe(t, b, org, "front")
	back := subscribe(t, b, org, "back")
	otherFront := subscribe(t, b, other, "front")

	publish(t, b, Sample(org, "to-front", "front"))
	publish(t, b, Sample(org, "to-back", "back"))
	publish(t, b, Sample(org, "to-nowhere", "upstairs"))
	publish(t, b, Sample(other, "other-marker", "front"))
	publish(t, b, Sample(org, "marker", "front", "back"))

	expect(t, front, "to-front", "marker")
	expect(t, back, "to-back", "marker")
	// Another organization's subscriber of the same location name sees only its own.
	expect(t, otherFront, "other-marker")
	publish(t, b, Sample(other, "other-marker-2", "front"))
	expect(t, otherFront, "other-marker-2")
}

func testFields(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	s := subscribe(t, b, org, "main")
	want := Sample(org, "every-field", "main", "annex")
	publish(t, b, want)
	got := Receive(t, s)
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if string(wj) != string(gj) {
		t.Errorf("popup changed on the way:\n got  %s\n want %s", gj, wj)
	}
	if !got.OccurredAt.Equal(want.OccurredAt) || !got.PublishedAt.Equal(want.PublishedAt) {
		t.Errorf("times changed: occurredAt %v publishedAt %v", got.OccurredAt, got.PublishedAt)
	}
}

func testSeveralSubscribers(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	subs := []popup.Subscription{
		subscribe(t, b, org, "main"),
		subscribe(t, b, org, "main"),
		subscribe(t, b, org, "main", "annex"),
	}
	publish(t, b, Sample(org, "one", "main"))
	publish(t, b, Sample(org, "two", "main"))
	for _, s := range subs {
		expect(t, s, "one", "two")
	}
}

func testSeveralLocationsOnce(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	s := subscribe(t, b, org, "front", "back", "annex")
	publish(t, b, Sample(org, "two-of-mine", "front", "back"))
	publish(t, b, Sample(org, "three-of-mine", "annex", "front", "back", "elsewhere"))
	publish(t, b, Sample(org, "one-of-mine", "elsewhere", "back"))
	publish(t, b, Sample(org, "marker", "front"))
	expect(t, s, "two-of-mine", "three-of-mine", "one-of-mine", "marker")
	// Many in a row, each naming two subscribed locations: each arrives once, in order.
	for i := range 30 {
		publish(t, b, Sample(org, fmt.Sprintf("pair-%02d", i), "front", "back"))
	}
	for i := range 30 {
		expect(t, s, fmt.Sprintf("pair-%02d", i))
	}
	publish(t, b, Sample(org, "marker-1", "back"))
	expect(t, s, "marker-1")
	// Repeats of a subscribed location in Subscribe do not deliver twice either.
	s2 := subscribe(t, b, org, "front", "front")
	publish(t, b, Sample(org, "again", "front"))
	publish(t, b, Sample(org, "marker-2", "front"))
	expect(t, s2, "again", "marker-2")
}

func testOrder(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	s := subscribe(t, b, org, "front", "back")
	const n = 20 // well within any broker's buffer
	for i := range n {
		publish(t, b, Sample(org, fmt.Sprintf("front-%02d", i), "front"))
		publish(t, b, Sample(org, fmt.Sprintf("back-%02d", i), "back"))
	}
	next := map[string]int{}
	for range 2 * n {
		p := Receive(t, s)
		loc, num, _ := strings.Cut(p.ID, "-")
		if want := fmt.Sprintf("%02d", next[loc]); num != want {
			t.Fatalf("location %s: popup %s arrived when %s-%s was due", loc, p.ID, loc, want)
		}
		next[loc]++
	}
}

func testRightAfterSubscribe(t *testing.T, b popup.Broker) {
	for i := range 5 {
		org := OrgID(t)
		s := subscribe(t, b, org, "main")
		publish(t, b, Sample(org, fmt.Sprintf("first-%d", i), "main"))
		expect(t, s, fmt.Sprintf("first-%d", i))
	}
}

func testSubscriptionClose(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	s := subscribe(t, b, org, "main")
	keep := subscribe(t, b, org, "main")
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	Ended(t, s)
	if _, ok := <-s.Callbacks(); ok {
		t.Error("a closed subscription delivered a to-call-back notice")
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
	// The broker and other subscriptions go on.
	publish(t, b, Sample(org, "after", "main"))
	expect(t, keep, "after")
}

func testSubscribeContext(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	ctx, cancel := context.WithCancel(t.Context())
	s, err := b.Subscribe(ctx, org, []string{"main"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	keep := subscribe(t, b, org, "main")
	cancel()
	Ended(t, s)
	if err := s.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after the Subscribe context ended = %v, want context.Canceled", err)
	}
	publish(t, b, Sample(org, "after", "main"))
	expect(t, keep, "after")

	done, cancelDone := context.WithCancel(t.Context())
	cancelDone()
	if s, err := b.Subscribe(done, org, []string{"main"}); err == nil {
		s.Close()
		t.Error("Subscribe with an ended context succeeded")
	}
}

func testBrokerClose(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	subs := []popup.Subscription{subscribe(t, b, org, "main"), subscribe(t, b, org, "front", "back")}
	if err := b.Close(); err != nil {
		t.Fatalf("close broker: %v", err)
	}
	for _, s := range subs {
		Ended(t, s)
		if err := s.Err(); !errors.Is(err, popup.ErrClosed) {
			t.Errorf("Err after the broker closed = %v, want popup.ErrClosed", err)
		}
	}
	if err := b.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), Wait)
	defer cancel()
	if err := b.Publish(ctx, Sample(org, "late", "main")); err == nil {
		t.Error("Publish on a closed broker succeeded")
	}
	if s, err := b.Subscribe(ctx, org, []string{"main"}); err == nil {
		s.Close()
		t.Error("Subscribe on a closed broker succeeded")
	}
}

func testSlowSubscriber(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	slow := subscribe(t, b, org, "main") // never read until the end
	const n = 1000
	start := time.Now()
	for i := range n {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := b.Publish(ctx, Sample(org, fmt.Sprintf("flood-%d", i), "main"))
		cancel()
		if err != nil {
			t.Fatalf("publish %d with a subscriber not reading: %v", i, err)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("%d publishes took %v with a subscriber not reading", n, d)
	}
	// The slow subscriber lost popups but still works: once drained, a new popup arrives.
	got := 0
	for attempt := range 3 {
		got += drain(t, slow)
		marker := fmt.Sprintf("after-flood-%d", attempt)
		publish(t, b, Sample(org, marker, "main"))
		deadline := time.After(Wait)
	wait:
		for {
			select {
			case p, ok := <-slow.Popups():
				if !ok {
					t.Fatalf("slow subscription ended: %v", slow.Err())
				}
				if p.ID == marker {
					if got > n {
						t.Errorf("%d popups delivered, more than published", got)
					}
					return
				}
				got++
			case <-deadline:
				break wait // the flood may still have been arriving; drain and try again
			}
		}
	}
	t.Fatal("a drained slow subscriber received nothing new")
}

// drain takes popups from s until none arrives for a moment, and returns how many it took.
func drain(t *testing.T, s popup.Subscription) int {
	n := 0
	for {
		select {
		case _, ok := <-s.Popups():
			if !ok {
				t.Fatalf("subscription ended: %v", s.Err())
			}
			n++
		case <-time.After(200 * time.Millisecond):
			return n
		}
	}
}

func testCancelled(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	start := time.Now()
	err := b.Publish(ctx, Sample(org, "cancelled", "main"))
	if err == nil {
		t.Fatal("Publish with a cancelled context succeeded")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Publish with a cancelled context: %v, want it to wrap context.Canceled", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Publish with a cancelled context took %v", d)
	}
}

func testRefuses(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	ctx := t.Context()
	for name, locs := range map[string][]string{"no locations": nil, "empty location": {""}} {
		if s, err := b.Subscribe(ctx, org, locs); err == nil {
			s.Close()
			t.Errorf("Subscribe with %s succeeded", name)
		}
	}
	if s, err := b.Subscribe(ctx, "", []string{"main"}); err == nil {
		s.Close()
		t.Error("Subscribe without an organization succeeded")
	}
	if err := b.Publish(ctx, Sample(org, "nowhere")); err == nil {
		t.Error("Publish without locations succeeded")
	}
	if err := b.Publish(ctx, Sample("", "no-org", "main")); err == nil {
		t.Error("Publish without an organization succeeded")
	}
	if err := b.Publish(ctx, Sample(org, "", "main")); err == nil {
		t.Error("Publish without an id succeeded")
	}
}

func testConcurrent(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	const publishers, each = 4, 10
	s := subscribe(t, b, org, "main")
	var wg sync.WaitGroup
	errs := make(chan error, publishers*each)
	for w := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ctx, cancel := context.WithTimeout(t.Context(), Wait)
				errs <- b.Publish(ctx, Sample(org, fmt.Sprintf("w%d-%d", w, i), "main"))
				cancel()
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub, err := b.Subscribe(t.Context(), org, []string{"main", "annex"})
			if err != nil {
				errs <- err
				return
			}
			sub.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for range publishers * each {
		p := Receive(t, s)
		if seen[p.ID] {
			t.Fatalf("popup %s delivered twice", p.ID)
		}
		seen[p.ID] = true
	}
}

// Copies is how many copies of one popup the repeat tests publish at once.
const Copies = 20

func testRepeatsOnce(t *testing.T, b popup.Broker) {
	org, other := OrgID(t), OrgID(t)
	s := subscribe(t, b, org, "front", "back")
	theirs := subscribe(t, b, other, "front")
	publish(t, b, Sample(org, "ring", "front", "back"))
	ctx, cancel := context.WithTimeout(t.Context(), Wait)
	defer cancel()
	// The same ringing again, even for other locations and with other content: a repeat.
	again := Sample(org, "ring", "front")
	again.TraceID, again.PublishedAt = "another-request", time.Now().UTC()
	if err := b.Publish(ctx, again); !errors.Is(err, popup.ErrRepeat) {
		t.Fatalf("second Publish of popup ring: %v, want popup.ErrRepeat", err)
	}
	// The claim is the organization's: another's popup of the same id rings its own desks.
	publish(t, b, Sample(other, "ring", "front"))
	publish(t, b, Sample(org, "marker", "back"))
	expect(t, s, "ring", "marker")
	expect(t, theirs, "ring")
}

func testConcurrentRepeats(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	subs := []popup.Subscription{subscribe(t, b, org, "front"), subscribe(t, b, org, "front", "back")}
	errs := make([]error, Copies)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range Copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := Sample(org, "racing", "front", "back")
			p.TraceID = fmt.Sprintf("copy-%d", i)
			ctx, cancel := context.WithTimeout(t.Context(), Wait)
			defer cancel()
			<-gate
			errs[i] = b.Publish(ctx, p)
		}()
	}
	close(gate)
	wg.Wait()
	published, repeats := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			published++
		case errors.Is(err, popup.ErrRepeat):
			repeats++
		default:
			t.Errorf("copy %d: %v", i, err)
		}
	}
	if published != 1 || repeats != Copies-1 {
		t.Errorf("%d copies published and %d were repeats, want 1 and %d", published, repeats, Copies-1)
	}
	// Exactly one arrives: the next popup after it is the marker.
	publish(t, b, Sample(org, "marker", "front"))
	for _, s := range subs {
		expect(t, s, "racing", "marker")
	}
}

func testFailedPublishClaimsNothing(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	s := subscribe(t, b, org, "main")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Publish(ctx, Sample(org, "retried", "main")); err == nil || errors.Is(err, popup.ErrRepeat) {
		t.Fatalf("Publish with a cancelled context: %v, want a failure", err)
	}
	// The failed copy did not claim the ringing: the retry publishes it.
	publish(t, b, Sample(org, "retried", "main"))
	expect(t, s, "retried")
}

// notify sends a to-call-back notice for org, failing t on an error.
func notify(t *testing.T, b popup.Broker, org string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Wait)
	defer cancel()
	if err := b.NotifyCallbacks(ctx, org); err != nil {
		t.Fatalf("notify %s: %v", org, err)
	}
}

// pendingNotice reports whether s holds a to-call-back notice not yet read, taking it. Call it
// once a popup published after the notices in question has been received: a broker delivers a
// subscription's messages in the order they were sent.
func pendingNotice(t *testing.T, s popup.Subscription) bool {
	t.Helper()
	select {
	case _, ok := <-s.Callbacks():
		if !ok {
			t.Fatalf("subscription ended: %v", s.Err())
		}
		return true
	default:
		return false
	}
}

// receiveNotice waits up to Wait for a to-call-back notice on s.
func receiveNotice(t *testing.T, s popup.Subscription) {
	t.Helper()
	select {
	case _, ok := <-s.Callbacks():
		if !ok {
			t.Fatalf("subscription ended (err %v), want a to-call-back notice", s.Err())
		}
	case <-time.After(Wait):
		t.Fatalf("no to-call-back notice within %v", Wait)
	}
}

func testCallbacksRouting(t *testing.T, b popup.Broker) {
	org, other := OrgID(t), OrgID(t)
	front := subscribe(t, b, org, "front")
	both := subscribe(t, b, org, "back", "annex")
	theirs := subscribe(t, b, other, "front")

	// A notice is the organization's, whatever the locations: every subscription of it hears.
	notify(t, b, org)
	receiveNotice(t, front)
	receiveNotice(t, both)
	// Another organization's subscription hears nothing: the marker published after the notice
	// arrives with no notice before it.
	publish(t, b, Sample(other, "marker", "front"))
	expect(t, theirs, "marker")
	if pendingNotice(t, theirs) {
		t.Error("another organization's subscription received the notice")
	}
	// A notice never arrives as a popup, and popups still flow.
	publish(t, b, Sample(org, "after", "front"))
	expect(t, front, "after")
	notify(t, b, other)
	receiveNotice(t, theirs)
}

func testCallbacksCoalesce(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	s := subscribe(t, b, org, "main")
	for range 50 {
		notify(t, b, org)
	}
	publish(t, b, Sample(org, "marker", "main"))
	expect(t, s, "marker")
	// Fifty notices unread are one notice pending, and nothing after it.
	if !pendingNotice(t, s) {
		t.Fatal("no notice pending after 50 notices")
	}
	if pendingNotice(t, s) {
		t.Error("a second notice pending: notices must coalesce")
	}
	// A notice after the reader took the pending one arrives again.
	notify(t, b, org)
	receiveNotice(t, s)
}

func testCallbacksRefusals(t *testing.T, b popup.Broker) {
	org := OrgID(t)
	if err := b.NotifyCallbacks(t.Context(), ""); err == nil {
		t.Error("NotifyCallbacks without an organization succeeded")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.NotifyCallbacks(ctx, org); !errors.Is(err, context.Canceled) {
		t.Errorf("NotifyCallbacks with a cancelled context: %v, want it to wrap context.Canceled", err)
	}
	s := subscribe(t, b, org, "main")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	Ended(t, s)
	if _, ok := <-s.Callbacks(); ok {
		t.Error("a subscription of a closed broker delivered a notice")
	}
	if err := b.NotifyCallbacks(t.Context(), org); err == nil {
		t.Error("NotifyCallbacks on a closed broker succeeded")
	}
}
