// Package writeq is the queue in which a store's writes wait to be written in groups, and the
// way its writers take turns at it. Writes queue in arrival order, each waiting for its outcome
// (Await); whoever gets a place to write takes the first write waiting and the later ones that
// the store's rule lets join it within the group's bounds (Take), writes them as the store
// writes a group, and gives each its own outcome. A write whose request ends before a group
// takes it is withdrawn unwritten.
package writeq

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/callwire/callwire/core/store"
)

// Job is one write waiting for its outcome. Make it with NewJob.
type Job struct {
	// Ctx is the context of the request that writes; Write is what it writes.
	Ctx   context.Context
	Write store.Write
	// Res and Err are the outcome: set by the group's writer before Close, read by the write's
	// waiter once Done is closed.
	Res []store.CallResult
	Err error

	done  chan struct{}
	taken bool // a group took the job (under Queue.mu)
}

// NewJob returns the job of writing w for a request whose context is ctx.
func NewJob(ctx context.Context, w store.Write) *Job {
	return &Job{Ctx: ctx, Write: w, done: make(chan struct{})}
}

// Done is closed once the outcome is final.
func (j *Job) Done() <-chan struct{} { return j.done }

// Close makes the outcome in Res and Err final. It is called once.
func (j *Job) Close() { close(j.done) }

// Finish sets the outcome and makes it final.
func (j *Job) Finish(res []store.CallResult, err error) {
	j.Res, j.Err = res, err
	j.Close()
}

// Events returns how many events the job writes.
func (j *Job) Events() int {
	n := 0
	for i := range j.Write.Calls {
		n += len(j.Write.Calls[i].Events)
	}
	return n
}

// Verdict is a rule's answer on a write waiting behind a group's first.
type Verdict int

const (
	// Join takes the write into the group.
	Join Verdict = iota
	// Skip leaves the write in its place and looks at the next one.
	Skip
	// Stop leaves the write and every later one in their places.
	Stop
)

// Rule says whether next, waiting, joins group, the writes taken so far (the first waiting
// first). fits reports whether next's events stay within the group's bound; next is asked
// about only while the group has room for another write.
type Rule func(group []*Job, next *Job, fits bool) Verdict

// Bounds are the most one group holds: Writes writes, and Events events (a first write with
// more goes alone).
type Bounds struct {
	Writes, Events int
}

// Queue holds the writes waiting, in arrival order. The zero value is an empty queue; it is safe
// for concurrent use.
type Queue struct {
	mu   sync.Mutex
	jobs []*Job
}

// Push queues j.
func (q *Queue) Push(j *Job) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
}

// Len returns how many writes wait.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.jobs)
}

// Take removes and returns the first write waiting and every later one that rule lets join it,
// in their order, up to b.Writes writes; nil when none waits. The others keep their places.
func (q *Queue) Take(b Bounds, rule Rule) []*Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) == 0 {
		return nil
	}
	group := []*Job{q.jobs[0]}
	q.jobs[0].taken = true
	events := q.jobs[0].Events()
	kept := q.jobs[:0]
	rest := q.jobs[1:]
	for i, j := range rest {
		v := Stop
		if len(group) < b.Writes {
			e := j.Events()
			v = rule(group, j, events+e <= b.Events)
			if v == Join {
				events += e
			}
		}
		if v == Stop {
			kept = append(kept, rest[i:]...)
			break
		}
		if v == Join {
			group = append(group, j)
			j.taken = true
			continue
		}
		kept = append(kept, j)
	}
	clear(q.jobs[len(kept):])
	q.jobs = kept
	if len(q.jobs) == 0 {
		q.jobs = nil
	}
	return group
}

// Requeue puts jobs, untaken, back at the front of the queue in their order.
func (q *Queue) Requeue(jobs []*Job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range jobs {
		j.taken = false
	}
	q.jobs = append(append([]*Job(nil), jobs...), q.jobs...)
}

// Withdraw removes j and reports true when no group has taken it.
func (q *Queue) Withdraw(j *Job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if j.taken {
		return false
	}
	for i, x := range q.jobs {
		if x == j {
			q.jobs = append(q.jobs[:i], q.jobs[i+1:]...)
			return true
		}
	}
	return false
}

// Taken reports whether a group has taken j.
func (q *Queue) Taken(j *Job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return j.taken
}

// Live returns the jobs of group whose request has not ended, in their order, and finishes each
// of the others with the error that ended returns for it (given its context's error): a group
// writes nothing for a request that has given up.
func Live(group []*Job, ended func(j *Job, err error) error) []*Job {
	live := group[:0:0]
	for _, j := range group {
		if err := j.Ctx.Err(); err != nil {
			j.Finish(nil, ended(j, err))
			continue
		}
		live = append(live, j)
	}
	return live
}

// ErrNoPlace is what Await returns when no group took a write within its patience.
var ErrNoPlace = errors.New("no place to write within the time allowed")

// Await queues j and returns nil once j has its outcome (in j.Res and j.Err), or an error once
// j has been withdrawn unwritten: j.Ctx's error when its request ended first, ErrNoPlace when
// patience (if positive) ran out first. Once a group has taken j it is not withdrawn: Await
// waits for its outcome.
//
// gate holds a place for each writer at work (its capacity is how many may write at once).
// Whichever waiting write finds a place free takes it, calls write to take and write the next
// group (which need not include j), and gives the place back; a write that finds none free
// waits for a place, for its outcome, or for the end of its wait. A write that finds a place
// free and nothing else waiting is written at once, alone.
func (q *Queue) Await(j *Job, gate chan struct{}, write func(), patience time.Duration) error {
	q.Push(j)
	// turn writes a group holding a place and reports whether a group has taken j, whose
	// outcome it then waits for (going on for places while j's outcome is on its way would
	// write others' groups in a loop).
	turn := func() bool {
		write()
		<-gate
		if !q.Taken(j) {
			return false
		}
		<-j.Done()
		return true
	}
	select {
	case gate <- struct{}{}:
		if turn() {
			return nil
		}
	default:
	}
	var expired <-chan time.Time
	if patience > 0 {
		wait := time.NewTimer(patience)
		defer wait.Stop()
		expired = wait.C
	}
	ended := j.Ctx.Done()
	for {
		select {
		case <-j.Done():
			return nil
		case gate <- struct{}{}:
			if turn() {
				return nil
			}
		case <-ended:
			if q.Withdraw(j) {
				return j.Ctx.Err()
			}
			// A group has it and its outcome is on its way, unless the group put it back
			// (Requeue): keep taking places until it is done.
			ended = nil
		case <-expired:
			if q.Withdraw(j) {
				return ErrNoPlace
			}
			expired = nil
		}
	}
}
