package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/callwire/callwire/core/store"
)

// purgeSQL removes one batch of due calls and their events in one statement. The due calls are
// found through calls_started_idx (a call whose last activity is before the cutoff started
// before it too), oldest start first, and locked FOR UPDATE SKIP LOCKED: a call a write holds
// now is left for a later batch, and a write that reaches a call after this lock waits, then
// finds it gone and creates it anew. The events go in the same statement, whose foreign key
// checks run at its end. Events and calls are removed by their numbers as index conditions of
// the keys (org_id, call_no, dedupe_key) and (org_id, call_no), so a batch reads only its own
// rows, however many calls the organization has.
const purgeSQL = `
WITH due AS (
	SELECT call_no FROM calls
	WHERE org_id = $1 AND first_at < $2 AND last_at < $2 AND updated_at < $2
	ORDER BY first_at, call_no
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), events_gone AS (
	DELETE FROM call_events
	WHERE org_id = $1 AND call_no = ANY (ARRAY(SELECT call_no FROM due))
	RETURNING 1
), calls_gone AS (
	DELETE FROM calls
	WHERE org_id = $1 AND call_no = ANY (ARRAY(SELECT call_no FROM due))
	RETURNING 1
)
SELECT (SELECT count(*) FROM calls_gone), (SELECT count(*) FROM events_gone)`

// PurgeCalls removes up to limit of the organization's calls whose last activity (the later of
// last_at and updated_at) is before cutoff, with their events, in one transaction.
func (s *Store) PurgeCalls(ctx context.Context, orgID string, cutoff time.Time, limit int) (store.Purged, error) {
	if limit < 1 {
		return store.Purged{}, fmt.Errorf("postgres: purge calls: %w: limit %d is below 1", store.ErrInvalid, limit)
	}
	var calls, events int64
	if err := s.queryRow(ctx, purgeSQL, []any{orgID, cutoff.UTC(), limit}, &calls, &events); err != nil {
		return store.Purged{}, fmt.Errorf("postgres: purge calls: %w", err)
	}
	return store.Purged{Calls: int(calls), Events: int(events)}, nil
}
