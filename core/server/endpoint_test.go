package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store"
)

const at = "2026-11-20T09:30:00Z"

// ev returns an event object; extra is spliced in after the envelope (",\"k\":v").
func ev(typ, callID string, seq int, extra string) string {
	return fmt.Sprintf(`{"type":%q,"providerCallId":%q,"sequence":%d,"occurredAt":%q,`+
		`"call":{"direction":"inbound","from":{"number":"+442071234567","name":"Ada"},"to":{"kind":"extension","extension":"101"}}%s}`,
		typ, callID, seq, at, extra)
}

func batch(evs ...string) string { return `{"events":[` + strings.Join(evs, ",") + `]}` }

func TestCallLifecycle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		r := e.post(ev("call_received", "c1", 0, ""))
		if r.status != http.StatusCreated || !r.body.Success {
			t.Fatalf("received: %d %s", r.status, r.raw)
		}
		if len(r.body.Calls) != 1 || !r.body.Calls[0].Created || r.body.Calls[0].ProviderCallID != "c1" || r.body.Calls[0].ID == "" {
			t.Errorf("calls %s", r.raw)
		}
		if r.body.Calls[0].CRMClients == nil || !strings.Contains(string(r.raw), `"crmClients":[]`) {
			t.Errorf("crmClients must be an array: %s", r.raw)
		}
		callID := r.body.Calls[0].ID
		if ev0 := r.body.Events[0]; ev0.ID == "" || ev0.Type != "call_received" || ev0.DedupeKey != "call_received:0" || ev0.Duplicate {
			t.Errorf("event entry %+v", ev0)
		}

		r = e.post(ev("call_answered", "c1", 1, `,"answeredBy":"101"`))
		if r.status != http.StatusOK || r.body.Calls[0].Created || r.body.Calls[0].ID != callID {
			t.Fatalf("answered: %d %s", r.status, r.raw)
		}
		tail := batch(
			ev("call_ended", "c1", 2, `,"disposition":"answered","duration":42.5,"talkTime":30,"answeredElsewhere":false,"sipCode":200,"sipReason":"OK"`),
			ev("call_recorded", "c1", 3, `,"url":"https://pbx.example/rec/c1.wav","mimeType":"audio/wav","bytes":480000,"duration":30`),
			ev("call_transcribed", "c1", 4, `,"text":"Hello, I'd like to book an appointment.","language":"en-GB","confidence":0.93`),
		)
		r = e.post(tail)
		if r.status != http.StatusOK || len(r.body.Events) != 3 || r.body.Events[2].Type != "call_transcribed" {
			t.Fatalf("tail: %d %s", r.status, r.raw)
		}
		c, evs := e.call(e.org, "sip", "c1")
		if c.State != store.StateEnded || c.ID != callID || len(evs) != 5 {
			t.Errorf("stored state %v id %s events %d", c.State, c.ID, len(evs))
		}
		// Mid-call events never move the state; a late ringing event never lowers it.
		r = e.post(batch(ev("call_hold", "c1", 5, ""), ev("call_transferred", "c1", 6, `,"to":{"number":"+442079460000"},"mode":"blind"`), ev("call_received", "c1", 7, "")))
		if r.status != http.StatusOK {
			t.Fatalf("late events: %d %s", r.status, r.raw)
		}
		if c, _ := e.call(e.org, "sip", "c1"); c.State != store.StateEnded {
			t.Errorf("state descended to %v", c.State)
		}
	})
}

func TestRetryIsSafe(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		body := batch(ev("call_ended", "r1", 2, ""), ev("call_recorded", "r1", 3, `,"url":"https://x.example/r.mp3"`), ev("call_ended", "r2", 1, ""))
		first := e.post(body)
		if first.status != http.StatusCreated {
			t.Fatalf("first: %d %s", first.status, first.raw)
		}
		_, before := e.call(e.org, "sip", "r1")
		again := e.post(body)
		if again.status != http.StatusOK {
			t.Fatalf("retry: %d %s", again.status, again.raw)
		}
		for i, ev := range again.body.Events {
			if !ev.Duplicate || ev.ID != first.body.Events[i].ID {
				t.Errorf("retry event %d: %+v, first %+v", i, ev, first.body.Events[i])
			}
		}
		for i, c := range again.body.Calls {
			if c.Created || c.ID != first.body.Calls[i].ID {
				t.Errorf("retry call %d: %+v", i, c)
			}
		}
		if _, after := e.call(e.org, "sip", "r1"); len(after) != len(before) {
			t.Errorf("retry stored more events: %d then %d", len(before), len(after))
		}
		// 201 when at least one call is new, even beside an existing one.
		r := e.post(batch(ev("call_hold", "r1", 9, `,"providerEventId":"h-1"`), ev("call_ended", "r3", 1, "")))
		if r.status != http.StatusCreated || r.body.Calls[0].Created || !r.body.Calls[1].Created {
			t.Errorf("mixed: %d %s", r.status, r.raw)
		}
	})
}

