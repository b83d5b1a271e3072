package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/callwire/callwire/core/store"
)

// querier is what the to-call-back upkeep runs its statements on: a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// cbTouch is what a write's insert or update of one call returned toward the to-call-back list:
// the call's row after the write as the list reads it, and the number the write moved it from.
type cbTouch struct {
	// number is the number the call counts toward now, "" for none.
	number string
	// movedFrom is the number the call counted toward before this write moved it, "" for none.
	movedFrom string
	inbound   bool
	state     store.State
	flags     store.Flags
	// hasItem is true when number has an item the call may change (see hasItemSQL).
	hasItem bool
}

// scanDest returns the destinations for what updateCallSQL returns after the clients.
func (t *cbTouch) scanDest() []any {
	return []any{nullText{&t.number}, nullText{&t.movedFrom}, dirCol{&t.inbound}, (*int16)(&t.state),
		(*int16)(&t.flags), &t.hasItem}
}

// missed reports whether the call counts as a miss: an ended inbound call nobody took.
func (t *cbTouch) missed() bool {
	return t.inbound && t.state >= store.StateEnded &&
		(t.flags&store.FlagAnswered == 0 || t.flags&store.FlagVoicemail != 0)
}

// upkeepCallbacks brings the to-call-back items that the write's calls may have changed up to
// date, in the write's transaction, from what the calls' upserts returned (touches, by the
// write's call index): it recomputes (store.CallbackOf over the number's calls and dismissals)
// the item of a number a call was moved from, and of the number a call counts toward when the
// call is a miss or may change that number's item (hasItemSQL). Every number with a miss on
// file has an item, because a miss always recomputes; so a number skipped has either no miss
// (and no item to change) or an item closed before the call started, which a call that does
// not miss leaves as it is. Most writes recompute nothing and run no statement here. It sets
// CallbacksChanged in results for the calls whose numbers it recomputed.
func upkeepCallbacks(ctx context.Context, q querier, orgID string, touches []cbTouch, results []store.CallResult) error {
	var numbers []string
	for i := range touches {
		t := &touches[i]
		if t.movedFrom != "" {
			numbers = append(numbers, t.movedFrom)
			results[i].CallbacksChanged = true
		}
		if t.number != "" && (t.hasItem || t.missed()) {
			numbers = append(numbers, t.number)
			results[i].CallbacksChanged = true
		}
	}
	if len(numbers) == 0 {
		return nil
	}
	var needsAnswer bool
	if err := q.QueryRowContext(ctx, `SELECT callback_needs_answer FROM orgs WHERE org_id = ?`, orgID).Scan(&needsAnswer); err != nil {
		return fmt.Errorf("callbacks: read setting: %w", err)
	}
	slices.Sort(numbers)
	for _, n := range slices.Compact(numbers) {
		if err := recomputeCallback(ctx, q, orgID, n, needsAnswer, false); err != nil {
			return err
		}
	}
	return nil
}

// numberCallsSQL reads the calls that count toward a number (?1 the organization, ?2 the
// number, ?3 its store.NumberKey) through the indexes the call history has anyway, so that a
// call adds no index entry of its own for the list: a number of an e164 party has the party's
// key (calls_from_idx for an inbound call's caller, calls_to_idx for an outbound or internal
// call's callee); the text of an unknown party, whose key is "", is found through
// calls_cb_text_idx, which holds only such calls (migration 8). withKey is false for a number
// without digits, which only the last can hold.
func numberCallsSQL(withKey bool) string {
	const cols = `SELECT call_id, direction, state, first_at, clients, ` + summaryColumns + ` FROM calls `
	q := cols + `WHERE org_id = ?1 AND cb_number = ?2 AND ` + cbTextSQL
	if withKey {
		q += ` UNION ALL ` + cols + `WHERE org_id = ?1 AND from_key = ?3 AND direction = 'inbound' AND cb_number = ?2` +
			` UNION ALL ` + cols + `WHERE org_id = ?1 AND to_key = ?3 AND direction <> 'inbound' AND cb_number = ?2`
	}
	return q
}

// cbTextSQL is the condition of calls_cb_text_idx (migration 8), written as the index has it so
// that SQLite uses the index: the call counts toward the text of a party without a number.
const cbTextSQL = `CASE WHEN direction = 'inbound' THEN from_key ELSE to_key END = ''`

