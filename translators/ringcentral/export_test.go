package ringcentral

import (
	"testing"
	"time"
)

// What the end-to-end test (package ringcentral_test) uses of the fake RingCentral.

// FakeRC is the fake RingCentral platform of the tests.
type FakeRC = fakeRC

// NewFakeRC starts a fake RingCentral platform for t.
func NewFakeRC(t testing.TB) *FakeRC { return newFakeRC(t) }

// URL is the fake platform's base URL.
func (f *fakeRC) URL() string { return f.srv.URL }

// Push queues the notifications of a testdata scenario, from the from-th on, for the socket.
func (f *fakeRC) Push(t testing.TB, name string, from, to int) {
	notes := scenario(t, name)
	pushAll(f, notes[from:min(to, len(notes))])
}

// Subscriptions is how many subscriptions the gateway took.
func (f *fakeRC) Subscriptions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subscribed
}

// AddCallLogRecord puts a closed call on the fake call log: session, an inbound call from the
// fixtures' caller to their desk, with the result given, which started at start, lasted dur
// seconds and was last modified at mod.
func (f *fakeRC) AddCallLogRecord(session, result string, start time.Time, dur float64, mod time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := logRecord(session, "Inbound", result, start, dur, mod)
	if len(f.pages) == 0 {
		f.pages = [][]callLogRecord{nil}
	}
	f.pages[0] = append(f.pages[0], r)
}
