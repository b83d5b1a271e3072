package testclock

import (
	"sync"
	"testing"
	"time"
)

// TestClock: the clock reads what it was set to until moved, and moves by the sum of what
// concurrent callers move it by.
func TestClock(t *testing.T) {
	at := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	c := New(at)
	if got := c.Now(); !got.Equal(at) {
		t.Fatalf("Now %v, want %v", got, at)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Second); _ = c.Now() })
	}
	wg.Wait()
	if got, want := c.Now(), at.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("Now %v after ten seconds' moves, want %v", got, want)
	}
}
