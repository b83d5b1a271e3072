package httpapi_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/httpapi"
	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/sdk/event"
)

const openAPIPath = "../../docs/api/openapi.yaml"

// spec is the part of the OpenAPI document the tests read.
type spec struct {
	Paths      map[string]map[string]operation `yaml:"paths"`
	Components struct {
		Schemas   map[string]schema   `yaml:"schemas"`
		Responses map[string]response `yaml:"responses"`
	} `yaml:"components"`
}

type operation struct {
	Responses map[string]response `yaml:"responses"`
}

type response struct {
	Ref     string         `yaml:"$ref"`
	Headers map[string]any `yaml:"headers"`
}

type schema struct {
	Enum          []any             `yaml:"enum"`
	OneOf         []map[string]any  `yaml:"oneOf"`
	AllOf         []map[string]any  `yaml:"allOf"`
	Properties    map[string]schema `yaml:"properties"`
	Required      []string          `yaml:"required"`
	Const         any               `yaml:"const"`
	Discriminator struct {
		Mapping map[string]string `yaml:"mapping"`
	} `yaml:"discriminator"`
}

func loadSpec(t *testing.T) spec {
	t.Helper()
	data, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var s spec
	if err := yaml.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s is not valid YAML: %v", openAPIPath, err)
	}
	return s
}

// resolve follows a response $ref into components.responses.
func (s spec) resolve(t *testing.T, r response) response {
	t.Helper()
	if r.Ref == "" {
		return r
	}
	name, ok := strings.CutPrefix(r.Ref, "#/components/responses/")
	target, found := s.Components.Responses[name]
	if !ok || !found {
		t.Fatalf("unresolvable response $ref %q", r.Ref)
	}
	return target
}

func schemaName(t *testing.T, ref any) string {
	t.Helper()
	s, _ := ref.(string)
	name, ok := strings.CutPrefix(s, "#/components/schemas/")
	if !ok {
		t.Fatalf("unexpected schema $ref %v", ref)
	}
	return name
}

// TestOpenAPIEventTypes checks that every event type of sdk/event has its schema, mapped by the
// Event's discriminator and listed in its oneOf. TestOpenAPIEventSchemaAgrees checks their
// members.
func TestOpenAPIEventTypes(t *testing.T) {
	s := loadSpec(t)
	schemas := s.Components.Schemas

	var enum []string
	for _, v := range schemas["EventType"].Enum {
		enum = append(enum, fmt.Sprint(v))
	}
	var types []string
	for _, ty := range event.Types() {
		types = append(types, string(ty))
	}
	if !slices.Equal(enum, types) {
		t.Errorf("EventType enum %v, want %v", enum, types)
	}

	ev := schemas["Event"]
	if len(ev.OneOf) != len(types) {
		t.Errorf("Event.oneOf has %d entries, want %d", len(ev.OneOf), len(types))
	}
	for _, ty := range types {
		ref, ok := ev.Discriminator.Mapping[ty]
		if !ok {
			t.Errorf("Event discriminator does not map %s", ty)
			continue
		}
		name := schemaName(t, ref)
		sc, ok := schemas[name]
		if !ok {
			t.Errorf("%s maps to missing schema %s", ty, name)
			continue
		}
		if got := fmt.Sprint(sc.Properties["type"].Const); got != ty {
			t.Errorf("schema %s: type const %q, want %q", name, got, ty)
		}
		if !slices.ContainsFunc(ev.OneOf, func(m map[string]any) bool { return m["$ref"] == ref }) {
			t.Errorf("Event.oneOf does not list %s", ref)
		}
	}
}

