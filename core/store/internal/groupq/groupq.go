// Package groupq is the queue in which a store's operations (its writes, PostgreSQL's ring
// reads) wait to be run in groups. Operations queue in arrival order, each waiting for its
// outcome; whoever gets to run takes the first operation waiting and the later ones a rule lets
// join it, runs them, and gives each its outcome. An operation whose request ends before a group
// takes it can be withdrawn, not run.
package groupq

import (
	"context"
	"sync"
)

// Job is one operation waiting for its outcome: In is what it asks, Out what it gets. Make it
// with NewJob.
type Job[In, Out any] struct {
	// Ctx is the context of the request the operation is for; In is the operation.
	Ctx context.Context
	In  In
	// Out and Err are the outcome: set by whoever runs the group before Close, read by the
	// operation's waiter once Done is closed.
	Out Out
	Err error

	done  chan struct{}
	taken bool // a group took the job (under Queue.mu)
}

// NewJob returns the job of running in for a request whose context is ctx.
func NewJob[In, Out any](ctx context.Context, in In) *Job[In, Out] {
	return &Job[In, Out]{Ctx: ctx, In: in, done: make(chan struct{})}
}

// Done is closed once the outcome is final.
func (j *Job[In, Out]) Done() <-chan struct{} { return j.done }

// Close makes the outcome in Res and Err final. It is called once.
func (j *Job[In, Out]) Close() { close(j.done) }

// Finish sets the outcome and makes it final.
func (j *Job[In, Out]) Finish(out Out, err error) {
	j.Out, j.Err = out, err
	j.Close()
}

// Verdict is a rule's answer on an operation waiting behind a group's first.
type Verdict int

const (
	// Join takes the operation into the group.
	Join Verdict = iota
	// Skip leaves the operation in its place and looks at the next one.
	Skip
	// Stop leaves the operation and every later one in their places.
	Stop
)

// Rule says whether next, waiting, joins group, the operations taken so far (the first waiting
// first).
type Rule[In, Out any] func(group []*Job[In, Out], next *Job[In, Out]) Verdict

// Queue holds the operations waiting, in arrival order. The zero value is an empty queue; it is
// safe for concurrent use.
type Queue[In, Out any] struct {
	mu   sync.Mutex
	jobs []*Job[In, Out]
}

// Push queues j.
func (q *Queue[In, Out]) Push(j *Job[In, Out]) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
}

// Len returns how many operations wait.
func (q *Queue[In, Out]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.jobs)
}

// Take removes and returns the first operation waiting and every later one that rule lets join
// it, in their order; nil when none waits. The others keep their places.
func (q *Queue[In, Out]) Take(rule Rule[In, Out]) []*Job[In, Out] {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.jobs) == 0 {
		return nil
	}
	group := []*Job[In, Out]{q.jobs[0]}
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
func (q *Queue[In, Out]) Requeue(jobs []*Job[In, Out]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, j := range jobs {
		j.taken = false
	}
	q.jobs = append(append([]*Job[In, Out](nil), jobs...), q.jobs...)
}

// Withdraw removes j and reports true when no group has taken it.
func (q *Queue[In, Out]) Withdraw(j *Job[In, Out]) bool {
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
func (q *Queue[In, Out]) Taken(j *Job[In, Out]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return j.taken
}
