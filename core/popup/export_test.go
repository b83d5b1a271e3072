package popup

import (
	"context"
	"encoding/json"
	"time"
)

// NewMemoryAt returns a Memory broker whose claims read the clock now, so that tests can move
// time past a claim's expiry without waiting.
func NewMemoryAt(o MemoryOptions, now func() time.Time) *Memory {
	return newMemory(o, now)
}

// ClaimsHeld reports how many claims m holds and how many its index holds, for tests of the
// bound; the two differ only if the index has lost or kept a claim it should not.
func (m *Memory) ClaimsHeld() (held, indexed int) {
	m.claims.mu.Lock()
	defer m.claims.mu.Unlock()
	return m.claims.n, m.claims.indexed()
}

// indexed returns how many claims c's index holds. The caller holds c.mu or is c's only user.
func (c *claimSet) indexed() int {
	n := 0
	for _, s := range c.slots {
		if s != 0 {
			n++
		}
	}
	return n
}

// PublishAs runs the claim-and-publish step for p with token as its claim's value, as one publish
// and a resend of it by the Redis client (the same token) or another publish (another) would.
// It reports false for a repeat.
func (r *Redis) PublishAs(ctx context.Context, p Popup, token string) (bool, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return false, err
	}
	return r.claimAndPublish(ctx, p, data, token)
}