// recomputeCallback rewrites number's item from its calls and dismissals: three statements.
// When CallbackOf gives no item (none of the number's calls on file is a miss), an item closed
// as expired stays as it is; an open item closes as expired when purged is true (its misses
// were removed by retention); any other item is removed, since the calls it rested on now
// count toward another number.
func recomputeCallback(ctx context.Context, q querier, orgID, number string, needsAnswer, purged bool) error {
	rows, err := q.QueryContext(ctx, numberCallsSQL(store.NumberKey(number) != ""), orgID, number, store.NumberKey(number))
	if err != nil {
		return fmt.Errorf("callbacks: read calls: %w", err)
	}
	calls, err := collect(rows, func(r interface{ Scan(...any) error }) (store.CallbackCall, error) {
		var (
			c     store.Call
			state int64
			m     summaryScan
		)
		dest := append([]any{&c.ID, &c.Direction, &state, timeCol{&c.FirstAt}, jsonCol{(*[]byte)(&c.Clients)}}, m.dest()...)
		if err := r.Scan(dest...); err != nil {
			return store.CallbackCall{}, err
		}
		c.State, c.Summary = store.State(state), m.summary()
		return store.CallbackCallOf(c), nil
	})
	if err != nil {
		return fmt.Errorf("callbacks: read calls: %w", err)
	}
	rows, err = q.QueryContext(ctx, `SELECT at, extension FROM callback_dismissals WHERE org_id = ? AND number = ?`, orgID, number)
	if err != nil {
		return fmt.Errorf("callbacks: read dismissals: %w", err)
	}
	dismissals, err := collect(rows, func(r interface{ Scan(...any) error }) (store.CallbackDismissal, error) {
		var d store.CallbackDismissal
		return d, r.Scan(timeCol{&d.At}, &d.Extension)
	})
	if err != nil {
		return fmt.Errorf("callbacks: read dismissals: %w", err)
	}
	cb, ok := store.CallbackOf(number, calls, dismissals, needsAnswer)
	if !ok {
		stmt := `DELETE FROM callbacks WHERE org_id = ? AND number = ? AND closed_reason <> '` + store.CallbackExpired + `'`
		args := []any{orgID, number}
		if purged {
			stmt = `UPDATE callbacks SET open = 0, closed_at = ?, closed_reason = '` + store.CallbackExpired + `',
				closed_call_id = '', closed_ext = '' WHERE org_id = ? AND number = ? AND open`
			args = []any{encTime(time.Now()), orgID, number}
		}
		if _, err := q.ExecContext(ctx, stmt, args...); err != nil {
			return fmt.Errorf("callbacks: remove item: %w", err)
		}
		return nil
	}
	locs, err := json.Marshal(cb.Locations)
	if err != nil {
		return fmt.Errorf("callbacks: locations: %w", err)
	}
	var reason, closedCall, closedExt string
	if cb.ClosedBy != nil {
		reason, closedCall, closedExt = cb.ClosedBy.Reason, cb.ClosedBy.CallID, cb.ClosedBy.Extension
	}
	_, err = q.ExecContext(ctx, `INSERT INTO callbacks (org_id, number, name, open, missed_count, first_missed_at,
			last_missed_at, last_call_id, locations, voicemail, closed_at, closed_reason, closed_call_id, closed_ext)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (org_id, number) DO UPDATE SET name = excluded.name, open = excluded.open,
			missed_count = excluded.missed_count, first_missed_at = excluded.first_missed_at,
			last_missed_at = excluded.last_missed_at, last_call_id = excluded.last_call_id,
			locations = excluded.locations, voicemail = excluded.voicemail, closed_at = excluded.closed_at,
			closed_reason = excluded.closed_reason, closed_call_id = excluded.closed_call_id,
			closed_ext = excluded.closed_ext`,
		orgID, number, cb.Name, cb.Open, cb.MissedCount, encTime(cb.FirstMissedAt), encTime(cb.LastMissedAt),
		cb.LastCallID, string(locs), cb.Voicemail, encZeroNull(cb.ClosedAt), reason, closedCall, closedExt)
	if err != nil {
		return fmt.Errorf("callbacks: write item: %w", err)
	}
	return nil
}

// callbackColumns are the columns scanCallback reads, in its order.
const callbackColumns = `number, name, open, missed_count, first_missed_at, last_missed_at, last_call_id, locations,
	voicemail, closed_at, closed_reason, closed_call_id, closed_ext`

// scanCallback reads one row of callbackColumns.
func scanCallback(r interface{ Scan(...any) error }) (store.Callback, error) {
	var (
		cb                          store.Callback
		locs                        []byte
		closedAt                    *time.Time
		reason, closedCall, closedE string
	)
	err := r.Scan(&cb.Number, &cb.Name, &cb.Open, &cb.MissedCount, timeCol{&cb.FirstMissedAt},
		timeCol{&cb.LastMissedAt}, &cb.LastCallID, jsonCol{&locs}, &cb.Voicemail, timePtrCol{&closedAt},
		&reason, &closedCall, &closedE)
	if err != nil {
		return store.Callback{}, err
	}
	if err := json.Unmarshal(locs, &cb.Locations); err != nil {
		return store.Callback{}, fmt.Errorf("stored locations: %w", err)
	}
	if closedAt != nil {
		cb.ClosedAt = *closedAt
	}
	if reason != "" {
		cb.ClosedBy = &store.CallbackClose{Reason: reason, CallID: closedCall, Extension: closedE}
	}
	return cb, nil
}

