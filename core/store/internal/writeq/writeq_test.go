package writeq

import (
	"slices"
	"strings"
	"testing"

	"github.com/callwire/callwire/core/store"
)

// roomy returns bounds no test queue reaches.
func roomy() Bounds { return Bounds{Writes: 1 << 20, Events: 1 << 20} }

// queue pushes a job per name (its organization) and returns them.
func queue(t *testing.T, q *Queue, names string) []*Job {
	var jobs []*Job
	for _, n := range strings.Split(names, " ") {
		j := NewJob(t.Context(), store.Write{OrgID: n})
		jobs = append(jobs, j)
		q.Push(j)
	}
	return jobs
}

func names(jobs []*Job) string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Write.OrgID)
	}
	return strings.Join(out, " ")
}

// waiting returns the names of jobs not taken, in their order.
func waiting(q *Queue, jobs []*Job) string {
	var left []*Job
	for _, j := range jobs {
		if !q.Taken(j) {
			left = append(left, j)
		}
	}
	return names(left)
}

// TestTake checks that a group is the first write waiting and those the rule joins, in order,
// that skipped writes keep their places, and that Stop keeps every later write.
func TestTake(t *testing.T) {
	// rule joins writes named "j", skips "s" and stops at "x"; it sees the group so far.
	rule := func(group []*Job, next *Job, _ bool) Verdict {
		switch next.Write.OrgID[0] {
		case 'j':
			return Join
		case 's':
			return Skip
		}
		return Stop
	}
	for _, tc := range []struct{ queue, group, left string }{
		{"a", "a", ""},
		{"a j1 s1 j2", "a j1 j2", "s1"},
		{"a s1 j1 x1 j2 s2", "a j1", "s1 x1 j2 s2"},
		{"x0 x1 j1", "x0", "x1 j1"},
	} {
		var q Queue
		jobs := queue(t, &q, tc.queue)
		if got := names(q.Take(roomy(), rule)); got != tc.group {
			t.Errorf("%q: group %q, want %q", tc.queue, got, tc.group)
		}
		if got := waiting(&q, jobs); got != tc.left || q.Len() != len(strings.Fields(tc.left)) {
			t.Errorf("%q: left %q (%d), want %q", tc.queue, got, q.Len(), tc.left)
		}
		// What was left is the next group's, in its order.
		var rest []*Job
		for q.Len() > 0 {
			rest = append(rest, q.Take(roomy(), func([]*Job, *Job, bool) Verdict { return Stop })...)
		}
		if got := names(rest); got != tc.left {
			t.Errorf("%q: left in the order %q, want %q", tc.queue, got, tc.left)
		}
	}
	var q Queue
	if g := q.Take(roomy(), rule); g != nil {
		t.Errorf("an empty queue gave %d writes", len(g))
	}
}

// TestWithdrawAndRequeue: a write no group has taken can be withdrawn, one taken cannot; writes
// put back go first, untaken.
func TestWithdrawAndRequeue(t *testing.T) {
	var q Queue
	jobs := queue(t, &q, "a b c d")
	if !q.Withdraw(jobs[2]) || q.Withdraw(jobs[2]) {
		t.Error("withdrawing a waiting write twice: want true, then false")
	}
	group := q.Take(roomy(), func(g []*Job, _ *Job, _ bool) Verdict {
		if len(g) < 2 {
			return Join
		}
		return Stop
	})
	if names(group) != "a b" || q.Withdraw(jobs[0]) {
		t.Errorf("group %q; a taken write must not be withdrawn", names(group))
	}
	q.Requeue(group[1:])
	if q.Taken(jobs[1]) || !slices.Equal(q.jobs, []*Job{jobs[1], jobs[3]}) {
		t.Errorf("after putting b back: waiting %q, b taken %v", names(q.jobs), q.Taken(jobs[1]))
	}
	jobs[1].Finish(nil, nil)
	select {
	case <-jobs[1].Done():
	default:
		t.Error("Done not closed after Finish")
	}
}
