package testwait

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		start := time.Now()
		if !Poll(time.Second, func() bool { return n.Add(1) == 3 }) {
			t.Fatal("a condition that held on the third check was reported false")
		}
		if got := time.Since(start); got != 2*Interval {
			t.Errorf("held on the third check after %v, want %v", got, 2*Interval)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if Poll(time.Second, func() bool { return false }) {
			t.Fatal("a condition that never held was reported true")
		}
		if got := time.Since(start); got < time.Second || got > time.Second+Interval {
			t.Errorf("gave up after %v, want %v", got, time.Second)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// The condition comes true during the last pause: the check at the deadline sees it.
		start := time.Now()
		if !Poll(5*time.Millisecond, func() bool { return time.Since(start) >= 5*time.Millisecond }) {
			t.Fatal("the check at the deadline was not made")
		}
	})
}

// recorder is a testing.TB that keeps what it was failed with, for the failing paths.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntilAndNoErrorFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &recorder{TB: t}
		Until(r, time.Second, "nothing", func() bool { return false })
		if !strings.Contains(r.failed, "nothing") {
			t.Errorf("Until failed with %q on a condition that never held, not naming it", r.failed)
		}
		r = &recorder{TB: t}
		Until(r, time.Second, "something", func() bool { return true })
		if r.failed != "" {
			t.Errorf("Until failed on a condition that held: %s", r.failed)
		}
		r = &recorder{TB: t}
		NoError(r, time.Second, func() error { return errors.New("still missing") })
		if !strings.Contains(r.failed, "still missing") {
			t.Errorf("NoError failed with %q on a check that kept failing, not giving its error", r.failed)
		}
	})
}
