package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/store"
)

// dueCallsSQL locks one batch of due calls and returns their numbers. The due calls are found
// through calls_started_idx (a call whose last activity is before the cutoff started before it
// too), oldest start first, and locked FOR UPDATE SKIP LOCKED: a call a write holds now is left
// for a later batch, and a write that reaches a call after this lock waits, then finds it gone
// and creates it anew.
const dueCallsSQL = `
SELECT call_no FROM calls
WHERE org_id = $1 AND first_at < $2 AND last_at < $2 AND updated_at < $2
ORDER BY first_at, call_no
LIMIT $3
FOR UPDATE SKIP LOCKED`

// purgeSQL removes the calls numbered $2 and their events, and returns the counts and the
// to-call-back numbers of the calls it removed. It runs after dueCallsSQL, as a statement of its
// own: its snapshot is taken once the calls are locked, so it sees, and removes, every event a
// write added to them before the lock (a write adds events to a call only while it holds the
// call's row). In the locking statement's snapshot such events would be missing, and the calls'
// removal would break their reference. Events and calls are removed by their numbers as index
// conditions of the keys (org_id, call_no, dedupe_key) and (org_id, call_no), so a batch reads
// only its own rows, however many calls the organization has.
const purgeSQL = `
WITH events_gone AS (
	DELETE FROM call_events
	WHERE org_id = $1 AND call_no = ANY ($2)
	RETURNING 1
), calls_gone AS (
	DELETE FROM calls
	WHERE org_id = $1 AND call_no = ANY ($2)
	RETURNING cb_number
)
SELECT (SELECT count(*) FROM calls_gone), (SELECT count(*) FROM events_gone),
	ARRAY(SELECT DISTINCT cb_number FROM calls_gone WHERE cb_number IS NOT NULL)`

// PurgeCalls removes up to limit of the organization's calls whose last activity (the later of
// last_at and updated_at) is before cutoff, with their events, in one transaction of two
// statements (dueCallsSQL, purgeSQL), which also
// recomputes the to-call-back items of the removed calls' numbers (an open one whose misses are
// all gone closes as expired).
func (s *Store) PurgeCalls(ctx context.Context, orgID string, cutoff time.Time, limit int) (store.Purged, error) {
	if limit < 1 {
		return store.Purged{}, fmt.Errorf("postgres: purge calls: %w: limit %d is below 1", store.ErrInvalid, limit)
	}
	var calls, events int64
	err := s.callbackTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, dueCallsSQL, orgID, cutoff.UTC(), limit)
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(due) == 0 {
			return err
		}
		var numbers []string
		if err := tx.QueryRow(ctx, purgeSQL, orgID, due).Scan(&calls, &events, &numbers); err != nil {
			return err
		}
		if len(numbers) == 0 {
			return nil
		}
		_, err = recomputeIn(ctx, tx, orgID, numbers, true)
		return err
	})
	if err != nil {
		return store.Purged{}, fmt.Errorf("postgres: purge calls: %w", err)
	}
	return store.Purged{Calls: int(calls), Events: int(events)}, nil
}
