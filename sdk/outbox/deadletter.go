package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/callwire/callwire/sdk/event"
)

// Dead letters: an event the core refused for good leaves the outbox for the dead-letter file, a
// JSON Lines file synced before the event is deleted, where an operator reads what was refused
// and why.

// Reason is the server's answer that made an event a dead letter.
type Reason struct {
	// Status is the HTTP status, such as 400.
	Status int
	// Code is the server's "error" field, such as "400 Bad Request".
	Code string
	// Message is the server's explanation.
	Message string
	// TraceID is the X-Trace-ID of the response.
	TraceID string
}

// deadLine is one line of the dead-letter file.
type deadLine struct {
	DeadAt   time.Time       `json:"deadAt"`
	Source   string          `json:"translator"`
	OutboxID int64           `json:"outboxId"`
	QueuedAt time.Time       `json:"queuedAt"`
	Status   int             `json:"status"`
	Error    string          `json:"error"`
	Message  string          `json:"message"`
	TraceID  string          `json:"traceId"`
	Event    json.RawMessage `json:"event"`
}

// DeadLetter moves the given events out of the outbox because the server refused them for good:
// it appends one JSON line per event to the dead-letter file (the event as stored, the server's
// status, error, message and trace id, the source and the times) and syncs it, then moves the
// events to the dead-letter table in one transaction. It returns only once both are on disk.
// A crash between the two leaves the events in the outbox, so a line may be written twice, but an
// event is never lost. Ids no longer in the outbox are ignored.
func (o *Outbox) DeadLetter(ctx context.Context, ids []int64, r Reason) error {
	if len(ids) == 0 {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return fmt.Errorf("outbox: dead letter: %w", ErrClosed)
	}
	now := time.Now().UTC()
	var items []Item
	for _, id := range ids {
		rows, err := o.db.QueryContext(ctx, `SELECT `+itemColumns+` FROM outbox WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("outbox: dead letter: %w", err)
		}
		for rows.Next() {
			it, err := scanItem(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("outbox: dead letter: %w", err)
			}
			items = append(items, it)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("outbox: dead letter: %w", err)
		}
	}
	if len(items) == 0 {
		o.unlease(ids)
		return nil
	}
	var buf []byte
	for _, it := range items {
		line, err := json.Marshal(deadLine{DeadAt: now, Source: it.Source, OutboxID: it.ID, QueuedAt: it.Added,
			Status: r.Status, Error: r.Code, Message: r.Message, TraceID: r.TraceID, Event: json.RawMessage(it.Body)})
		if err != nil {
			return fmt.Errorf("outbox: dead letter: %w", err)
		}
		buf = append(append(buf, line...), '\n')
	}
	if err := appendSync(o.deadPath, buf); err != nil {
		return fmt.Errorf("outbox: dead letter: %w", err)
	}
	err := o.tx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO dead_letter
			(id, source, call_key, type, body, added_at, dead_at, status, code, message, trace_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, it := range items {
			if _, err := st.ExecContext(ctx, it.ID, it.Source, it.CallKey, string(it.Type), it.Body,
				it.Added.UnixNano(), now.UnixNano(), r.Status, r.Code, r.Message, r.TraceID); err != nil {
				return err
			}
		}
		return o.deleteIDs(ctx, tx, ids)
	})
	if err != nil {
		return fmt.Errorf("outbox: dead letter: %w", err)
	}
	o.unlease(ids)
	o.signal()
	return nil
}

// appendSync appends b to the file at path, creating it (mode 0600) when missing, and syncs it.
func appendSync(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	// A write cut short earlier (a full disk) may have left a partial line: start a new one, so
	// that two records never merge.
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			b = append([]byte{'\n'}, b...)
		}
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if created {
		// A new file's name is durable only once its directory is synced.
		if d, err := os.Open(filepath.Dir(path)); err == nil {
			d.Sync()
			d.Close()
		}
	}
	return nil
}

// DeadLetter is one dead-lettered event, as DeadLetters returns it.
type DeadLetter struct {
	Item
	// DeadAt is when it was dead-lettered.
	DeadAt time.Time
	// Reason is the server's answer.
	Reason Reason
}

// DeadLetters returns up to limit dead letters, oldest first, with ids greater than after (0 for
// the first page).
func (o *Outbox) DeadLetters(ctx context.Context, after int64, limit int) ([]DeadLetter, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isClosed {
		return nil, fmt.Errorf("outbox: dead letters: %w", ErrClosed)
	}
	rows, err := o.db.QueryContext(ctx, `SELECT id, source, call_key, type, body, added_at, dead_at, status, code, message, trace_id
		FROM dead_letter WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: dead letters: %w", err)
	}
	defer rows.Close()
	var out []DeadLetter
	for rows.Next() {
		var d DeadLetter
		var typ string
		var added, dead int64
		if err := rows.Scan(&d.ID, &d.Source, &d.CallKey, &typ, &d.Body, &added, &dead,
			&d.Reason.Status, &d.Reason.Code, &d.Reason.Message, &d.Reason.TraceID); err != nil {
			return nil, fmt.Errorf("outbox: dead letters: %w", err)
		}
		d.Type = event.Type(typ)
		d.Added = time.Unix(0, added).UTC()
		d.DeadAt = time.Unix(0, dead).UTC()
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: dead letters: %w", err)
	}
	return out, nil
}
