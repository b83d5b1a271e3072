package popup

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// TestClaimSetModel runs long random sequences of claims against a plain model of the set (a map
// of expiries and a list in claim order) and checks that both answer alike after every step, so
// that the index stays true through growth, eviction, expiry and wrapping.
func TestClaimSetModel(t *testing.T) {
	tests := []struct {
		name  string
		limit int
		ids   int           // distinct ringings drawn from
		step  time.Duration // most the clock moves before a claim
	}{
		{"one claim", 1, 3, time.Second},
		{"small, mostly repeats", 5, 8, 10 * time.Second},
		{"bound reached, few expiries", 100, 1000, 100 * time.Millisecond},
		{"expiries reached before the bound", 1000, 400, 2 * time.Second},
		{"grows through several sizes", 5000, 20000, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tt.limit), uint64(tt.ids)))
			now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
			ttl := time.Minute
			c := newClaimSet(ttl, tt.limit, func() time.Time { return now })
			until := map[string]time.Time{}
			var order []string // claims in the order made, oldest first; expired ones dropped
			for i := range 20 * tt.limit {
				now = now.Add(time.Duration(rng.Int64N(int64(tt.step) + 1)))
				id := strconv.Itoa(rng.IntN(tt.ids))
				for len(order) > 0 && !until[order[0]].After(now) {
					delete(until, order[0])
					order = order[1:]
				}
				_, held := until[id]
				if got := c.claim("org", id); got == held {
					t.Fatalf("step %d: claim %s = %v, want %v", i, id, got, !held)
				}
				if !held {
					if len(order) == tt.limit {
						delete(until, order[0])
						order = order[1:]
					}
					until[id] = now.Add(ttl)
					order = append(order, id)
				}
				if c.n != len(order) {
					t.Fatalf("step %d: %d claims held, want %d", i, c.n, len(order))
				}
			}
			if indexed := c.indexed(); indexed != c.n {
				t.Errorf("%d claims indexed, %d held", indexed, c.n)
			}
		})
	}
}

// TestClaimSetSize checks the memory a full set of the default bound keeps: the figure
// docs/decisions.md gives ("The popup claim set is a ring and an open-addressed index").
func TestClaimSetSize(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	c := newClaimSet(0, 0, func() time.Time { return now })
	for i := range DefaultMaxClaims + 10 {
		c.claim("org", strconv.Itoa(i))
	}
	if c.n != DefaultMaxClaims {
		t.Fatalf("%d claims held, want %d", c.n, DefaultMaxClaims)
	}
	bytes := len(c.ring)*16 + len(c.slots)*4
	if bytes > 2_300_000 {
		t.Errorf("a full set keeps %d bytes, want at most 2.3 MB", bytes)
	}
}
