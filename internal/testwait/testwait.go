// Package testwait is how tests wait for what another goroutine or process makes true: they poll
// a condition against a deadline and, when it never holds, fail naming what they waited for. A
// fixed sleep either waits for nothing or, on a slow machine, not long enough.
//
// Inside a testing/synctest bubble the polling sleeps on the bubble's clock, so a wait there
// costs no wall-clock time.
package testwait

import (
	"testing"
	"time"
)

// Interval is the pause between two checks of a condition.
const Interval = 10 * time.Millisecond

// Poll checks cond at once and then every Interval until it holds, and reports whether it held
// before within passed. It checks once more at the deadline, so a condition that came true during
// the last pause counts. It does not fail anything: the caller decides what a false means.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if !time.Now().Before(deadline) {
			return cond()
		}
		time.Sleep(Interval)
	}
	return true
}

// Until waits as Poll does and, when cond has not held within the time given, fails t with
// t.Fatalf naming what it waited for. Like t.Fatalf, it must be called from the test's goroutine.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("waited %v in vain for %s", within, what)
	}
}

// NoError waits until check returns nil, checking it as Poll does, and, when it still returns an
// error after within, fails t with t.Fatalf and that last error, which says what was missing.
func NoError(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	var err error
	if !Poll(within, func() bool { err = check(); return err == nil }) {
		t.Fatalf("not within %v: %v", within, err)
	}
}
