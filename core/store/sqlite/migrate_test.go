package sqlite

import (
	"encoding/json"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/callwire/callwire/core/store"
)

// TestMigrationNumbersCalls fills a store of the schema before calls were numbered (version 2),
// migrates it, and holds the calls and events on file to be what they were: found by key, their
// events in order and deduplicated against, and the ring's read seeing them. Migrated down
// again, the store holds the same rows.
func TestMigrationNumbersCalls(t *testing.T) {
	ctx := t.Context()
	s, p := unmigrated(t)
	if _, err := p.UpTo(ctx, 2); err != nil {
		t.Fatal(err)
	}
	at := encTime(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := s.writer.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO orgs (org_id, name, created_at) VALUES ('org-1', 'clinic', ?), ('org-2', 'other', ?)`, at, at)
	// Two organizations, each a call of the same provider call ID, and a second call: the
	// calls' rowids interleave the organizations.
	calls := []struct{ org, pcid string }{{"org-1", "a@pbx"}, {"org-2", "a@pbx"}, {"org-1", "b@pbx"}}
	for _, c := range calls {
		id := store.CallID(c.org, "sip", c.pcid)
		exec(`INSERT INTO calls (org_id, call_id, provider, provider_call_id, direction, state, block, block_seq,
			block_at, first_at, last_at, clients, created_at, updated_at)
			VALUES (?, ?, 'sip', ?, 'inbound', 3, '{"b":1}', 2, ?, ?, ?, NULL, ?, ?)`, c.org, id, c.pcid, at, at, at, at, at)
		for seq, typ := range []string{"call_received", "call_ended"} {
			exec(`INSERT INTO call_events (org_id, event_id, call_id, type, dedupe_key, sequence, provider_event_id,
				occurred_at, order_at, received_at, body) VALUES (?, ?, ?, ?, ?, ?, '', ?, ?, ?, ?)`,
				c.org, c.org+"/"+c.pcid+"/"+typ, id, typ, typ+"-key", seq+1, at, at, at, `{"type":"`+typ+`"}`)
		}
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}

	for _, c := range calls {
		call, events, err := s.GetCall(ctx, c.org, "sip", c.pcid)
		if err != nil {
			t.Fatalf("%s %s: %v", c.org, c.pcid, err)
		}
		if call.ID != store.CallID(c.org, "sip", c.pcid) || call.State != store.StateEnded || len(events) != 2 ||
			events[0].ID != c.org+"/"+c.pcid+"/call_received" || events[1].ID != c.org+"/"+c.pcid+"/call_ended" {
			t.Errorf("%s %s after the migration: %+v, %+v", c.org, c.pcid, call, events)
		}
		rs, err := s.Ringing(ctx, c.org, []store.EventRef{{Provider: "sip", ProviderCallID: c.pcid, DedupeKey: "call_received-key"}}, nil)
		if err != nil || !rs[0].Known || rs[0].State != store.StateEnded {
			t.Errorf("%s %s: ringing %+v, %v; want known and ended", c.org, c.pcid, rs, err)
		}
	}
	// A resend of a migrated event is a duplicate of it; a new event joins the call.
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	w := store.Write{OrgID: "org-1", ReceivedAt: now, Calls: []store.CallWrite{{
		Provider: "sip", ProviderCallID: "b@pbx", Direction: "inbound", State: store.StateEnded,
		Block: json.RawMessage(`{"b":2}`), BlockSequence: 3, BlockAt: now, FirstAt: now, LastAt: now,
		Events: []store.EventWrite{
			{ID: "resent", Type: "call_ended", DedupeKey: "call_ended-key", Sequence: 2, OccurredAt: now, OrderAt: now, Body: json.RawMessage(`{}`)},
			{ID: "new", Type: "call_recorded", DedupeKey: "call_recorded-key", Sequence: 3, OccurredAt: now, OrderAt: now, Body: json.RawMessage(`{}`)},
		},
	}}}
	rs, err := s.WriteCalls(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if r := rs[0]; r.Created || r.ID != store.CallID("org-1", "sip", "b@pbx") ||
		!r.Events[0].Duplicate || r.Events[0].ID != "org-1/b@pbx/call_ended" || r.Events[1].Duplicate || r.Events[1].ID != "new" {
		t.Errorf("a write to a migrated call: %+v", r)
	}
	if _, events, err := s.GetCall(ctx, "org-1", "sip", "b@pbx"); err != nil || len(events) != 3 {
		t.Errorf("the migrated call after a write: %d events, %v; want 3", len(events), err)
	}

	// Down again: the same rows, in the old tables.
	s.stmts.close()
	s.closeReads()
	foreignKeysOff(t, s) // Migrate turned them on again
	if _, err := p.DownTo(ctx, 2); err != nil {
		t.Fatal(err)
	}
	var nCalls, nEvents, nJoined int
	if err := s.writer.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM calls), (SELECT count(*) FROM call_events),
		(SELECT count(*) FROM call_events e JOIN calls c ON c.org_id = e.org_id AND c.call_id = e.call_id)`).
		Scan(&nCalls, &nEvents, &nJoined); err != nil {
		t.Fatal(err)
	}
	if nCalls != 3 || nEvents != 7 || nJoined != 7 {
		t.Errorf("after migrating down: %d calls, %d events, %d joined to their calls; want 3, 7, 7", nCalls, nEvents, nJoined)
	}
}