// ListCallbacks implements store.CallbackStore: one walk of callbacks_list_idx.
func (s *Store) ListCallbacks(ctx context.Context, orgID string, f store.CallbackFilter, after *store.CallbackPosition, limit int) ([]store.Callback, error) {
	if limit < 1 || limit > store.MaxCallbackLimit {
		return nil, fmt.Errorf("sqlite: list callbacks: %w: limit %d is not 1 to %d", store.ErrInvalid, limit, store.MaxCallbackLimit)
	}
	var b strings.Builder
	b.WriteString(`SELECT ` + callbackColumns + ` FROM callbacks WHERE org_id = ? AND open = ?`)
	args := []any{orgID, f.Open}
	if after != nil {
		b.WriteString(` AND (last_missed_at, number) < (?, ?)`)
		args = append(args, encTime(after.LastMissedAt), after.Number)
	}
	if f.Location != "" {
		b.WriteString(` AND EXISTS (SELECT 1 FROM json_each(locations) WHERE value = ?)`)
		args = append(args, f.Location)
	}
	b.WriteString(` ORDER BY last_missed_at DESC, number DESC LIMIT ?`)
	args = append(args, limit)
	rows, err := s.reader.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, wrapErr(ctx, "list callbacks", err)
	}
	out, err := collect(rows, scanCallback)
	if err != nil {
		return nil, wrapErr(ctx, "list callbacks", err)
	}
	if out == nil {
		out = []store.Callback{}
	}
	return out, nil
}

// DismissCallback implements store.CallbackStore.
func (s *Store) DismissCallback(ctx context.Context, orgID, number string, at time.Time, extension string) (store.Callback, error) {
	var cb store.Callback
	err := s.withWriteTx(ctx, "dismiss callback", func(tx *sql.Tx) error {
		var open bool
		err := tx.QueryRowContext(ctx, `SELECT open FROM callbacks WHERE org_id = ? AND number = ?`, orgID, number).Scan(&open)
		if err == sql.ErrNoRows || (err == nil && !open) {
			return fmt.Errorf("no open item for %q: %w", number, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO callback_dismissals (org_id, number, at, extension) VALUES (?, ?, ?, ?)`,
			orgID, number, encTime(at), extension); err != nil {
			return err
		}
		var needsAnswer bool
		if err := tx.QueryRowContext(ctx, `SELECT callback_needs_answer FROM orgs WHERE org_id = ?`, orgID).Scan(&needsAnswer); err != nil {
			return err
		}
		if err := recomputeCallback(ctx, tx, orgID, number, needsAnswer, false); err != nil {
			return err
		}
		cb, err = scanCallback(tx.QueryRowContext(ctx, `SELECT `+callbackColumns+` FROM callbacks WHERE org_id = ? AND number = ?`, orgID, number))
		return err
	})
	return cb, err
}

// CallbackNeedsAnswer implements store.CallbackStore.
func (s *Store) CallbackNeedsAnswer(ctx context.Context, orgID string) (bool, error) {
	var v bool
	err := s.reader.QueryRowContext(ctx, `SELECT callback_needs_answer FROM orgs WHERE org_id = ?`, orgID).Scan(&v)
	if err == sql.ErrNoRows {
		return false, fmt.Errorf("sqlite: callback setting: org %q: %w", orgID, store.ErrNotFound)
	}
	return v, wrapErr(ctx, "callback setting", err)
}

// SetCallbackNeedsAnswer implements store.CallbackStore: it recomputes each item of the
// organization, three statements per number on its list.
func (s *Store) SetCallbackNeedsAnswer(ctx context.Context, orgID string, needsAnswer bool) error {
	return s.withWriteTx(ctx, "set callback setting", func(tx *sql.Tx) error {
		if err := updateOrg(ctx, tx, orgID, `UPDATE orgs SET callback_needs_answer = ? WHERE org_id = ?`, needsAnswer, orgID); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT number FROM callbacks WHERE org_id = ? ORDER BY number`, orgID)
		if err != nil {
			return err
		}
		numbers, err := collect(rows, func(r interface{ Scan(...any) error }) (string, error) {
			var n string
			return n, r.Scan(&n)
		})
		if err != nil {
			return err
		}
		for _, n := range numbers {
			if err := recomputeCallback(ctx, tx, orgID, n, needsAnswer, false); err != nil {
				return err
			}
		}
		return nil
	})
}