func TestDeduplication(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		// Two holds with provider event ids are two events.
		r := e.post(batch(ev("call_hold", "d1", 1, `,"providerEventId":"h1"`), ev("call_hold", "d1", 1, `,"providerEventId":"h2","released":true`)))
		if r.status != http.StatusCreated || r.body.Events[0].Duplicate || r.body.Events[1].Duplicate || r.body.Events[1].DedupeKey != "h2" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		// Without ids, the same type and sequence is the same event: the second is dropped.
		r = e.post(batch(ev("call_hold", "d2", 1, ""), ev("call_hold", "d2", 1, `,"released":true`)))
		if !r.body.Events[1].Duplicate || r.body.Events[1].ID != r.body.Events[0].ID || r.body.Events[0].DedupeKey != "call_hold:1" {
			t.Errorf("same type:sequence not deduplicated: %s", r.raw)
		}
		if _, evs := e.call(e.org, "sip", "d2"); len(evs) != 1 {
			t.Errorf("d2 has %d events", len(evs))
		}
		// Provider is part of the call's key; defaults to sip.
		r = e.post(batch(ev("call_received", "same", 0, ""), ev("call_received", "same", 0, `,"provider":"twilio"`)))
		if len(r.body.Calls) != 2 || r.body.Calls[0].ID == r.body.Calls[1].ID || r.body.Calls[1].Provider != "twilio" {
			t.Errorf("provider did not separate calls: %s", r.raw)
		}
		e.call(e.org, "twilio", "same")
	})
}

func TestBodyKeptVerbatimAndClockClamped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		future := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339Nano)
		obj := `{ "type" : "call_received",  "occurredAt":"` + future + `", "providerCallId":"v1",
  "call":{"direction":"inbound","from":{"kind":"anonymous","number":null}},
  "raw": {"sip":"INVITE sip:101@pbx SIP/2.0\r\nFrom: <sip:anonymous@anonymous.invalid>\r\n","héllo":"wörld \u00e9 \u0000","n":[1,2.50,3e2]} }`
		r := e.post(obj)
		if r.status != http.StatusCreated {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		_, evs := e.call(e.org, "sip", "v1")
		if string(evs[0].Body) != obj {
			t.Errorf("body not verbatim:\n got %q\nwant %q", evs[0].Body, obj)
		}
		if evs[0].OrderAt.After(time.Now()) || !evs[0].OccurredAt.After(time.Now().Add(47*time.Hour)) {
			t.Errorf("order_at %v occurred_at %v: future must be clamped for ordering only", evs[0].OrderAt, evs[0].OccurredAt)
		}
		if e.popups.count() != 1 || e.popups.popups[0].From.Kind != "anonymous" || e.popups.popups[0].Lookup != popup.LookupSkipped {
			t.Errorf("anonymous caller popup: %+v", e.popups.popups)
		}
	})
}

func TestPopupOnlyForNewCallReceived(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		e.post(batch(ev("call_placed", "p1", 0, ""), ev("call_missed", "p2", 0, "")))
		if n := e.popups.count(); n != 0 {
			t.Errorf("%d popups for events that are not call_received", n)
		}
		r := e.post(ev("call_received", "p3", 0, `,"locations":["front","back"]`))
		e.post(ev("call_received", "p3", 0, `,"locations":["front","back"]`))
		if n := e.popups.count(); n != 1 {
			t.Fatalf("%d popups, want 1 (a retry does not ring again)", n)
		}
		p := e.popups.popups[0]
		if p.CallID != r.body.Calls[0].ID || p.OrgID != e.org || len(p.Locations) != 2 || p.From.Number != "+442071234567" || p.TraceID != r.header.Get("X-Trace-ID") {
			t.Errorf("popup %+v", p)
		}
	})
}

