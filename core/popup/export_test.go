package popup

import "time"

// NewMemoryAt returns a Memory broker whose claims read the clock now, so that tests can move
// time past a claim's expiry without waiting.
func NewMemoryAt(o MemoryOptions, now func() time.Time) *Memory {
	return newMemory(o, now)
}

// ClaimsHeld reports how many claims m holds and how many entries its expiry queue keeps
// (stale ones included), for tests of the bound.
func (m *Memory) ClaimsHeld() (held, queued int) {
	m.claims.mu.Lock()
	defer m.claims.mu.Unlock()
	return len(m.claims.until), len(m.claims.queue)
}
