package proxy

import (
	"github.com/emiago/sipgo/sip"

	"sync"
	"time"
)

// RFC 3261 timers.
const (
	t1       = 500 * time.Millisecond
	t2       = 4 * time.Second
	timerB   = 64 * t1         // no response from the next hop: give up, answer 408
	lingerUD = 64 * t1         // after a final response over UDP: absorb retransmissions, match the ACK
	lingerTC = 5 * time.Second // the same over TCP, where nothing is retransmitted
	timerC   = 3 * time.Minute // an INVITE with a provisional response but no final one is forgotten
)

// tx is the proxy's state for one forwarded request (a server and a client transaction in one):
// where the answer goes back to, where the request went, and what has happened. Every field is
// guarded by txTable.mu.
type tx struct {
	key      string // the branch the proxy gave the request
	method   string
	up       peer   // where the request came from; responses go back there
	down     peer   // where the request went
	data     []byte // the forwarded request, kept for retransmission until a response arrives
	cancel   []byte // a CANCEL waiting for the first provisional response
	gotResp  bool
	final    int    // the final status relayed upstream, 0 before
	local    bool   // the final response was the proxy's own (408): its ACK ends here
	canceled bool   // the proxy answered a CANCEL for this INVITE (the next hop's 200 to it ends here)
	last     []byte // the last response relayed upstream, for the upstream's retransmissions
	timer    *time.Timer
	life     *time.Timer
	interval time.Duration
	req      *sip.Request // the forwarded request, for the 408 the proxy may answer
	started  time.Time
}

// txTable holds transactions by branch.
type txTable struct {
	mu      sync.Mutex
	m       map[string]*tx
	max     int
	stopped bool
}

func (t *txTable) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	for k, x := range t.m {
		x.stop()
		delete(t.m, k)
	}
}

func (x *tx) stop() {
	if x.timer != nil {
		x.timer.Stop()
	}
	if x.life != nil {
		x.life.Stop()
	}
}

// forgetAfter (with mu held) ends x after d.
func (t *txTable) forgetAfter(x *tx, d time.Duration) {
	if x.life != nil {
		x.life.Stop()
	}
	x.life = time.AfterFunc(d, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.m[x.key] == x {
			delete(t.m, x.key)
		}
		x.stop()
	})
}

func linger(network string) time.Duration {
	if network == "udp" {
		return lingerUD
	}
	return lingerTC
}
