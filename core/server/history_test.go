package server_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/store"
)

// historyPage is GET /api/v1/calls's body, as far as the tests read it.
type historyPage struct {
	Items []historyItem `json:"items"`
	Next  *string       `json:"next"`
}

type historyItem struct {
	ID             string          `json:"id"`
	ProviderCallID string          `json:"providerCallId"`
	Direction      string          `json:"direction"`
	From           json.RawMessage `json:"from"`
	State          string          `json:"state"`
	Outcome        string          `json:"outcome"`
	Disposition    *string         `json:"disposition"`
	StartedAt      string          `json:"startedAt"`
	AnsweredAt     *string         `json:"answeredAt"`
	EndedAt        *string         `json:"endedAt"`
	Duration       *float64        `json:"duration"`
	TalkTime       *float64        `json:"talkTime"`
	AnsweredBy     *string         `json:"answeredBy"`
	Locations      []string        `json:"locations"`
	Recordings     []struct {
		URL string `json:"url"`
	} `json:"recordings"`
	Transcribed bool `json:"transcribed"`
	SIPCode     *int `json:"sipCode"`
	Events      []struct {
		ID              string  `json:"id"`
		Type            string  `json:"type"`
		DedupeKey       string  `json:"dedupeKey"`
		ReceivedAt      string  `json:"receivedAt"`
		ProviderEventID *string `json:"providerEventId"`
		AnsweredBy      string  `json:"answeredBy"`
	} `json:"events"`
}

// historyEvent is one event of the test's made-up calls: numbers of the 555-01xx range.
func historyEvent(typ, callID, dir string, seq int, at, extra string) string {
	from, to := `{"number":"+15550100111","name":"Ada Lovelace"}`, `{"kind":"extension","extension":"200"}`
	if dir != "inbound" {
		from, to = `{"kind":"extension","extension":"201"}`, `{"number":"+442071230100"}`
	}
	return fmt.Sprintf(`{"type":%q,"providerCallId":%q,"sequence":%d,"occurredAt":%q,"locations":["front"],
		"call":{"direction":%q,"from":%s,"to":%s}%s}`, typ, callID, seq, at, dir, from, to, extra)
}

