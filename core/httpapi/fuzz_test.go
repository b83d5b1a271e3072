package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/httpapi"
	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/popup"
)

// FuzzPostEvents sends arbitrary bodies, content types and credentials to the events endpoint:
// no input may produce a 500, a stack trace, or an answer without the failure body and trace id.
func FuzzPostEvents(f *testing.F) {
	seeds := []string{
		`{"type":"call_received","providerCallId":"a","occurredAt":"2026-03-01T09:30:00Z","call":{"direction":"inbound","from":{"number":"+442071234567"}}}`,
		`{"events":[{"type":"call_ended","providerCallId":"a","occurredAt":"2026-03-01T09:30:00Z","call":{"direction":"inbound"},"duration":3}]}`,
		`{"events":[]}`, `[`, `{"type":null}`, "\xff\xfe", `{"a":` + string(bytes.Repeat([]byte("["), 20000)),
	}
	for _, s := range seeds {
		f.Add([]byte(s), "application/json", "Bearer cwsk_x")
	}
	f.Add([]byte(`{}`), "text/plain; charset=\x00", "Basic Zm9vOmJhcg==")
	fed := auth.Principal{ClientID: "cwid_x", OrgID: "org_1", Scopes: []string{auth.ScopeCallsEvents}}
	res := ingest.Result{Calls: []ingest.CallResult{{ID: "c", ProviderCallID: "a", Provider: "sip", Created: true, Clients: []popup.Client{}}},
		Events: []ingest.EventResult{{ID: "e", Type: "call_received", DedupeKey: "call_received:0"}}}
	app, err := httpapi.New(httpapi.Options{Auth: fakeAuth{p: fed}, Ingest: fakeIngest{res: res}, BaseContext: context.Background(), BodyLimit: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, ctype, authz string) {
		req := httptest.NewRequest("POST", httpapi.EventsPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Authorization", authz)
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Skip("request not expressible over HTTP:", err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 500 {
			t.Fatalf("status %d for %q: %s", resp.StatusCode, body, raw)
		}
		if resp.Header.Get(httpapi.TraceHeader) == "" {
			t.Fatalf("no trace id, status %d", resp.StatusCode)
		}
		var out struct {
			Success *bool  `json:"success"`
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(raw, &out); err != nil || out.Success == nil {
			t.Fatalf("status %d, body not the API's shape: %s", resp.StatusCode, raw)
		}
		if resp.StatusCode >= 400 && (*out.Success || out.Error == "" || out.Message == "") {
			t.Fatalf("failure body incomplete: %s", raw)
		}
		if bytes.Contains(raw, []byte("goroutine ")) || bytes.Contains(raw, []byte(".go:")) {
			t.Fatalf("stack trace in response: %s", raw)
		}
	})
}
