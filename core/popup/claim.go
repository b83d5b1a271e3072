package popup

import (
	"context"
	"fmt"
	"hash/maphash"
	"strconv"
	"sync"
	"time"
)

// A ringing is published once: each broker claims (organization, popup id) as it publishes, and
// a popup whose claim is held already is a repeat (ErrRepeat), delivered to nobody. The claim and
// the publish are one step, so a publish that fails before it is done claims nothing and a retry
// can still ring the desks (see docs/popup.md, "Once per ringing").

// DefaultClaimTTL is how long a published ringing stays claimed when the broker's options name
// no other: longer than a phone rings, and than a reporter's retries of one report take.
const DefaultClaimTTL = 5 * time.Minute

// DefaultMaxClaims is how many claims the in-process broker holds at most when its options name
// no other. Past it, the oldest claim is forgotten early.
const DefaultMaxClaims = 100_000

// ClaimKey is the Redis key that claims the ringing popupID of orgID.
func ClaimKey(orgID, popupID string) string {
	return "callwire:popups:claim:" + orgID + ":" + popupID
}

// claimTTL returns ttl, or DefaultClaimTTL when ttl is zero or less.
func claimTTL(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return DefaultClaimTTL
	}
	return ttl
}

// claimSet is the in-process broker's claims: each held until its expiry, and at most limit of
// them. Every claim lives equally long, so claims expire in the order they were made and one
// queue serves both expiry and eviction. It is safe for concurrent use.
//
// A claim is kept as a 64-bit hash of its organization and ringing id, not the two strings: a
// server at full load holds the limit's 100,000 claims, which as strings weighed about 25 MB
// (and as much again in the garbage collector's headroom), and as hashes weigh about 5. Two
// ringings share a hash with a chance of about 100,000² ÷ 2⁶⁵, below one in three billion
// with the set full, and the cost of that would be one popup not shown.
type claimSet struct {
	ttl   time.Duration
	limit int
	now   func() time.Time
	seed  maphash.Seed

	mu    sync.Mutex
	until map[claimID]int64 // expiry, Unix nanoseconds (no pointer for the collector to follow)
	queue []queuedClaim     // oldest first, from head on
	head  int
}

// claimID names one ringing of one organization: the hash of the two.
type claimID uint64

// claimIDStrings is what a claimID hashes.
type claimIDStrings struct{ org, id string }

// queuedClaim is a claim as made; a claim made again after it expired is queued again, and its
// earlier entry is then stale (its expiry no longer the one in until).
type queuedClaim struct {
	key   claimID
	until int64 // Unix nanoseconds
}

func newClaimSet(ttl time.Duration, limit int, now func() time.Time) *claimSet {
	if limit <= 0 {
		limit = DefaultMaxClaims
	}
	return &claimSet{ttl: claimTTL(ttl), limit: limit, now: now, seed: maphash.MakeSeed(), until: map[claimID]int64{}}
}

// claim takes the ringing id of org and reports true, or reports false when it is held already.
func (c *claimSet) claim(org, id string) bool {
	now := c.now().UnixNano()
	key := claimID(maphash.Comparable(c.seed, claimIDStrings{org, id}))
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.head < len(c.queue) && c.queue[c.head].until <= now {
		c.pop()
	}
	if until, held := c.until[key]; held && until > now {
		return false
	}
	for len(c.until) >= c.limit && c.head < len(c.queue) {
		c.pop()
	}
	until := now + int64(c.ttl)
	c.until[key] = until
	c.queue = append(c.queue, queuedClaim{key, until})
	return true
}

// pop forgets the oldest queued claim, unless it was made again since.
func (c *claimSet) pop() {
	q := c.queue[c.head]
	c.queue[c.head] = queuedClaim{}
	c.head++
	if c.until[q.key] == q.until {
		delete(c.until, q.key)
	}
	if c.head > 1024 && c.head*2 > len(c.queue) {
		c.queue = append([]queuedClaim(nil), c.queue[c.head:]...)
		c.head = 0
	}
}

// publishOnceLua claims the ringing and, only when the claim is new, publishes the popup on each
// channel: one script, so that no other publisher can come between the two and a ring costs one
// round trip. KEYS[1] is the claim key, ARGV[1] its time to live in milliseconds, ARGV[2] the
// token of this publish (the claim's value), ARGV[3] the popup, ARGV[4] on the channels. It
// returns 1 when it published, 0 for a repeat. A claim that holds this publish's own token is
// not a repeat: the Redis client resends a command whose reply it did not get in time, and the
// first run, whose reply was lost, published.
const publishOnceLua = `
if not redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then
	if redis.call('GET', KEYS[1]) == ARGV[2] then
		return 1
	end
	return 0
end
for i = 4, #ARGV do
	redis.call('PUBLISH', ARGV[i], ARGV[3])
end
return 1
`

// claimAndPublish runs publishOnceLua for p, whose JSON form is data, on the channels of its
// locations, claiming with token, which is the publish's own. It reports false for a repeat.
func (r *Redis) claimAndPublish(ctx context.Context, p Popup, data []byte, token string) (bool, error) {
	ttl := claimTTL(r.opts.ClaimTTL)
	args := []any{strconv.FormatInt(max(ttl.Milliseconds(), 1), 10), token, data}
	for _, l := range UniqueLocations(p.Locations) {
		args = append(args, Channel(p.OrgID, l))
	}
	n, err := r.publishOnce.Run(ctx, r.client, []string{ClaimKey(p.OrgID, p.ID)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("popup: publish to redis: %w", err)
	}
	return n == 1, nil
}