// TestOpenAPIEventSchemaAgrees checks the OpenAPI document's event schemas against the schema
// sdk/event is generated from (event.Fields): EventEnvelope lists exactly the members every event
// type carries and each type's schema exactly those of its type alone, Call, PartyFields and
// Diversion exactly the members of a call block, a party and a diversion hop, and each requires
// exactly what the schema requires of it.
func TestOpenAPIEventSchemaAgrees(t *testing.T) {
	s := loadSpec(t)
	schemas := s.Components.Schemas
	typeSchema := map[event.Type]string{}
	for ty, ref := range schemas["Event"].Discriminator.Mapping {
		typeSchema[event.Type(ty)] = schemaName(t, ref)
	}
	type members struct{ properties, required []string }
	want := map[string]*members{"EventEnvelope": {}, "Call": {}, "PartyFields": {}, "Diversion": {}}
	for _, ty := range event.Types() {
		want[typeSchema[ty]] = &members{}
	}
	seen := map[string]bool{}
	for _, f := range event.Fields() {
		if seen[f.Object+"."+f.Key] {
			continue // a party's members are listed under each member that holds a party
		}
		seen[f.Object+"."+f.Key] = true
		var in []string
		switch f.Object {
		case "event":
			in = []string{"EventEnvelope"}
			if f.Types != nil {
				in = nil
				for _, ty := range f.Types {
					in = append(in, typeSchema[ty])
				}
			}
		case "call":
			in = []string{"Call"}
		case "party":
			in = []string{"PartyFields"}
		case "diversion":
			in = []string{"Diversion"}
		default:
			t.Fatalf("event.Fields names object %q", f.Object)
		}
		for _, name := range in {
			want[name].properties = append(want[name].properties, f.Key)
			if f.Required {
				want[name].required = append(want[name].required, f.Key)
			}
		}
		if f.RequiredFor != "" {
			name := typeSchema[f.RequiredFor]
			want[name].required = append(want[name].required, f.Key)
		}
	}
	for name, w := range want {
		sc, ok := schemas[name]
		if !ok {
			t.Errorf("the document has no schema %s", name)
			continue
		}
		var got []string
		for p := range sc.Properties {
			// A type's schema fixes the envelope's type to its own.
			if p != "type" || name == "EventEnvelope" {
				got = append(got, p)
			}
		}
		slices.Sort(got)
		slices.Sort(w.properties)
		if !slices.Equal(got, w.properties) {
			t.Errorf("schema %s has properties %v; the event schema has %v", name, got, w.properties)
		}
		required := slices.Sorted(slices.Values(sc.Required))
		slices.Sort(w.required)
		if !slices.Equal(required, w.required) {
			t.Errorf("schema %s requires %v; the event schema requires %v", name, required, w.required)
		}
	}
}

// TestOpenAPIStatusesInSource checks that every status the HTTP layer names in its source is
// documented somewhere in the OpenAPI document, so a new status cannot go undocumented.
func TestOpenAPIStatusesInSource(t *testing.T) {
	s := loadSpec(t)
	documented := map[string]bool{}
	for _, ops := range s.Paths {
		for _, op := range ops {
			for code := range op.Responses {
				documented[code] = true
			}
		}
	}
	// 404 answers any path the document does not list, and 408 and 431 any request before a
	// route is known, so they live only in components.
	for code, name := range map[string]string{"404": "NotFound", "408": "RequestTimeout", "431": "RequestHeaderFieldsTooLarge"} {
		if _, ok := s.Components.Responses[name]; ok {
			documented[code] = true
		}
	}
	known := map[string]int{
		"StatusOK": 200, "StatusCreated": 201, "StatusBadRequest": 400, "StatusUnauthorized": 401,
		"StatusForbidden": 403, "StatusNotFound": 404, "StatusMethodNotAllowed": 405,
		"StatusRequestEntityTooLarge": 413, "StatusInternalServerError": 500,
		"StatusRequestTimeout": 408, "StatusRequestHeaderFieldsTooLarge": 431,
		"StatusNotImplemented": 501, "StatusServiceUnavailable": 503,
	}
	fset := token.NewFileSet()
	sources, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, name := range sources {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(sel.Sel.Name, "Status") {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "fiber" {
				return true
			}
			found++
			code, ok := known[sel.Sel.Name]
			if !ok {
				t.Errorf("%s: the package uses %s, which this test does not know: document it in %s and add it here",
					fset.Position(sel.Pos()), sel.Sel.Name, openAPIPath)
				return true
			}
			if !documented[strconv.Itoa(code)] {
				t.Errorf("%s: status %d (%s) is not documented in %s", fset.Position(sel.Pos()), code, sel.Sel.Name, openAPIPath)
			}
			return true
		})
	}
	if found == 0 {
		t.Fatal("found no status constants in the package's source")
	}
}

// fakeAuth returns a fixed principal or error.
type fakeAuth struct {
	p   auth.Principal
	err error
}

func (f fakeAuth) Authenticate(context.Context, auth.Credentials) (auth.Principal, error) {
	return f.p, f.err
}

func (f fakeAuth) Resolve(context.Context, auth.Credentials) (auth.Resolution, error) {
	return auth.Resolution{Principal: f.p, Verified: true}, f.err
}

func (f fakeAuth) Forget(auth.KeyCheck) {}

// brokenPopups is a broker that cannot be reached.
type brokenPopups struct{}

