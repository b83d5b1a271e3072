package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/store"
)

// The to-call-back list (store.CallbackStore). A write's statement files each call under its
// number (calls.cb_number) and locks the number's row in callbacks (callbackLockCTE), which says
// whether the number's item must be recomputed; the recompute follows in a transaction of its
// own (recomputeCallbacks), so that the usual write, which changes no item, stays one round
// trip. Reads of the list see an item as of its last recompute.

// recomputeCallbacks brings the items of numbers up to date in one transaction on conn (see
// recomputeIn), retrying a transaction that lost a race.
func recomputeCallbacks(ctx context.Context, conn *pgxpool.Conn, orgID string, numbers []string, purged bool) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := recomputeIn(ctx, tx, orgID, numbers, purged)
			return err
		})
		code := pgCode(err)
		if (code == "40001" || code == "40P01") && attempt < writeAttempts && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return fmt.Errorf("callbacks: %w", err)
		}
		return nil
	}
}

// recomputeIn rewrites, in tx, the item of each of numbers that has a row in callbacks from the
// number's calls and dismissals (store.CallbackOf) under the organization's setting, and
// returns the numbers it rewrote. It locks the rows first, in the order of their numbers, and
// reads the calls in statements that start after: any writer that held a row has committed,
// and its calls are read. A number without a row has had no call that misses or settles, so
// it has no item to rewrite. When CallbackOf gives no item: an item closed as expired stays as
// it is; when purged is true (retention removed the number's calls), an open item closes as
// expired and a closed one stays as it is; any other item becomes a row without an item (its
// calls now count toward another number). Two round trips.
func recomputeIn(ctx context.Context, tx pgx.Tx, orgID string, numbers []string, purged bool) ([]string, error) {
	numbers = slices.Compact(slices.Sorted(slices.Values(numbers)))
	b := &pgx.Batch{}
	b.Queue(`SELECT number, open, closed_reason FROM callbacks WHERE org_id = $1 AND number = ANY ($2)
		ORDER BY number FOR UPDATE`, orgID, numbers)
	b.Queue(`SELECT callback_needs_answer FROM orgs WHERE org_id = $1`, orgID)
	keys := make([]string, 0, len(numbers))
	for _, n := range numbers {
		if k := store.NumberKey(n); k != "" {
			keys = append(keys, k)
		}
	}
	b.Queue(numberCallsSQL, orgID, numbers, keys)
	b.Queue(`SELECT number, at, extension FROM callback_dismissals WHERE org_id = $1 AND number = ANY ($2)`, orgID, numbers)
	br := tx.SendBatch(ctx, b)

	type row struct {
		open   *bool
		reason string
	}
	rows := map[string]row{}
	var (
		number string
		r      row
	)
	rs, _ := br.Query()
	_, err := pgx.ForEachRow(rs, []any{&number, &r.open, &r.reason}, func() error {
		rows[number] = r
		return nil
	})
	var needsAnswer bool
	if err == nil {
		err = br.QueryRow().Scan(&needsAnswer)
	}
	calls := map[string][]store.CallbackCall{}
	if err == nil {
		var (
			c     store.Call
			state int16
			sum   summaryScan
		)
		rs, _ := br.Query()
		_, err = pgx.ForEachRow(rs, append([]any{&number, &c.ID, &c.Direction, &state, &c.FirstAt, rawJSON(&c.Clients)},
			sum.dest()...), func() error {
			cc := c
			cc.State, cc.FirstAt, cc.Summary = store.State(state), utc(c.FirstAt), sum.summary()
			cc.Clients = append([]byte(nil), c.Clients...)
			calls[number] = append(calls[number], store.CallbackCallOf(cc))
			return nil
		})
	}
	dismissals := map[string][]store.CallbackDismissal{}
	if err == nil {
		var d store.CallbackDismissal
		rs, _ := br.Query()
		_, err = pgx.ForEachRow(rs, []any{&number, &d.At, &d.Extension}, func() error {
			dismissals[number] = append(dismissals[number], store.CallbackDismissal{At: utc(d.At), Extension: d.Extension})
			return nil
		})
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}

	var done []string
	b = &pgx.Batch{}
	for _, n := range numbers {
		cur, ok := rows[n]
		if !ok {
			continue
		}
		done = append(done, n)
		cb, ok := store.CallbackOf(n, calls[n], dismissals[n], needsAnswer)
		switch {
		case ok:
			var reason, closedCall, closedExt string
			if cb.ClosedBy != nil {
				reason, closedCall, closedExt = cb.ClosedBy.Reason, cb.ClosedBy.CallID, cb.ClosedBy.Extension
			}
			var closedAt *time.Time
			if !cb.ClosedAt.IsZero() {
				closedAt = &cb.ClosedAt
			}
			b.Queue(`UPDATE callbacks SET pending = false, open = $3, name = $4, missed_count = $5, first_missed_at = $6,
					last_missed_at = $7, last_call_id = $8, locations = $9, voicemail = $10, closed_at = $11,
					closed_reason = $12, closed_call_id = $13, closed_ext = $14
				WHERE org_id = $1 AND number = $2`,
				orgID, n, cb.Open, cb.Name, cb.MissedCount, cb.FirstMissedAt, cb.LastMissedAt, cb.LastCallID,
				cb.Locations, cb.Voicemail, closedAt, reason, closedCall, closedExt)
		case cur.reason == store.CallbackExpired || purged && (cur.open == nil || !*cur.open):
			b.Queue(`UPDATE callbacks SET pending = false WHERE org_id = $1 AND number = $2`, orgID, n)
		case purged:
			b.Queue(`UPDATE callbacks SET pending = false, open = false, closed_at = now(), closed_reason = $3,
					closed_call_id = '', closed_ext = ''
				WHERE org_id = $1 AND number = $2`, orgID, n, store.CallbackExpired)
		default:
			b.Queue(`UPDATE callbacks SET pending = false, open = NULL, name = '', missed_count = 0,
					first_missed_at = NULL, last_missed_at = NULL, last_call_id = '', locations = '{}', voicemail = false,
					closed_at = NULL, closed_reason = '', closed_call_id = '', closed_ext = ''
				WHERE org_id = $1 AND number = $2`, orgID, n)
		}
	}
	if b.Len() > 0 {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return nil, err
		}
	}
	return done, nil
}

