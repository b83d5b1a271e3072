package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/ingest"
)

// evNow is ev with the event occurring now, so that its call is within the replay's window.
func evNow(typ, callID string, seq int, extra string) string {
	return fmt.Sprintf(`{"type":%q,"providerCallId":%q,"sequence":%d,"occurredAt":%q,`+
		`"call":{"direction":"inbound","from":{"number":"+442071234567","name":"Ada"},"to":{"kind":"extension","extension":"101"}}%s}`,
		typ, callID, seq, time.Now().UTC().Format(time.RFC3339Nano), extra)
}

// TestPopupStreamReplaysRingingCalls: a desk that reconnects gets, from the store, the popup
// of a call that started ringing while it was away, once, under the id the broker used; not
// the popup it read last (its Last-Event-ID), nor that of a call answered meanwhile.
func TestPopupStreamReplaysRingingCalls(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t), withBroker)
		deskID, deskSecret := e.newKey(e.org, nil, auth.ScopePopupsRead)
		post := func(body string) {
			t.Helper()
			if r := e.post(body); r.status != http.StatusCreated && r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.raw)
			}
		}

		desk := e.stream(deskID, deskSecret, "?locations=front")
		desk.ready()
		desk.settled() // nothing rings yet: the replay is empty, and seen comes live
		post(evNow("call_received", "seen", 0, `,"locations":["front"]`))
		seen := desk.popup()
		if seen.ProviderCallID != "seen" {
			t.Fatalf("live popup %+v, want seen", seen)
		}
		desk.close()

		// While the desk is away: one call rings, one rings and is answered, one rings
		// elsewhere.
		post(evNow("call_received", "missed", 0, `,"locations":["front"]`))
		post(evNow("call_received", "gone", 0, `,"locations":["front"]`))
		post(evNow("call_answered", "gone", 1, `,"locations":["front"]`))
		post(evNow("call_received", "back-room", 0, `,"locations":["back"]`))

		again := e.streamWith(deskID, deskSecret, "?locations=front", seen.ID)
		again.ready()
		p := again.popup()
		if p.ProviderCallID != "missed" || p.ID != ingest.PopupID(e.org, p.Provider, "missed") || p.OrgID != e.org ||
			p.From == nil || p.From.Number != "+442071234567" || len(p.Locations) != 1 || p.Locations[0] != "front" {
			t.Errorf("replayed %+v, want the missed call's popup", p)
		}
		again.quiet(3 * streamHeartbeat)
		again.settled()

		// Live popups follow; the replayed one does not come again.
		post(evNow("call_received", "next", 0, `,"locations":["front"]`))
		if p := again.popup(); p.ProviderCallID != "next" {
			t.Errorf("then got %s, want next", p.ProviderCallID)
		}
		again.quiet(3 * streamHeartbeat)

		// A desk that names no last event gets every call ringing in its locations.
		fresh := e.stream(deskID, deskSecret, "?locations=front")
		fresh.ready()
		got := map[string]int{}
		for range 3 {
			got[fresh.popup().ProviderCallID]++
		}
		if got["seen"] != 1 || got["missed"] != 1 || got["next"] != 1 {
			t.Errorf("a new desk got %v, want seen, missed and next once each", got)
		}
		fresh.quiet(3 * streamHeartbeat)
		if n := e.metric("callwire_popup_stream_replayed_total"); n != 4 {
			t.Errorf("callwire_popup_stream_replayed_total = %v, want 4", n)
		}
	})
}
