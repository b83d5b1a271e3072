package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/callwire/callwire/core/store"
)

// dueCallsSQL selects the numbers of one batch of an organization's due calls, oldest start
// first, through calls_started_idx.
const dueCallsSQL = `SELECT call_no FROM calls
	WHERE org_id = ? AND first_at < ? AND last_at < ? AND updated_at < ?
	ORDER BY first_at, call_no LIMIT ?`

// PurgeCalls removes up to limit of the organization's calls whose last activity (the later of
// last_at and updated_at) is before cutoff, with their events, in one write transaction. It
// takes the single writer like any write, so a write to one of these calls runs wholly before
// it (and the call is no longer due) or wholly after it (and creates the call anew); limit
// bounds how long it holds the writer. The due calls are found through calls_started_idx: a
// call whose last activity is before the cutoff started before it too. The to-call-back items
// of the removed calls' numbers are recomputed in the same transaction; an open one whose
// misses are all gone closes as expired.
func (s *Store) PurgeCalls(ctx context.Context, orgID string, cutoff time.Time, limit int) (store.Purged, error) {
	if limit < 1 {
		return store.Purged{}, fmt.Errorf("sqlite: purge calls: %w: limit %d is below 1", store.ErrInvalid, limit)
	}
	var p store.Purged
	err := s.withWriteTx(ctx, "purge calls", func(tx *sql.Tx) error {
		p = store.Purged{}
		c := encTime(cutoff)
		rows, err := tx.QueryContext(ctx, dueCallsSQL, orgID, c, c, c, limit)
		if err != nil {
			return err
		}
		var nos []int64
		for rows.Next() {
			var no int64
			if err := rows.Scan(&no); err != nil {
				rows.Close()
				return err
			}
			nos = append(nos, no)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(nos) == 0 {
			return nil
		}
		list, err := json.Marshal(nos)
		if err != nil {
			return err
		}
		numbers, err := purgedNumbers(ctx, tx, orgID, string(list))
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM call_events
			WHERE org_id = ? AND call_no IN (SELECT value FROM json_each(?))`, orgID, string(list))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		p.Events = int(n)
		res, err = tx.ExecContext(ctx, `DELETE FROM calls
			WHERE org_id = ? AND call_no IN (SELECT value FROM json_each(?))`, orgID, string(list))
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		p.Calls = int(n)
		if len(numbers) == 0 {
			return nil
		}
		var needsAnswer bool
		if err := tx.QueryRowContext(ctx, `SELECT callback_needs_answer FROM orgs WHERE org_id = ?`, orgID).Scan(&needsAnswer); err != nil {
			return err
		}
		for _, number := range numbers {
			if err := recomputeCallback(ctx, tx, orgID, number, needsAnswer, true); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return store.Purged{}, err
	}
	return p, nil
}

// purgedNumbers returns, sorted, the numbers with a to-call-back item that the calls numbered
// in list (a JSON array) count toward: the items a purge of those calls must recompute.
func purgedNumbers(ctx context.Context, tx *sql.Tx, orgID, list string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT c.cb_number FROM calls c
		JOIN callbacks b ON b.org_id = c.org_id AND b.number = c.cb_number
		WHERE c.org_id = ? AND c.call_no IN (SELECT value FROM json_each(?))
		ORDER BY c.cb_number`, orgID, list)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r interface{ Scan(...any) error }) (string, error) {
		var n string
		return n, r.Scan(&n)
	})
}
