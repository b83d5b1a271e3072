package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/store"
)

// openAPIDoc is docs/api/openapi.yaml as generic YAML.
type openAPIDoc map[string]any

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	b, err := os.ReadFile("../../docs/api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Decoded as a plain map, so that nested mappings are plain maps too.
	var d map[string]any
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// at follows a JSON pointer such as "#/components/schemas/CallItem".
func (d openAPIDoc) at(ref string) any {
	var v any = map[string]any(d)
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, _ := v.(map[string]any)
		v = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
	}
	return v
}

// deref follows $ref until a map without one.
func (d openAPIDoc) deref(v any) map[string]any {
	m, _ := v.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		m, _ = d.at(ref).(map[string]any)
	}
	return m
}

// responseSchema returns the schema the document gives for path, method, status and media type.
func (d openAPIDoc) responseSchema(t *testing.T, path, method string, status int, media string) map[string]any {
	t.Helper()
	op := d.deref(d.deref(d.deref(d["paths"])[path])[method])
	if op == nil {
		t.Fatalf("%s %s is not documented", method, path)
	}
	resp := d.deref(d.deref(op["responses"])[strconv.Itoa(status)])
	if resp == nil {
		t.Fatalf("%s %s: status %d is not documented", method, path, status)
	}
	content := d.deref(d.deref(resp["content"])[media])
	if content == nil {
		t.Fatalf("%s %s %d: %s is not documented", method, path, status, media)
	}
	return d.deref(content["schema"])
}

// validate reports where v, decoded JSON, breaks schema s: the subset of JSON Schema the
// document uses (type, enum, const, required, properties, items, oneOf, allOf, format
// date-time). Properties the schema does not name are allowed: responses are additive.
func (d openAPIDoc) validate(s map[string]any, v any, where string) []string {
	s = d.deref(s)
	if s == nil {
		return nil
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, where+": "+fmt.Sprintf(format, args...)) }
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			errs = append(errs, d.validate(d.deref(sub), v, where)...)
		}
	}
	if one, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, sub := range one {
			if len(d.validate(d.deref(sub), v, where)) == 0 {
				n++
			}
		}
		if n != 1 {
			bad("matches %d of oneOf's schemas, want 1", n)
		}
	}
	if typ, ok := s["type"]; ok {
		var types []string
		switch x := typ.(type) {
		case string:
			types = []string{x}
		case []any:
			for _, y := range x {
				types = append(types, fmt.Sprint(y))
			}
		}
		if !slices.Contains(types, jsonType(v)) && !(jsonType(v) == "integer" && slices.Contains(types, "number")) {
			bad("is %s, want %v", jsonType(v), types)
			return errs
		}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		bad("%v is not one of %v", v, enum)
	}
	if c, ok := s["const"]; ok && fmt.Sprint(c) != fmt.Sprint(v) {
		bad("%v is not %v", v, c)
	}
	if s["format"] == "date-time" {
		if str, ok := v.(string); ok {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				bad("%q is not a date-time", str)
			}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := obj[fmt.Sprint(r)]; !ok {
					bad("lacks %s", r)
				}
			}
		}
		props := d.deref(s["properties"])
		for name, pv := range obj {
			if ps, ok := props[name]; ok {
				errs = append(errs, d.validate(d.deref(ps), pv, where+"."+name)...)
			}
		}
	}
	if arr, ok := v.([]any); ok {
		for i, item := range arr {
			errs = append(errs, d.validate(d.deref(s["items"]), item, fmt.Sprintf("%s[%d]", where, i))...)
		}
	}
	return errs
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