func TestTenantIsolation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		other := e.newOrg("Hillside Practice")
		oid, osecret := e.newKey(other, nil, "org.calls.events")
		a := e.post(ev("call_received", "shared-id", 0, ""))
		o := e.postAs(oid, osecret, ev("call_received", "shared-id", 0, ""))
		if a.status != http.StatusCreated || o.status != http.StatusCreated {
			t.Fatalf("both organizations create their own call: %d %d", a.status, o.status)
		}
		if a.body.Calls[0].ID == o.body.Calls[0].ID || a.body.Events[0].ID == o.body.Events[0].ID {
			t.Errorf("organizations share a record")
		}
		ca, _ := e.call(e.org, "sip", "shared-id")
		co, _ := e.call(other, "sip", "shared-id")
		if ca.OrgID != e.org || co.OrgID != other {
			t.Errorf("org ids %s %s", ca.OrgID, co.OrgID)
		}
		e.absent("no-such-org", "sip", "shared-id")
	})
}

func TestAuthentication(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		body := ev("call_received", "auth1", 0, "")
		past := time.Now().Add(-time.Minute)
		expID, expSecret := e.newKey(e.org, &past, "org.calls.events")
		revID, revSecret := e.newKey(e.org, nil, "org.calls.events")
		if err := e.st.RevokeKey(t.Context(), revID, time.Now()); err != nil {
			t.Fatal(err)
		}
		opID, opSecret := e.newKey("", nil, "org.calls.events")
		ct := []string{"Content-Type", "application/json"}
		cases := []struct {
			name    string
			headers []string
			status  int
			want    string
		}{
			{"no credential", nil, 401, ""},
			{"wrong secret", []string{"Client-ID", e.clientID, "Client-Secret", revSecret}, 401, ""},
			{"unknown client", []string{"Client-ID", "cwid_nobody", "Client-Secret", e.secret}, 401, ""},
			{"garbage secret", []string{"Client-ID", e.clientID, "Client-Secret", "hunter2"}, 401, ""},
			{"expired", []string{"Client-ID", expID, "Client-Secret", expSecret}, 401, ""},
			{"revoked", []string{"Client-ID", revID, "Client-Secret", revSecret}, 401, ""},
			{"revoked bearer", []string{"Authorization", "Bearer " + revSecret}, 401, ""},
			{"operator key", []string{"Client-ID", opID, "Client-Secret", opSecret}, 403, "federat"},
			{"bearer", []string{"Authorization", "Bearer " + e.secret}, 201, ""},
			{"bearer lower-case scheme", []string{"Authorization", "bearer " + e.secret}, 200, ""},
			{"headers", []string{"Client-ID", e.clientID, "Client-Secret", e.secret}, 200, ""},
		}
		for _, tc := range cases {
			r := e.do("POST", "/api/v1/calls/events", body, append(ct, tc.headers...)...)
			if r.status != tc.status || (tc.want != "" && !strings.Contains(r.body.Message, tc.want)) {
				t.Errorf("%s: %d %s", tc.name, r.status, r.raw)
			}
		}
		// Rotation: the old secret stops at once.
		c := newSecretFor(t, e, e.clientID)
		if r := e.postAs(e.clientID, e.secret, body); r.status != 401 {
			t.Errorf("old secret after rotation: %d", r.status)
		}
		if r := e.postAs(e.clientID, c, body); r.status != 200 {
			t.Errorf("new secret after rotation: %d %s", r.status, r.raw)
		}
	})
}

func TestScopes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		rid, rsecret := e.newKey(e.org, nil, "org.calls.events.call_received", "org.calls.events.call_ended")
		if r := e.postAs(rid, rsecret, ev("call_received", "s1", 0, "")); r.status != 201 {
			t.Errorf("per-event scope: %d %s", r.status, r.raw)
		}
		// One event type lacking its scope refuses the whole batch; nothing is accepted.
		r := e.postAs(rid, rsecret, batch(ev("call_ended", "s2", 1, ""), ev("call_recorded", "s2", 2, `,"url":"https://x.example/a.wav"`), ev("call_hold", "s3", 1, "")))
		if r.status != 403 || !strings.Contains(r.body.Message, "org.calls.events.call_recorded") || len(r.body.Scopes) != 2 {
			t.Errorf("batch lacking scopes: %d %s", r.status, r.raw)
		}
		e.absent(e.org, "sip", "s2")
		e.absent(e.org, "sip", "s3")
		pid, psecret := e.newKey(e.org, nil, "org.popups.read")
		if r := e.postAs(pid, psecret, ev("call_received", "s4", 0, "")); r.status != 403 {
			t.Errorf("popups key posting events: %d", r.status)
		}
	})
}

func TestBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		many := make([]string, 51)
		for i := range many {
			many[i] = ev("call_hold", "bad-many", i, "")
		}
		cases := []struct {
			name   string
			body   string
			fields []string
		}{
			{"malformed JSON", `{"type":"call_received",`, []string{"body"}},
			{"empty body", ``, []string{"body"}},
			{"array", `[1,2]`, []string{"body"}},
			{"empty batch", `{"events":[]}`, []string{"events"}},
			{"51 events", batch(many...), []string{"events"}},
			{"unknown type", ev("call_exploded", "bad-type", 0, ""), []string{"type"}},
			{"missing required", `{"call":{"direction":"inbound"}}`, []string{"type", "providerCallId", "occurredAt"}},
			{"wrong enums", strings.Replace(ev("call_ended", "bad-enum", 0, `,"disposition":"exploded","observer":"satellite"`), `"inbound"`, `"sideways"`, 1),
				[]string{"call.direction", "disposition", "observer"}},
			{"wrong types", `{"type":"call_ended","providerCallId":7,"occurredAt":"yesterday","sequence":"one","call":{"direction":"inbound"},"duration":"long","sipCode":2.5}`,
				[]string{"providerCallId", "occurredAt", "sequence", "duration", "sipCode"}},
			{"non-E.164", strings.Replace(ev("call_received", "bad-num", 0, ""), "+442071234567", "020 7123 4567", 1), []string{"call.from.number"}},
			{"every bad field of a batch", batch(ev("call_ended", "bad-b", 1, `,"sipCode":999`), `{"type":"call_hold"}`, ev("call_answered", "bad-b", 2, `,"text":"x"`)),
				[]string{"events[0].sipCode", "events[1].providerCallId", "events[1].occurredAt", "events[1].call", "events[2].text"}},
		}
		for _, tc := range cases {
			r := e.post(tc.body)
			if r.status != 400 {
				t.Errorf("%s: status %d %s", tc.name, r.status, r.raw)
				continue
			}
			got := map[string]bool{}
			for _, p := range r.body.Fields {
				got[p.Field] = true
			}
			for _, f := range tc.fields {
				if !got[f] || !strings.Contains(r.body.Message, f) {
					t.Errorf("%s: problem for %q missing from %s", tc.name, f, r.raw)
				}
			}
		}
		for _, id := range []string{"bad-many", "bad-type", "bad-enum", "bad-num", "bad-b"} {
			e.absent(e.org, "sip", id)
		}
		good := ev("call_received", "bad-ct", 0, "")
		auth := []string{"Client-ID", e.clientID, "Client-Secret", e.secret}
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1"} {
			h := auth
			if ct != "" {
				h = append([]string{"Content-Type", ct}, auth...)
			}
			if r := e.do("POST", "/api/v1/calls/events", good, h...); r.status != 400 || !strings.Contains(r.body.Message, "application/json") && !strings.Contains(r.body.Message, "charset") {
				t.Errorf("content type %q: %d %s", ct, r.status, r.raw)
			}
		}
		if r := e.do("POST", "/api/v1/calls/events", good, append([]string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, auth...)...); r.status != 400 {
			t.Errorf("gzip: %d", r.status)
		}
		e.absent(e.org, "sip", "bad-ct")
		// An oversized body is refused on its declared length, before it is read.
		if status, hdr, raw := e.rawHeadersOnly("POST /api/v1/calls/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
			"Client-ID: " + e.clientID + "\r\nClient-Secret: " + e.secret + "\r\nContent-Length: 2097152\r\n\r\n"); status != http.StatusRequestEntityTooLarge ||
			hdr.Get("X-Trace-ID") == "" || !strings.Contains(raw, `"success":false`) {
			t.Errorf("oversized: %d %v %s", status, hdr, raw)
		}
		if r := e.do("GET", "/api/v1/calls/events", ""); r.status != 405 || r.header.Get("Allow") != "POST" {
			t.Errorf("GET: %d %v", r.status, r.header)
		}
		if r := e.do("GET", "/nope", ""); r.status != 404 {
			t.Errorf("unknown path: %d", r.status)
		}
		if r := e.do("POST", "/api/v1/calls/events", good, append([]string{"Content-Type", "application/json", "X-Trace-ID", "reporter-trace-42"}, auth...)...); r.header.Get("X-Trace-ID") != "reporter-trace-42" {
			t.Errorf("trace id not echoed: %q", r.header.Get("X-Trace-ID"))
		}
		if r := e.do("GET", "/readyz", ""); r.status != 200 {
			t.Errorf("readyz %d", r.status)
		}
		if r := e.do("GET", "/metrics", ""); r.status != 200 || !strings.Contains(string(r.raw), "callwire_events_total") {
			t.Errorf("metrics %d", r.status)
		}
	})
}