// numberCallsSQL reads the calls that count toward any of the numbers $2 ($3 their
// store.NumberKey, those not ""), through the indexes the call history has anyway: the calls of
// an e164 party by its key (calls_from_idx for an inbound call's caller, calls_to_idx for an
// outbound or internal call's callee), and those of a party without a number, whose key is "",
// by its text (calls_cb_text_idx, whose condition is written here as the index has it).
const numberCallsSQL = `
SELECT cb_number, id, direction, state, first_at, clients, ` + summaryColumns + ` FROM calls
WHERE org_id = $1 AND cb_number = ANY ($2) AND CASE WHEN direction = 'inbound' THEN from_key ELSE to_key END = ''
UNION ALL
SELECT cb_number, id, direction, state, first_at, clients, ` + summaryColumns + ` FROM calls
WHERE org_id = $1 AND from_key = ANY ($3) AND direction = 'inbound' AND cb_number = ANY ($2)
UNION ALL
SELECT cb_number, id, direction, state, first_at, clients, ` + summaryColumns + ` FROM calls
WHERE org_id = $1 AND to_key = ANY ($3) AND direction <> 'inbound' AND cb_number = ANY ($2)`

// callbackColumns are the columns scanCallback reads, in its order.
const callbackColumns = `number, name, open, missed_count, first_missed_at, last_missed_at, last_call_id, locations,
	voicemail, closed_at, closed_reason, closed_call_id, closed_ext`

// scanCallback reads one row of callbackColumns of an item (open not NULL).
func scanCallback(r pgx.Row) (store.Callback, error) {
	var (
		cb                         store.Callback
		first, last, closedAt      *time.Time
		reason, closedCall, closed string
	)
	err := r.Scan(&cb.Number, &cb.Name, &cb.Open, &cb.MissedCount, &first, &last, &cb.LastCallID, &cb.Locations,
		&cb.Voicemail, &closedAt, &reason, &closedCall, &closed)
	if err != nil {
		return store.Callback{}, err
	}
	if first != nil {
		cb.FirstMissedAt = first.UTC()
	}
	if last != nil {
		cb.LastMissedAt = last.UTC()
	}
	if closedAt != nil {
		cb.ClosedAt = closedAt.UTC()
	}
	if cb.Locations == nil {
		cb.Locations = []string{}
	}
	if reason != "" {
		cb.ClosedBy = &store.CallbackClose{Reason: reason, CallID: closedCall, Extension: closed}
	}
	return cb, nil
}

