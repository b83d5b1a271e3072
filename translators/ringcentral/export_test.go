package ringcentral

import "testing"

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
