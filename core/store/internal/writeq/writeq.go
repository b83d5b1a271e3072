// Package writeq is the queue in which a store's writes wait to be written in groups. Writes
// queue in arrival order, each waiting for its outcome; whoever gets to write takes the first
// write waiting and the later ones a rule lets join it, writes them, and gives each its outcome.
// A write whose request ends before a group takes it can be withdrawn unwritten.
package writeq

import (
	"context"
	"sync"

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
// first).
type Rule func(group []*Job, next *Job) Verdict

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
// in their order; nil when none waits. The others keep their places.
func (q *Queue) Take(rule Rule) []*Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) == 0 {
		return nil
	}
	group := []*Job{q.jobs[0]}
	q.jobs[0].taken = true
	kept := q.jobs[:0]
	rest := q.jobs[1:]
	for i, j := range rest {
		v := rule(group, j)
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
