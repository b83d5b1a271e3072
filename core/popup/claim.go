package popup

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
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
// A claim is kept as a 64-bit hash of its organization and ringing id, not the two strings. Two
// ringings share a hash with a chance of about 100,000² ÷ 2⁶⁵, below one in three billion with
// the set full, and the cost of that would be one popup not shown.
//
// The set is sized for a server at full load, which holds the limit's 100,000 claims all the
// time: a ring of claims in the order they were made (16 bytes each) and an open-addressed index
// into it (4 bytes a slot, at most two thirds full), about 2.2 MB in all and nothing for the
// collector to follow: under the server's memory limit every megabyte held for claims is a
// megabyte less between collections (decisions.md, "The popup claim set is a ring and an
// open-addressed index").
type claimSet struct {
	ttl   int64 // nanoseconds
	limit int
	now   func() time.Time
	start time.Time // expiries are nanoseconds since start, on the monotonic clock time.Now reads
	seed  maphash.Seed

	mu sync.Mutex
	// ring holds the claims, oldest first from head on, n of them, wrapping at its end. It
	// grows by doubling, up to limit.
	ring    []claimEntry
	head, n int
	// slots indexes ring by key: linear probing from the key's home slot; 0 is an empty slot,
	// anything else a ring position plus one.
	slots []uint32
}

// claimID names one ringing of one organization: the hash of the two.
type claimID uint64

// claimIDStrings is what a claimID hashes.
type claimIDStrings struct{ org, id string }

// claimEntry is one claim.
type claimEntry struct {
	key   claimID
	until int64 // nanoseconds since the set's start
}

func newClaimSet(ttl time.Duration, limit int, now func() time.Time) *claimSet {
	if limit <= 0 {
		limit = DefaultMaxClaims
	}
	// A ring position plus one must fit a slot.
	limit = min(limit, math.MaxUint32-1)
	return &claimSet{ttl: int64(claimTTL(ttl)), limit: limit, now: now, start: now(), seed: maphash.MakeSeed()}
}

// claim takes the ringing id of org and reports true, or reports false when it is held already.
func (c *claimSet) claim(org, id string) bool {
	key := claimID(maphash.Comparable(c.seed, claimIDStrings{org, id}))
	c.mu.Lock()
	defer c.mu.Unlock()
	now := int64(c.now().Sub(c.start))
	for c.n > 0 && c.ring[c.head].until <= now {
		c.pop()
	}
	if _, held := c.find(key); held {
		return false
	}
	if c.n >= c.limit {
		c.pop()
	}
	if c.n == len(c.ring) {
		c.grow()
	}
	pos := (c.head + c.n) % len(c.ring)
	c.ring[pos] = claimEntry{key, now + c.ttl}
	c.n++
	c.index(key, pos)
	return true
}

// index records in the first free slot of key's probe that key's claim is at ring position pos.
func (c *claimSet) index(key claimID, pos int) {
	i := c.home(key)
	for c.slots[i] != 0 {
		i = c.next(i)
	}
	c.slots[i] = uint32(pos) + 1
}

// home returns the slot key's probe starts from.
func (c *claimSet) home(key claimID) int {
	hi, _ := bits.Mul64(uint64(key), uint64(len(c.slots)))
	return int(hi)
}

// next returns the slot probed after i.
func (c *claimSet) next(i int) int {
	if i++; i == len(c.slots) {
		return 0
	}
	return i
}

// find returns the slot that holds key, and whether one does.
func (c *claimSet) find(key claimID) (int, bool) {
	if c.n == 0 {
		return 0, false
	}
	for i := c.home(key); c.slots[i] != 0; i = c.next(i) {
		if c.ring[c.slots[i]-1].key == key {
			return i, true
		}
	}
	return 0, false
}

// pop forgets the oldest claim.
func (c *claimSet) pop() {
	i, _ := c.find(c.ring[c.head].key)
	// Close the gap at i: each later entry of the run that may sit at i (its home is not
	// between i and it, cyclically) moves back into it, leaving its own slot the gap.
	for j := c.next(i); c.slots[j] != 0; j = c.next(j) {
		h := c.home(c.ring[c.slots[j]-1].key)
		if (i <= j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
			c.slots[i] = c.slots[j]
			i = j
		}
	}
	c.slots[i] = 0
	c.ring[c.head] = claimEntry{}
	c.n--
	if c.head++; c.head == len(c.ring) || c.n == 0 {
		c.head = 0
	}
}

// grow doubles the ring, up to limit, and builds the index anew for it.
func (c *claimSet) grow() {
	ring := make([]claimEntry, min(max(2*len(c.ring), 64), c.limit))
	for k := range c.n {
		ring[k] = c.ring[(c.head+k)%len(c.ring)]
	}
	c.ring, c.head = ring, 0
	c.slots = make([]uint32, len(ring)+len(ring)/2+1)
	for k := range c.n {
		c.index(ring[k].key, k)
	}
}

// publishOnceLua returns the script that claims the ringing and, only when the claim is new,
// publishes the popup on each channel: one script, so that no other publisher can come between
// the two and a ring costs one round trip. KEYS[1] is the claim key, ARGV[1] its time to live in milliseconds, ARGV[2] the
// token of this publish (the claim's value), ARGV[3] the popup, ARGV[4] on the channels. It
// returns 1 when it published, 0 for a repeat. A claim that holds this publish's own token is
// not a repeat: the Redis client resends a command whose reply it did not get in time, and the
// first run, whose reply was lost, published.
//
// publish is the command that publishes: PUBLISH on one server, SPUBLISH on a cluster, where
// the claim key and the channels share a slot, so the script runs on the master that serves it.
func publishOnceLua(publish string) string {
	return `
if not redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then
	if redis.call('GET', KEYS[1]) == ARGV[2] then
		return 1
	end
	return 0
end
for i = 4, #ARGV do
	redis.call('` + publish + `', ARGV[i], ARGV[3])
end
return 1
`
}

// claimAndPublish runs publishOnceLua for p, whose JSON form is data, on the channels of its
// locations, claiming with token, which is the publish's own. It reports false for a repeat.
func (r *Redis) claimAndPublish(ctx context.Context, p Popup, data []byte, token string) (bool, error) {
	ttl := claimTTL(r.opts.ClaimTTL)
	args := []any{strconv.FormatInt(max(ttl.Milliseconds(), 1), 10), token, data}
	for _, l := range UniqueLocations(p.Locations) {
		args = append(args, r.names.channel(p.OrgID, l))
	}
	n, err := r.publishOnce.Run(ctx, r.client, []string{r.names.claim(p.OrgID, p.ID)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("popup: publish to redis: %w", err)
	}
	return n == 1, nil
}