func (brokenPopups) Subscribe(context.Context, string, []string) (popup.Subscription, error) {
	return nil, errors.New("broker unreachable")
}

// fakeIngest returns a fixed result or error.
type fakeIngest struct {
	res ingest.Result
	err error
}

func (f fakeIngest) Ingest(context.Context, string, string, []event.Parsed, *auth.KeyCheck) (ingest.Result, error) {
	return f.res, f.err
}

// TestOpenAPIStatusesServed drives the handler into each of its answers and checks that the
// status is documented for that path and method, with the X-Trace-ID header.
func TestOpenAPIStatusesServed(t *testing.T) {
	s := loadSpec(t)
	body := `{"type":"call_received","providerCallId":"a","occurredAt":"2026-03-01T09:30:00Z","call":{"direction":"inbound","from":{"number":"+442071234567"}}}`
	fed := auth.Principal{ClientID: "cwid_x", OrgID: "org_1", Scopes: []string{auth.ScopeCallsEvents}}
	created := ingest.Result{Calls: []ingest.CallResult{{ID: "c", ProviderCallID: "a", Provider: "sip", Created: true, Clients: []popup.Client{}}},
		Events: []ingest.EventResult{{ID: "e", Type: "call_received", DedupeKey: "call_received:0"}}}
	existing := created
	existing.Calls = []ingest.CallResult{{ID: "c", ProviderCallID: "a", Provider: "sip", Clients: []popup.Client{}}}
	desk := auth.Principal{ClientID: "cwid_d", OrgID: "org_1", Scopes: []string{auth.ScopePopupsRead}}
	mem := popup.NewMemory(popup.MemoryOptions{})
	t.Cleanup(func() { mem.Close() })

	tests := []struct {
		name         string
		method, path string
		body         string
		ctype        string
		auth         fakeAuth
		ingest       fakeIngest
		ready        error
		popups       httpapi.Popups
		broker       httpapi.BrokerHealth
		want         int
		docMethod    string // the documented operation holding the status, when not method itself
		documentedAt string // "-" when the status is documented in components only
	}{
		{name: "created", want: 201, auth: fakeAuth{p: fed}, ingest: fakeIngest{res: created}},
		{name: "existing", want: 200, auth: fakeAuth{p: fed}, ingest: fakeIngest{res: existing}},
		{name: "invalid body", want: 400, auth: fakeAuth{p: fed}, body: `{"type":"call_exploded"}`},
		{name: "wrong content type", want: 400, auth: fakeAuth{p: fed}, ctype: "text/plain"},
		{name: "unauthenticated", want: 401, auth: fakeAuth{err: &auth.Error{Kind: auth.KindUnauthenticated, Message: "no"}}},
		{name: "key rejected by the store", want: 401, auth: fakeAuth{p: fed}, ingest: fakeIngest{err: fmt.Errorf("x: %w", ingest.ErrKeyRejected)}},
		{name: "missing scope", want: 403, auth: fakeAuth{p: auth.Principal{ClientID: "cwid_x", OrgID: "org_1"}}},
		{name: "operator key", want: 403, auth: fakeAuth{p: auth.Principal{ClientID: "cwid_x", Scopes: []string{auth.ScopeCallsEvents}}}},
		{name: "wrong method", method: "GET", docMethod: "POST", want: 405},
		{name: "too large", want: 413, body: strings.Repeat(" ", 8192) + body},
		{name: "store failure", want: 500, auth: fakeAuth{p: fed}, ingest: fakeIngest{err: errors.New("boom")}},
		{name: "store unavailable", want: 503, auth: fakeAuth{p: fed}, ingest: fakeIngest{err: fmt.Errorf("x: %w", ingest.ErrUnavailable)}},
		{name: "key store unavailable", want: 503, auth: fakeAuth{err: &auth.Error{Kind: auth.KindUnavailable, Message: "later"}}},
		{name: "healthz", method: "GET", path: "/healthz", want: 200},
		{name: "healthz method", method: "POST", path: "/healthz", docMethod: "GET", want: 405},
		{name: "readyz", method: "GET", path: "/readyz", want: 200},
		{name: "readyz failing", method: "GET", path: "/readyz", ready: errors.New("down"), want: 503},
		{name: "readyz broker degraded", method: "GET", path: "/readyz", broker: brokerState(false), want: 200},
		{name: "metrics", method: "GET", path: "/metrics", want: 200},
		{name: "no such path", method: "GET", path: "/api/v1/clinics", want: 404, documentedAt: "-"},
		{name: "stream", method: "GET", path: httpapi.PopupsStreamPath, auth: fakeAuth{p: desk}, want: 200},
		{name: "stream bad locations", method: "GET", path: httpapi.PopupsStreamPath + "?locations=A", auth: fakeAuth{p: desk}, want: 400},
		{name: "stream unauthenticated", method: "GET", path: httpapi.PopupsStreamPath, auth: fakeAuth{err: &auth.Error{Kind: auth.KindUnauthenticated, Message: "no"}}, want: 401},
		{name: "stream missing scope", method: "GET", path: httpapi.PopupsStreamPath, auth: fakeAuth{p: fed}, want: 403},
		{name: "stream broker down", method: "GET", path: httpapi.PopupsStreamPath, auth: fakeAuth{p: desk}, popups: brokenPopups{}, want: 503},
		{name: "stream broker known down", method: "GET", path: httpapi.PopupsStreamPath, auth: fakeAuth{p: desk}, broker: brokerState(false), want: 503},
		{name: "stream store failure", method: "GET", path: httpapi.PopupsStreamPath, auth: fakeAuth{err: errors.New("boom")}, want: 500},
		{name: "stream method", method: "POST", path: httpapi.PopupsStreamPath, docMethod: "GET", want: 405},
		{name: "desk", method: "GET", path: httpapi.DeskPath, want: 200},
		{name: "desk method", method: "POST", path: httpapi.DeskPath, docMethod: "GET", want: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, path := cmp.Or(tt.method, "POST"), cmp.Or(tt.path, httpapi.EventsPath)
			reg := prometheus.NewRegistry()
			app, err := httpapi.New(httpapi.Options{
				Auth: tt.auth, Ingest: tt.ingest, BaseContext: t.Context(), BodyLimit: 4096,
				Ready:      func(context.Context) error { return tt.ready },
				Registerer: reg, Gatherer: reg,
				Popups: cmp.Or[httpapi.Popups](tt.popups, mem),
				Broker: tt.broker,
			})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = app.Listener(ln) }()
			t.Cleanup(func() { _ = app.Shutdown() })
			req, err := http.NewRequestWithContext(t.Context(), method, "http://"+ln.Addr().String()+path,
				strings.NewReader(cmp.Or(tt.body, body)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", cmp.Or(tt.ctype, "application/json"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %s answered %d, want %d", method, path, resp.StatusCode, tt.want)
			}
			if resp.Header.Get(httpapi.TraceHeader) == "" {
				t.Errorf("no %s header", httpapi.TraceHeader)
			}
			code := strconv.Itoa(resp.StatusCode)
			var r response
			if tt.documentedAt == "-" {
				var ok bool
				if r, ok = s.Components.Responses["NotFound"]; !ok {
					t.Fatalf("components.responses.NotFound is missing")
				}
			} else {
				op, ok := s.Paths[strings.Split(path, "?")[0]][strings.ToLower(cmp.Or(tt.docMethod, method))]
				if !ok {
					t.Fatalf("%s %s is not documented", method, path)
				}
				if r, ok = op.Responses[code]; !ok {
					t.Fatalf("%s %s: status %s is not documented", method, path, code)
				}
			}
			r = s.resolve(t, r)
			if _, ok := r.Headers[httpapi.TraceHeader]; !ok {
				t.Errorf("%s %s %s: the documented response lacks the %s header", method, path, code, httpapi.TraceHeader)
			}
			if resp.StatusCode == 503 {
				if resp.Header.Get("Retry-After") == "" {
					t.Error("503 without Retry-After")
				}
				if _, ok := r.Headers["Retry-After"]; !ok {
					t.Error("documented 503 lacks Retry-After")
				}
			}
		})
	}
}

// TestOpenAPITraceHeaderEverywhere checks that every documented response declares X-Trace-ID.
func TestOpenAPITraceHeaderEverywhere(t *testing.T) {
	s := loadSpec(t)
	for path, ops := range s.Paths {
		for method, op := range ops {
			for code, r := range op.Responses {
				if _, ok := s.resolve(t, r).Headers[httpapi.TraceHeader]; !ok {
					t.Errorf("%s %s %s: no %s header", method, path, code, httpapi.TraceHeader)
				}
			}
		}
	}
	for name, r := range s.Components.Responses {
		if _, ok := r.Headers[httpapi.TraceHeader]; !ok {
			t.Errorf("components.responses.%s: no %s header", name, httpapi.TraceHeader)
		}
	}
}