func TestHistory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		e := start(t, b.db(t))
		if err := e.st.UpdateOrgRegion(t.Context(), e.org, store.Region{TimeZone: "Europe/London", Country: "GB"}); err != nil {
			t.Fatal(err)
		}
		reader, readerSecret := e.newKey(e.org, nil, auth.ScopeCallsRead)
		get := func(path string, headers ...string) reply {
			t.Helper()
			return e.do("GET", path, "", append([]string{"Client-ID", reader, "Client-Secret", readerSecret}, headers...)...)
		}
		list := func(query string) historyPage {
			t.Helper()
			r := get("/api/v1/calls?" + query)
			if r.status != 200 {
				t.Fatalf("GET /api/v1/calls?%s: %d %s", query, r.status, r.raw)
			}
			var p historyPage
			if err := json.Unmarshal(r.raw, &p); err != nil {
				t.Fatal(err)
			}
			return p
		}
		ids := func(p historyPage) []string {
			var out []string
			for _, it := range p.Items {
				out = append(out, it.ProviderCallID)
			}
			return out
		}

		// An answered, recorded call in summer (BST); a missed one; a voicemail; an outbound
		// call nobody answered, on a winter day (GMT).
		posts := []string{
			historyEvent("call_received", "answered", "inbound", 1, "2026-07-01T08:00:00Z", ""),
			batch(historyEvent("call_answered", "answered", "inbound", 2, "2026-07-01T08:00:05Z", `,"answeredBy":"201"`),
				historyEvent("call_ended", "answered", "inbound", 3, "2026-07-01T08:03:05Z", `,"disposition":"answered","duration":185,"talkTime":180,"sipCode":200`),
				historyEvent("call_recorded", "answered", "inbound", 4, "2026-07-01T08:03:06Z", `,"url":"https://rec.example/a.wav","mimeType":"audio/wav","bytes":1024,"duration":180`)),
			historyEvent("call_received", "missed", "inbound", 1, "2026-07-01T23:30:00Z", ""),
			historyEvent("call_missed", "missed", "inbound", 2, "2026-07-01T23:30:20Z", ""),
			batch(historyEvent("call_received", "vm", "inbound", 1, "2026-07-02T09:00:00Z", ""),
				historyEvent("call_ended", "vm", "inbound", 2, "2026-07-02T09:01:00Z", `,"disposition":"voicemail"`)),
			batch(historyEvent("call_placed", "out", "outbound", 1, "2026-12-01T10:00:00Z", ""),
				historyEvent("call_ended", "out", "outbound", 2, "2026-12-01T10:00:30Z", `,"disposition":"no_answer","sipCode":480,"sipReason":"Temporarily Unavailable"`)),
		}
		for _, body := range posts {
			if r := e.post(body); r.status != 200 && r.status != 201 {
				t.Fatalf("post: %d %s", r.status, r.raw)
			}
		}

		all := list("")
		if got := ids(all); !slices.Equal(got, []string{"out", "vm", "missed", "answered"}) {
			t.Fatalf("list = %q, want newest first", got)
		}
		a := all.Items[3]
		if a.Outcome != "answered" || a.State != "ended" || a.AnsweredBy == nil || *a.AnsweredBy != "201" ||
			a.Duration == nil || *a.Duration != 185 || a.TalkTime == nil || *a.TalkTime != 180 || a.SIPCode == nil || *a.SIPCode != 200 ||
			len(a.Recordings) != 1 || a.Recordings[0].URL != "https://rec.example/a.wav" || a.StartedAt != "2026-07-01T08:00:00Z" ||
			a.AnsweredAt == nil || *a.AnsweredAt != "2026-07-01T08:00:05Z" || !slices.Equal(a.Locations, []string{"front"}) ||
			!strings.Contains(string(a.From), "Ada Lovelace") || a.Events != nil {
			t.Errorf("answered call: %+v", a)
		}
		if o := []string{all.Items[0].Outcome, all.Items[1].Outcome, all.Items[2].Outcome}; !slices.Equal(o, []string{"not_answered", "voicemail", "missed"}) {
			t.Errorf("outcomes = %q", o)
		}

		for _, tc := range []struct{ query, want string }{
			{"outcome=missed&outcome=voicemail", "vm missed"},
			{"direction=outbound", "out"},
			// 2026-07-02 in London (BST) runs from 2026-07-01T23:00Z: the missed call is on it.
			{"from=2026-07-02&until=2026-07-02", "vm missed"},
			{"until=2026-07-01", "answered"},
			{"from=2026-12-01T00:00:00Z", "out"},
			{"number=%2B15550100111", "vm missed answered"},
			{"number=0111", "vm missed answered"},
			{"number=020+7123+0100", "out"},           // national form, read as GB
			{"number=010-0111", "vm missed answered"}, // not a GB number: its trailing digits
			{"extension=201", "out answered"},
			{"location=front", "out vm missed answered"},
			{"location=back", ""},
			{"provider=sip", "out vm missed answered"},
			{"recorded=true", "answered"},
		} {
			if got := strings.Join(ids(list(tc.query)), " "); got != tc.want {
				t.Errorf("?%s = %q, want %q", tc.query, got, tc.want)
			}
		}

		// Pages of one, walked with the cursor, while another call arrives.
		var walked []string
		q := "limit=1&direction=inbound"
		for range 10 {
			p := list(q)
			walked = append(walked, ids(p)...)
			if p.Next == nil {
				break
			}
			e.post(historyEvent("call_received", fmt.Sprintf("new-%d", len(walked)), "inbound", 1, "2026-12-02T09:00:00Z", ""))
			q = "limit=1&direction=inbound&cursor=" + url.QueryEscape(*p.Next)
		}
		if !slices.Equal(walked, []string{"vm", "missed", "answered"}) {
			t.Errorf("walked %q", walked)
		}

		// One call with its events.
		r := get("/api/v1/calls/" + url.PathEscape(a.ID))
		if r.status != 200 {
			t.Fatalf("GET call: %d %s", r.status, r.raw)
		}
		var one historyItem
		if err := json.Unmarshal(r.raw, &one); err != nil {
			t.Fatal(err)
		}
		if one.ID != a.ID || len(one.Events) != 4 || one.Events[1].Type != "call_answered" || one.Events[1].AnsweredBy != "201" ||
			one.Events[1].DedupeKey != "call_answered:2" || one.Events[1].ID == "" || one.Events[1].ReceivedAt == "" ||
			one.Events[0].ProviderEventID != nil {
			t.Errorf("call with events: %s", r.raw)
		}

		// CSV: every call, local times.
		r = get("/api/v1/calls?direction=inbound", "Accept", "text/csv")
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") {
			t.Fatalf("CSV: %d %s", r.status, r.raw)
		}
		rows, err := csv.NewReader(strings.NewReader(string(r.raw))).ReadAll()
		if err != nil {
			t.Fatalf("CSV: %v\n%s", err, r.raw)
		}
		col := func(name string) int { return slices.Index(rows[0], name) }
		if n := countPrefix(rows, "new-"); n == 0 || len(rows) != 1+3+n {
			t.Errorf("CSV rows: %d", len(rows))
		}
		last := rows[len(rows)-1]
		if last[col("provider_call_id")] != "answered" || last[col("started_at")] != "2026-07-01 09:00:00" ||
			last[col("timezone")] != "Europe/London" || last[col("from_number")] != "+15550100111" || last[col("outcome")] != "answered" {
			t.Errorf("CSV row: %q", last)
		}

		// Refusals.
		for _, tc := range []struct {
			query string
			names []string
		}{
			{"outcome=lost", []string{"outcome"}},
			{"from=2026-13-01&until=yesterday", []string{"from", "until"}},
			{"limit=0", []string{"limit"}},
			{"limit=501", []string{"limit"}},
			{"cursor=AAAA", []string{"cursor"}},
			{"number=12", []string{"number"}},
			{"colour=red", []string{"colour"}},
		} {
			r := get("/api/v1/calls?" + tc.query)
			if r.status != 400 {
				t.Errorf("?%s: %d, want 400", tc.query, r.status)
			}
			for _, n := range tc.names {
				if !strings.Contains(r.body.Message, n+":") {
					t.Errorf("?%s: message %q does not name %s", tc.query, r.body.Message, n)
				}
			}
		}
		// A cursor of another filter, or of another organization, is refused.
		p := list("limit=1")
		if r := get("/api/v1/calls?limit=1&direction=outbound&cursor=" + url.QueryEscape(*p.Next)); r.status != 400 || !strings.Contains(r.body.Message, "cursor:") {
			t.Errorf("a cursor of another filter: %d %s", r.status, r.raw)
		}
		other := e.newOrg("Hillside Clinic")
		oc, os := e.newKey(other, nil, auth.ScopeCallsRead)
		asOther := func(path string) reply {
			return e.do("GET", path, "", "Client-ID", oc, "Client-Secret", os)
		}
		if r := asOther("/api/v1/calls?limit=1&cursor=" + url.QueryEscape(*p.Next)); r.status != 400 {
			t.Errorf("another organization's cursor: %d %s", r.status, r.raw)
		}
		if r := asOther("/api/v1/calls/" + url.PathEscape(a.ID)); r.status != 404 {
			t.Errorf("another organization's call: %d %s", r.status, r.raw)
		}
		if r := asOther("/api/v1/calls"); r.status != 200 || !strings.Contains(string(r.raw), `"items":[]`) {
			t.Errorf("another organization's list: %d %s", r.status, r.raw)
		}
		// The events key lacks the scope: 403 naming it.
		r = e.do("GET", "/api/v1/calls", "", "Client-ID", e.clientID, "Client-Secret", e.secret)
		if r.status != 403 || !slices.Contains(r.body.Scopes, auth.ScopeCallsRead) {
			t.Errorf("without the scope: %d %s", r.status, r.raw)
		}
		if r := e.do("GET", "/api/v1/calls", ""); r.status != 401 {
			t.Errorf("without a key: %d", r.status)
		}
		if r := e.do("GET", "/api/v1/calls/events", "", "Client-ID", reader, "Client-Secret", readerSecret); r.status != 405 {
			t.Errorf("GET of the events path: %d, want 405", r.status)
		}
	})
}

func countPrefix(rows [][]string, prefix string) int {
	n := 0
	for _, r := range rows {
		if len(r) > 2 && strings.HasPrefix(r[2], prefix) {
			n++
		}
	}
	return n
}