// unmigrated opens a store in a new file, without its migrations, and returns it with the
// provider of its migrations, to apply them a version at a time. Foreign keys are off, as
// Migrate runs migrations. The store is closed when the test ends.
func unmigrated(t *testing.T) (*Store, *goose.Provider) {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "old.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.writer, sub)
	if err != nil {
		t.Fatal(err)
	}
	foreignKeysOff(t, s)
	return s, p
}

// foreignKeysOff turns foreign keys off on s's writer, as Migrate does while migrations run.
func foreignKeysOff(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.writer.ExecContext(t.Context(), "PRAGMA foreign_keys = OFF"); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationFindsCallsByIDChecksReferences: migration 9 rebuilds the calls table with
// foreign keys off, so it checks the events' references itself. On a store where an event's
// call is not on file, it fails and changes nothing; Migrate turns foreign keys on again.
func TestMigrationFindsCallsByIDChecksReferences(t *testing.T) {
	ctx := t.Context()
	s, p := unmigrated(t)
	if _, err := p.UpTo(ctx, 8); err != nil {
		t.Fatal(err)
	}
	at := encTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	for _, q := range []string{
		`INSERT INTO orgs (org_id, name, created_at) VALUES ('org', 'clinic', ?1)`,
		`INSERT INTO calls (call_no, org_id, call_id, provider, provider_call_id, direction, state, block_seq,
			block_at, first_at, last_at, created_at, updated_at) VALUES (1, 'org', 'id', 'sip', 'a', 'inbound', 3, 1, ?1, ?1, ?1, ?1, ?1)`,
		// An event of call 2, which is not on file.
		`INSERT INTO call_events (org_id, event_id, call_no, call_id, type, dedupe_key, sequence, provider_event_id,
			occurred_at, order_at, received_at, body) VALUES ('org', 'e', 2, 'id2', 'call_ended', 'k', 1, '', ?1, ?1, ?1, '{}')`,
	} {
		if _, err := s.writer.ExecContext(ctx, q, at); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	err := s.Migrate(ctx)
	if err == nil || !strings.Contains(err.Error(), "broken = 0") {
		t.Fatalf("Migrate on a store with an event whose call is not on file: %v; want the migration's check to fail", err)
	}
	var version, idKeys, fks int64
	if err := s.writer.QueryRowContext(ctx, `SELECT (SELECT max(version_id) FROM goose_db_version),
		(SELECT count(*) FROM sqlite_master WHERE name = 'calls_id_key')`).Scan(&version, &idKeys); err != nil {
		t.Fatal(err)
	}
	if version != 8 || idKeys != 0 {
		t.Errorf("after the failed migration: version %d, calls_id_key present %d times; want 8 and none", version, idKeys)
	}
	if err := s.writer.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fks); err != nil || fks != 1 {
		t.Errorf("foreign keys after Migrate: %d, %v; want on", fks, err)
	}
}