// ListCallbacks implements store.CallbackStore: one walk of callbacks_list_idx, on the replica
// when the store has one (replica.go).
func (s *Store) ListCallbacks(ctx context.Context, orgID string, f store.CallbackFilter, after *store.CallbackPosition, limit int) ([]store.Callback, error) {
	if limit < 1 || limit > store.MaxCallbackLimit {
		return nil, fmt.Errorf("postgres: list callbacks: %w: limit %d is not 1 to %d", store.ErrInvalid, limit, store.MaxCallbackLimit)
	}
	var q strings.Builder
	q.WriteString(`SELECT ` + callbackColumns + ` FROM callbacks WHERE org_id = $1 AND open = $2`)
	args := []any{orgID, f.Open}
	if after != nil {
		args = append(args, after.LastMissedAt, after.Number)
		fmt.Fprintf(&q, ` AND (last_missed_at, number) < ($%d, $%d)`, len(args)-1, len(args))
	}
	if f.Location != "" {
		args = append(args, f.Location)
		fmt.Fprintf(&q, ` AND $%d = ANY (locations)`, len(args))
	}
	args = append(args, limit)
	fmt.Fprintf(&q, ` ORDER BY last_missed_at DESC, number DESC LIMIT $%d`, len(args))
	var out []store.Callback
	err := s.read(ctx, readListCallbacks, func(conn *pgxpool.Conn) error {
		rows, _ := conn.Query(ctx, q.String(), args...)
		var err error
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Callback, error) { return scanCallback(r) })
		return classify(ctx, conn, err)
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []store.Callback{}
	}
	return out, nil
}

// DismissCallback implements store.CallbackStore, in one transaction.
func (s *Store) DismissCallback(ctx context.Context, orgID, number string, at time.Time, extension string) (store.Callback, error) {
	var cb store.Callback
	err := s.callbackTx(ctx, func(tx pgx.Tx) error {
		var open *bool
		err := tx.QueryRow(ctx, `SELECT open FROM callbacks WHERE org_id = $1 AND number = $2 FOR UPDATE`, orgID, number).Scan(&open)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && (open == nil || !*open)) {
			return fmt.Errorf("no open item for %q: %w", number, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO callback_dismissals (org_id, number, at, extension) VALUES ($1, $2, $3, $4)`,
			orgID, number, at.UTC(), extension); err != nil {
			return err
		}
		if _, err := recomputeIn(ctx, tx, orgID, []string{number}, false); err != nil {
			return err
		}
		cb, err = scanCallback(tx.QueryRow(ctx, `SELECT `+callbackColumns+` FROM callbacks WHERE org_id = $1 AND number = $2`,
			orgID, number))
		return err
	})
	if err != nil {
		return store.Callback{}, fmt.Errorf("postgres: dismiss callback: %w", err)
	}
	return cb, nil
}

// CallbackNeedsAnswer implements store.CallbackStore.
func (s *Store) CallbackNeedsAnswer(ctx context.Context, orgID string) (bool, error) {
	var v bool
	err := s.queryRow(ctx, `SELECT callback_needs_answer FROM orgs WHERE org_id = $1`, []any{orgID}, &v)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("postgres: callback setting: org %q: %w", orgID, store.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("postgres: callback setting: %w", err)
	}
	return v, nil
}

// SetCallbackNeedsAnswer implements store.CallbackStore: it recomputes every item of the
// organization in the same transaction.
func (s *Store) SetCallbackNeedsAnswer(ctx context.Context, orgID string, needsAnswer bool) error {
	err := s.callbackTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE orgs SET callback_needs_answer = $2 WHERE org_id = $1`, orgID, needsAnswer)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("org %q: %w", orgID, store.ErrNotFound)
		}
		rows, _ := tx.Query(ctx, `SELECT number FROM callbacks WHERE org_id = $1 AND open IS NOT NULL`, orgID)
		numbers, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil || len(numbers) == 0 {
			return err
		}
		_, err = recomputeIn(ctx, tx, orgID, numbers, false)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: set callback setting: %w", err)
	}
	return nil
}

// callbackTx runs fn in a transaction on a connection of the pool, retrying one that lost a
// race; errors are classified.
func (s *Store) callbackTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, conn, fn)
		code := pgCode(err)
		if (code == "40001" || code == "40P01") && attempt < writeAttempts && ctx.Err() == nil {
			continue
		}
		return classify(ctx, conn, err)
	}
}
