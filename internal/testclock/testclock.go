// Package testclock is a clock that a test moves by hand, for code that reads the time through a
// func() time.Time: the test hands it Clock.Now and moves time on with Advance, so that what
// depends on time passing (expiries, retention, backoff) is checked without waiting.
package testclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only when Advance moves it. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads at.
func New(at time.Time) *Clock { return &Clock{now: at} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d on.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