// TestHistoryResponsesMatchOpenAPI drives the history's handlers into each of their answers
// against a real store, and checks every JSON body against the schema the OpenAPI document gives
// for that path, method and status; and that the server serves the document itself.
func TestHistoryResponsesMatchOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	e := start(t, backends()[0].db(t))
	reader, secret := e.newKey(e.org, nil, auth.ScopeCallsRead)
	if err := e.st.UpdateOrgRegion(t.Context(), e.org, store.Region{TimeZone: "Europe/London", Country: "GB"}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		historyEvent("call_received", "a", "inbound", 1, "2026-07-01T08:00:00Z", ""),
		batch(historyEvent("call_answered", "a", "inbound", 2, "2026-07-01T08:00:05Z", `,"answeredBy":"201","providerEventId":"pbx-7"`),
			historyEvent("call_ended", "a", "inbound", 3, "2026-07-01T08:03:05Z", `,"disposition":"answered","sipCode":200,"sipReason":"OK"`),
			historyEvent("call_recorded", "a", "inbound", 4, "2026-07-01T08:03:06Z", `,"url":"https://rec.example/a.wav"`)),
		historyEvent("call_placed", "b", "outbound", 1, "2026-07-02T08:00:00Z", ""),
	} {
		if r := e.post(body); r.status >= 300 {
			t.Fatalf("post: %d %s", r.status, r.raw)
		}
	}
	first := e.do("GET", "/api/v1/calls?limit=1", "", "Client-ID", reader, "Client-Secret", secret)
	var page struct {
		Items []struct{ ID string }
		Next  string
	}
	if err := json.Unmarshal(first.raw, &page); err != nil || page.Next == "" {
		t.Fatalf("first page: %v %s", err, first.raw)
	}
	last := e.do("GET", "/api/v1/calls?limit=1&cursor="+url.QueryEscape(page.Next), "", "Client-ID", reader, "Client-Secret", secret)
	var lastPage struct{ Items []struct{ ID string } }
	if err := json.Unmarshal(last.raw, &lastPage); err != nil || len(lastPage.Items) != 1 {
		t.Fatalf("last page: %v %s", err, last.raw)
	}
	callPath := "/api/v1/calls/" + lastPage.Items[0].ID
	eventsKey, eventsSecret := e.clientID, e.secret
	for _, tc := range []struct {
		name, path, docPath string
		key, secret         string
		status              int
	}{
		{"list", "/api/v1/calls", "/api/v1/calls", reader, secret, 200},
		{"first page", "/api/v1/calls?limit=1", "/api/v1/calls", reader, secret, 200},
		{"filters", "/api/v1/calls?from=2026-07-01&until=2026-07-01&outcome=answered&number=0111&recorded=true", "/api/v1/calls", reader, secret, 200},
		{"bad query", "/api/v1/calls?limit=0&outcome=lost", "/api/v1/calls", reader, secret, 400},
		{"no key", "/api/v1/calls", "/api/v1/calls", "", "", 401},
		{"no scope", "/api/v1/calls", "/api/v1/calls", eventsKey, eventsSecret, 403},
		{"call", callPath, "/api/v1/calls/{id}", reader, secret, 200},
		{"no such call", "/api/v1/calls/nope", "/api/v1/calls/{id}", reader, secret, 404},
		{"call without scope", callPath, "/api/v1/calls/{id}", eventsKey, eventsSecret, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.key != "" {
				headers = []string{"Client-ID", tc.key, "Client-Secret", tc.secret}
			}
			r := e.do("GET", tc.path, "", headers...)
			if r.status != tc.status {
				t.Fatalf("%s: %d, want %d: %s", tc.path, r.status, tc.status, r.raw)
			}
			var v any
			if err := json.Unmarshal(r.raw, &v); err != nil {
				t.Fatal(err)
			}
			for _, p := range doc.validate(doc.responseSchema(t, tc.docPath, "get", tc.status, "application/json"), v, "body") {
				t.Error(p)
			}
		})
	}
	// The check itself fails a body that breaks the schema.
	var broken any
	_ = json.Unmarshal([]byte(`{"items":[{"id":1,"outcome":"lost","startedAt":"yesterday"}],"next":7}`), &broken)
	if errs := doc.validate(doc.responseSchema(t, "/api/v1/calls", "get", 200, "application/json"), broken, "body"); len(errs) < 4 {
		t.Errorf("a broken page passes the check: %q", errs)
	}
	// The document the server serves is the one in docs/.
	r := e.do("GET", "/api/v1/openapi.yaml", "")
	want, _ := os.ReadFile("../../docs/api/openapi.yaml")
	if r.status != 200 || string(r.raw) != string(want) || !strings.HasPrefix(r.header.Get("Content-Type"), "application/yaml") {
		t.Errorf("GET /api/v1/openapi.yaml: %d %s, %d bytes; want the document", r.status, r.header.Get("Content-Type"), len(r.raw))
	}
}

// TestCallbackResponsesMatchOpenAPI drives the to-call-back list's handlers into each of their
// answers and checks every JSON body against the schema the OpenAPI document gives for it.
func TestCallbackResponsesMatchOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	e := start(t, backends()[0].db(t))
	reader, secret := e.newKey(e.org, nil, auth.ScopeCallsRead)
	desk, deskSecret := e.newKey(e.org, nil, auth.ScopeCallsRead, auth.ScopeCallbacksWrite)
	for _, body := range []string{
		batch(historyEvent("call_received", "m1", "inbound", 1, "2026-07-01T08:00:00Z", ""),
			historyEvent("call_missed", "m1", "inbound", 2, "2026-07-01T08:00:20Z", "")),
	} {
		if r := e.post(body); r.status >= 300 {
			t.Fatalf("post: %d %s", r.status, r.raw)
		}
	}
	eventsKey, eventsSecret := e.clientID, e.secret
	for _, tc := range []struct {
		name, method, path, docPath string
		key, secret                 string
		status                      int
	}{
		{"open", "GET", "/api/v1/callbacks", "/api/v1/callbacks", reader, secret, 200},
		{"bad query", "GET", "/api/v1/callbacks?state=lost&limit=0", "/api/v1/callbacks", reader, secret, 400},
		{"no key", "GET", "/api/v1/callbacks", "/api/v1/callbacks", "", "", 401},
		{"no scope", "GET", "/api/v1/callbacks", "/api/v1/callbacks", eventsKey, eventsSecret, 403},
		{"dismiss without scope", "POST", "/api/v1/callbacks/%2B15550100111/dismiss", "/api/v1/callbacks/{number}/dismiss", reader, secret, 403},
		{"dismiss", "POST", "/api/v1/callbacks/%2B15550100111/dismiss", "/api/v1/callbacks/{number}/dismiss", desk, deskSecret, 200},
		{"dismiss again", "POST", "/api/v1/callbacks/%2B15550100111/dismiss", "/api/v1/callbacks/{number}/dismiss", desk, deskSecret, 404},
		{"closed", "GET", "/api/v1/callbacks?state=closed", "/api/v1/callbacks", reader, secret, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.key != "" {
				headers = []string{"Client-ID", tc.key, "Client-Secret", tc.secret}
			}
			r := e.do(tc.method, tc.path, "", headers...)
			if r.status != tc.status {
				t.Fatalf("%s %s: %d, want %d: %s", tc.method, tc.path, r.status, tc.status, r.raw)
			}
			var v any
			if err := json.Unmarshal(r.raw, &v); err != nil {
				t.Fatal(err)
			}
			for _, p := range doc.validate(doc.responseSchema(t, tc.docPath, strings.ToLower(tc.method), tc.status, "application/json"), v, "body") {
				t.Error(p)
			}
		})
	}
}