// TestRevocationBeatsCachedKeyFacts: a key whose facts the server has cached from earlier
// requests stops working on the very next request after revocation, rotation or expiry, whatever
// that request carries, and a dead key never learns more than 401.
func TestRevocationBeatsCachedKeyFacts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// The server's clock can be moved on, so the key expires when the test says, not when a
		// busy machine happens to get there.
		var skew atomic.Int64
		e := start(t, b.db(t), func(_ *config.Config, so *server.Options) {
			so.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		})
		soon := time.Now().Add(time.Hour)
		kid, ksecret := e.newKey(e.org, nil, "org.calls.events.call_hold")
		xid, xsecret := e.newKey(e.org, &soon, "org.calls.events")
		for _, k := range [][2]string{{kid, ksecret}, {xid, xsecret}} {
			if r := e.postAs(k[0], k[1], ev("call_hold", "warm-"+k[0], 0, "")); r.status != 201 {
				t.Fatalf("warm-up: %d %s", r.status, r.raw)
			}
		}
		if err := e.st.RevokeKey(t.Context(), kid, time.Now()); err != nil {
			t.Fatal(err)
		}
		popups := e.popups.count()
		for name, body := range map[string]string{
			"write":         ev("call_hold", "after-revoke", 1, ""),
			"ringing":       ev("call_received", "after-revoke-ring", 0, ""),
			"bad body":      `{"type":"call_exploded"}`,
			"lacking scope": ev("call_ended", "after-revoke-scope", 1, ""),
		} {
			if r := e.postAs(kid, ksecret, body); r.status != 401 {
				t.Errorf("revoked key, %s: %d %s", name, r.status, r.raw)
			}
		}
		e.absent(e.org, "sip", "after-revoke")
		e.absent(e.org, "sip", "after-revoke-ring")
		if e.popups.count() != popups {
			t.Error("a revoked key lit the desks")
		}
		skew.Store(int64(time.Until(soon) + time.Second))
		if r := e.postAs(xid, xsecret, ev("call_hold", "after-expiry", 1, "")); r.status != 401 {
			t.Errorf("expired key: %d %s", r.status, r.raw)
		}
		e.absent(e.org, "sip", "after-expiry")
	})
}

// TestFixesFromReview pins three rules of the contract: a late call_received does not light the
// desk of a call that already moved on; a providerEventId cannot pose as another event's
// type:sequence key; a key that may post no event type gets 403 whatever its body.
func TestFixesFromReview(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		if r := e.post(ev("call_ended", "late", 3, "")); r.status != 201 {
			t.Fatalf("ended: %d %s", r.status, r.raw)
		}
		before := e.popups.count()
		if r := e.post(ev("call_received", "late", 0, "")); r.status != 200 || r.body.Events[0].Duplicate {
			t.Fatalf("late ringing: %d %s", r.status, r.raw)
		}
		if e.popups.count() != before {
			t.Error("a late call_received lit the desk of an ended call")
		}
		if c, _ := e.call(e.org, "sip", "late"); c.State != store.StateEnded {
			t.Errorf("state %v", c.State)
		}
		if r := e.post(ev("call_hold", "pose", 1, `,"providerEventId":"call_received:0"`)); r.status != 400 || len(r.body.Fields) != 1 || r.body.Fields[0].Field != "providerEventId" {
			t.Errorf("posing providerEventId: %d %s", r.status, r.raw)
		}
		pid, psecret := e.newKey(e.org, nil, "org.popups.read")
		for _, body := range []string{`{"type":`, ev("call_received", "x", 0, "")} {
			if r := e.postAs(pid, psecret, body); r.status != 403 {
				t.Errorf("key without event scopes, body %.20q: %d %s", body, r.status, r.raw)
			}
		}
	})
}
