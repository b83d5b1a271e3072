package httpapi

import (
	"testing"

	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/popup"
)

// wantBody is the success body as encoding/json writes it: the reference appendSuccess must
// match byte for byte.
type wantBody struct {
	Success bool        `json:"success"`
	Calls   []wantCall  `json:"calls"`
	Events  []wantEvent `json:"events"`
}

type wantCall struct {
	ID             string       `json:"id"`
	ProviderCallID string       `json:"providerCallId"`
	Provider       string       `json:"provider"`
	Created        bool         `json:"created"`
	CRMClients     []wantClient `json:"crmClients"`
}

type wantClient struct {
	ExternalID string `json:"externalId"`
	Name       string `json:"name"`
}

type wantEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	DedupeKey string `json:"dedupeKey"`
	Duplicate bool   `json:"duplicate"`
}

func reference(t testing.TB, res ingest.Result) string {
	t.Helper()
	w := wantBody{Success: true, Calls: []wantCall{}, Events: []wantEvent{}}
	for _, c := range res.Calls {
		wc := wantCall{ID: c.ID, ProviderCallID: c.ProviderCallID, Provider: c.Provider, Created: c.Created, CRMClients: []wantClient{}}
		for _, cl := range c.Clients {
			wc.CRMClients = append(wc.CRMClients, wantClient(cl))
		}
		w.Calls = append(w.Calls, wc)
	}
	for _, e := range res.Events {
		w.Events = append(w.Events, wantEvent(e))
	}
	b, err := marshalNoEscape(w)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAppendSuccessMatchesEncodingJSON(t *testing.T) {
	odd := []string{
		"", "plain", `quote " and \ backslash`, "<tag>&amp;", "tab\tnew\nline\rcr\bbs\fff",
		"\x00\x01\x1f\x7f", "caf\u00e9 \u2028 \u2029 \U0001F4DE", "\xff\xfe broken \xc3", "sip:+44@example.com;user=phone",
	}
	tests := []struct {
		name string
		res  ingest.Result
	}{
		{"empty", ingest.Result{}},
		{"one call, no clients", ingest.Result{
			Calls:  []ingest.CallResult{{ID: "c1", ProviderCallID: "a", Provider: "sip", Created: true}},
			Events: []ingest.EventResult{{ID: "e1", Type: "call_received", DedupeKey: "call_received:0"}},
		}},
		{"two calls, clients, duplicates", ingest.Result{
			Calls: []ingest.CallResult{
				{ID: "c1", ProviderCallID: "a", Provider: "sip", Clients: []popup.Client{{ExternalID: "x1", Name: "Ada"}, {ExternalID: "x2", Name: "Bo"}}},
				{ID: "c2", ProviderCallID: "b", Provider: "sip", Created: true, Clients: []popup.Client{}},
			},
			Events: []ingest.EventResult{
				{ID: "e1", Type: "call_received", DedupeKey: "k1"},
				{ID: "e1", Type: "call_received", DedupeKey: "k1", Duplicate: true},
				{ID: "e2", Type: "call_ended", DedupeKey: "k2"},
			},
		}},
	}
	for _, s := range odd {
		tests = append(tests, struct {
			name string
			res  ingest.Result
		}{"string " + s, ingest.Result{
			Calls:  []ingest.CallResult{{ID: s, ProviderCallID: s, Provider: s, Clients: []popup.Client{{ExternalID: s, Name: s}}}},
			Events: []ingest.EventResult{{ID: s, Type: s, DedupeKey: s}},
		}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(appendSuccess(nil, tc.res))
			if want := reference(t, tc.res); got != want {
				t.Errorf("body\n got %s\nwant %s", got, want)
			}
		})
	}
}

func BenchmarkSuccessBody(b *testing.B) {
	res := ingest.Result{}
	for i := range 50 {
		id := "0190f3c4-7a1b-7c2d-8e3f-" + string(rune('a'+i%26)) + "00000000000"
		res.Calls = append(res.Calls, ingest.CallResult{ID: id, ProviderCallID: "pbx-" + id[:8], Provider: "sip", Created: true, Clients: []popup.Client{{ExternalID: "crm-1", Name: "Ada Lovelace"}}})
		res.Events = append(res.Events, ingest.EventResult{ID: id, Type: "call_received", DedupeKey: "call_received:0"})
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = appendSuccess(make([]byte, 0, successSize(res)), res)
	}
}
