package server_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/store"
)

// callbackPage is GET /api/v1/callbacks's body, as far as the tests read it.
type callbackPage struct {
	Items []callbackItem `json:"items"`
	Next  *string        `json:"next"`
}

type callbackItem struct {
	Number      string   `json:"number"`
	Name        *string  `json:"name"`
	MissedCount int      `json:"missedCount"`
	LastCallID  string   `json:"lastCallId"`
	Locations   []string `json:"locations"`
	Voicemail   bool     `json:"voicemail"`
	State       string   `json:"state"`
	ClosedAt    *string  `json:"closedAt"`
	ClosedBy    *struct {
		Reason    string  `json:"reason"`
		CallID    *string `json:"callId"`
		Extension *string `json:"extension"`
	} `json:"closedBy"`
}

func TestCallbacks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		reader, readerSecret := e.newKey(e.org, nil, auth.ScopeCallsRead)
		desk, deskSecret := e.newKey(e.org, nil, auth.ScopeCallsRead, auth.ScopeCallbacksWrite)
		get := func(query string) reply {
			t.Helper()
			return e.do("GET", "/api/v1/callbacks"+query, "", "Client-ID", reader, "Client-Secret", readerSecret)
		}
		if _, ok := e.st.(store.CallbackStore); !ok {
			if r := get(""); r.status != 501 {
				t.Fatalf("GET /api/v1/callbacks on a store without the list: %d %s, want 501", r.status, r.raw)
			}
			t.Skipf("SKIPPED: the %s store does not implement store.CallbackStore", b.name)
		}
		list := func(query string) callbackPage {
			t.Helper()
			r := get(query)
			if r.status != 200 {
				t.Fatalf("GET /api/v1/callbacks%s: %d %s", query, r.status, r.raw)
			}
			var p callbackPage
			if err := json.Unmarshal(r.raw, &p); err != nil {
				t.Fatal(err)
			}
			return p
		}

		// A missed call from +15550100111, a voicemail from a withheld number, and an outbound
		// call to a number that never called.
		posts := []string{
			batch(historyEvent("call_received", "missed", "inbound", 1, "2026-07-01T23:30:00Z", ""),
				historyEvent("call_missed", "missed", "inbound", 2, "2026-07-01T23:30:20Z", "")),
			`{"type":"call_ended","providerCallId":"anon","sequence":1,"occurredAt":"2026-07-02T08:00:00Z",
				"call":{"direction":"inbound","from":{"kind":"anonymous"},"to":{"kind":"extension","extension":"200"}},
				"disposition":"voicemail"}`,
			batch(historyEvent("call_placed", "out", "outbound", 1, "2026-07-02T10:00:00Z", ""),
				historyEvent("call_ended", "out", "outbound", 2, "2026-07-02T10:00:30Z", `,"disposition":"no_answer"`)),
		}
		for _, body := range posts {
			if r := e.post(body); r.status != 200 && r.status != 201 {
				t.Fatalf("post: %d %s", r.status, r.raw)
			}
		}
		open := list("")
		if len(open.Items) != 1 || open.Next != nil {
			t.Fatalf("open items = %+v, want the one of +15550100111", open)
		}
		it := open.Items[0]
		if it.Number != "+15550100111" || it.State != "open" || it.MissedCount != 1 || it.ClosedBy != nil ||
			it.ClosedAt != nil || !slices.Equal(it.Locations, []string{"front"}) || it.LastCallID == "" {
			t.Fatalf("item = %+v", it)
		}
		if p := list("?state=closed&location=front&limit=1"); len(p.Items) != 0 {
			t.Fatalf("closed items = %+v, want none", p.Items)
		}

		// Bad input: every bad parameter named at once.
		r := get("?state=lost&limit=0&bogus=1")
		if r.status != 400 {
			t.Fatalf("bad query: %d %s", r.status, r.raw)
		}
		for _, name := range []string{"state:", "limit:", "bogus:"} {
			if !strings.Contains(r.body.Message, name) {
				t.Errorf("bad query's message %q does not name %s", r.body.Message, name)
			}
		}
		if r := get("?cursor=AQAAAAAAAAAA"); r.status != 400 || !strings.Contains(r.body.Message, "cursor:") {
			t.Errorf("bad cursor: %d %s", r.status, r.raw)
		}

		// Dismissing takes org.callbacks.write.
		dismiss := func(id, secret, number, body string) reply {
			t.Helper()
			return e.do("POST", "/api/v1/callbacks/"+number+"/dismiss", body,
				"Client-ID", id, "Client-Secret", secret, "Content-Type", "application/json")
		}
		if r := dismiss(reader, readerSecret, "%2B15550100111", ""); r.status != 403 ||
			!slices.Contains(r.body.Scopes, auth.ScopeCallbacksWrite) {
			t.Fatalf("dismiss without the scope: %d %s", r.status, r.raw)
		}
		if r := dismiss(desk, deskSecret, "%2B15550100199", ""); r.status != 404 {
			t.Fatalf("dismiss of a number without an item: %d %s", r.status, r.raw)
		}
		if r := dismiss(desk, deskSecret, "%2B15550100111", `{"extension":204}`); r.status != 400 {
			t.Fatalf("dismiss with a bad body: %d %s", r.status, r.raw)
		}
		r = dismiss(desk, deskSecret, "%2B15550100111", `{"extension":"204"}`)
		if r.status != 200 {
			t.Fatalf("dismiss: %d %s", r.status, r.raw)
		}
		var closed callbackItem
		if err := json.Unmarshal(r.raw, &closed); err != nil {
			t.Fatal(err)
		}
		if closed.State != "closed" || closed.ClosedBy == nil || closed.ClosedBy.Reason != "dismissed" ||
			closed.ClosedBy.CallID != nil || closed.ClosedBy.Extension == nil || *closed.ClosedBy.Extension != "204" {
			t.Fatalf("dismissed item = %+v", closed)
		}
		if r := dismiss(desk, deskSecret, "%2B15550100111", ""); r.status != 404 {
			t.Fatalf("a second dismissal: %d %s", r.status, r.raw)
		}
		if p := list("?state=closed"); len(p.Items) != 1 || p.Items[0].Number != "+15550100111" {
			t.Fatalf("closed items = %+v", p.Items)
		}
		if p := list("?state=open"); len(p.Items) != 0 {
			t.Fatalf("open items after the dismissal = %+v", p.Items)
		}
	})
}
