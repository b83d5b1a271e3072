package sqlite

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// TestSummaryMigration takes calls written before migration 5 through it: each call's summary is
// filled in from its block and its events, as the write path would have kept it.
func TestSummaryMigration(t *testing.T) {
	ctx := t.Context()
	s, p := unmigrated(t)
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := s.writer.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO orgs (org_id, name, created_at) VALUES ('org', 'clinic', ?)`, encTime(at))
	exec(`INSERT INTO calls (org_id, call_id, provider, provider_call_id, direction, state, block, block_seq,
			block_at, first_at, last_at, created_at, updated_at)
		VALUES ('org', ?2, 'pbx', 'a', 'inbound', 3,
			'{"direction":"inbound","from":{"number":"+442071230100"},"to":{"kind":"extension","extension":"200"}}',
			5, ?1, ?1, ?1, ?1, ?1)`, encTime(at), store.CallID("org", "pbx", "a"))
	for k, ev := range []struct{ typ, body string }{
		{"call_received", `{"locations":["front"]}`},
		{"call_answered", `{"answeredBy":"201"}`},
		{"call_answered", `{"answeredBy":"305"}`},
		{"call_ended", `{"disposition":"answered","talkTime":12}`},
		{"call_recorded", `{"url":"https://rec.example/a.wav","locations":["back"]}`},
	} {
		exec(`INSERT INTO call_events (org_id, event_id, call_no, call_id, type, dedupe_key, sequence, provider_event_id,
				occurred_at, order_at, received_at, body)
			SELECT 'org', ?1, call_no, call_id, ?2, ?1, ?3, '', ?4, ?4, ?4, ?5 FROM calls WHERE provider_call_id = 'a'`,
			fmt.Sprintf("e%d", k), ev.typ, k+1, encTime(at.Add(time.Duration(k)*time.Second)), ev.body)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c, _, err := s.GetCall(ctx, "org", "pbx", "a")
	if err != nil {
		t.Fatal(err)
	}
	got := c.Summary
	want := store.Summary{AnsweredAt: at.Add(time.Second), AnsweredBy: "201", EndedAt: at.Add(3 * time.Second),
		Flags: store.FlagAnswered | store.FlagRecorded, FromKey: store.NumberKey("+442071230100"), ToExt: "200"}
	if !got.AnsweredAt.Equal(want.AnsweredAt) || !got.EndedAt.Equal(want.EndedAt) {
		t.Errorf("times = %v, %v; want %v, %v", got.AnsweredAt, got.EndedAt, want.AnsweredAt, want.EndedAt)
	}
	var locs []string
	if err := json.Unmarshal(got.Locations, &locs); err != nil || len(locs) != 1 || locs[0] != "back" {
		t.Errorf("locations = %s, want those of the latest event", got.Locations)
	}
	got.AnsweredAt, got.EndedAt, got.Locations = want.AnsweredAt, want.EndedAt, nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("summary = %+v, want %+v", got, want)
	}
	foreignKeysOff(t, s) // Migrate turned them on again
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatalf("down: %v", err)
	}
}
