package event

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// sipInvite is a SIP INVITE as a proxy would record it in raw.
const sipInvite = "INVITE sip:+442071234500@pbx.clinic.example SIP/2.0\r\n" +
	"Via: SIP/2.0/UDP 203.0.113.7:5060;branch=z9hG4bK776asdhds\r\n" +
	"From: \"Jane Doe\" <sip:+442071234567@carrier.example>;tag=1928301774\r\n" +
	"To: <sip:+442071234500@pbx.clinic.example>\r\n" +
	"Call-ID: a84b4c76e66710@carrier.example\r\n" +
	"CSeq: 314159 INVITE\r\n" +
	"Diversion: <sip:+442071234599@carrier.example>;reason=no-answer;counter=1\r\n" +
	"Content-Length: 0\r\n\r\n"

// goldenEvents returns a representative event of each of the nine types, keyed by type.
func goldenEvents() map[Type]Event {
	at := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	inbound := Call{
		Direction: Inbound,
		From:      &Party{Kind: KindE164, Number: "+442071234567", Name: "Jane Doe", URI: "sip:+442071234567@carrier.example"},
		To:        E164("+442071234500"),
		Trunk:     "carrier-1",
		Diversion: []Diversion{{Party: *E164("+442071234599"), Reason: "no-answer", Counter: Ptr(1)}},
	}
	raw, err := json.Marshal(map[string]string{"sip": sipInvite, "transport": "udp"})
	if err != nil {
		panic(err)
	}
	out := map[Type]Event{}

	e := New(CallReceived, "a84b4c76e66710@carrier.example", at, inbound)
	e.Provider = "kamailio"
	e.Sequence = 1
	e.Observer = ObserverProxy
	e.Locations = []string{"front-desk", "site_2"}
	e.Raw = raw
	out[CallReceived] = e

	e = New(CallPlaced, "out-7781", at.Add(time.Hour), Call{Direction: Outbound, From: Extension("101"), To: E164("+15551234567")})
	e.Provider = "3cx"
	e.ProviderEventID = "3cx-evt-1"
	e.Observer = ObserverPBXAPI
	out[CallPlaced] = e

	e = New(CallMissed, "anon-1", at.Add(2*time.Second), Call{Direction: Inbound, From: Anonymous(), To: E164("+442071234500")})
	e.Sequence = 3
	out[CallMissed] = e

	e = New(CallAnswered, "a84b4c76e66710@carrier.example", at.Add(7*time.Second+250*time.Millisecond), inbound)
	e.Provider = "kamailio"
	e.Sequence = 2
	e.Observer = ObserverProxy
	e.AnsweredBy = "101"
	out[CallAnswered] = e

	e = New(CallEnded, "a84b4c76e66710@carrier.example", at.Add(93*time.Second), inbound)
	e.Provider = "kamailio"
	e.Sequence = 5
	e.Disposition = DispositionAnswered
	e.Duration = Ptr(93.0)
	e.TalkTime = Ptr(85.75)
	e.AnsweredElsewhere = Ptr(false)
	e.SIPCode = Ptr(200)
	e.SIPReason = "OK"
	out[CallEnded] = e

	e = New(CallHold, "int-9", at.Add(40*time.Second), Call{Direction: Internal, From: Extension("101"), To: &Party{Kind: KindExtension, Extension: "102", Name: "Lab"}})
	e.ProviderEventID = "hold-9-1"
	e.Released = Ptr(true)
	out[CallHold] = e

	e = New(CallTransferred, "a84b4c76e66710@carrier.example", at.Add(50*time.Second), inbound)
	e.Provider = "kamailio"
	e.Sequence = 4
	e.TransferTo = &Party{Kind: KindExtension, Extension: "102", Name: "Dr Smith"}
	e.Mode = TransferAttended
	out[CallTransferred] = e

	e = New(CallRecorded, "a84b4c76e66710@carrier.example", at.Add(95*time.Second), inbound)
	e.Provider = "kamailio"
	e.Sequence = 6
	e.URL = "https://recordings.example.com/2026/03/01/a84b4c76.wav?sig=abc&exp=1"
	e.MIMEType = "audio/wav"
	e.Bytes = Ptr(int64(1487360))
	e.Duration = Ptr(92.5)
	out[CallRecorded] = e

	e = New(CallTranscribed, "a84b4c76e66710@carrier.example", at.Add(2*time.Minute), inbound)
	e.Provider = "kamailio"
	e.Sequence = 7
	e.Text = "Hello, I'd like to move my appointment to Thursday — is 3 pm free?"
	e.Language = "en-GB"
	e.Confidence = Ptr(0.93)
	out[CallTranscribed] = e
	return out
}

func TestGolden(t *testing.T) {
	events := goldenEvents()
	if len(events) != len(Types()) {
		t.Fatalf("%d golden events for %d types", len(events), len(Types()))
	}
	for _, typ := range Types() {
		t.Run(string(typ), func(t *testing.T) {
			e := events[typ]
			if err := e.Validate(); err != nil {
				t.Fatalf("golden event invalid: %v", err)
			}
			got, err := e.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			// The file holds the canonical JSON and a final newline.
			got = append(got, '\n')
			path := filepath.Join("testdata", string(typ)+".golden.json")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./sdk/event -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("canonical JSON differs from %s (run go test ./sdk/event -update if intended):\n got  %s\n want %s", path, got, want)
			}
			// json.Marshal of the value, of a pointer, and MarshalJSON agree.
			for _, v := range []any{e, &e} {
				b, err := json.Marshal(v)
				if err != nil || !bytes.Equal(append(b, '\n'), want) {
					t.Errorf("json.Marshal(%T) = %s, %v", v, b, err)
				}
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	for typ, e := range goldenEvents() {
		t.Run(string(typ), func(t *testing.T) {
			data, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			parsed, isBatch, err := ParseBody(data)
			if err != nil {
				t.Fatalf("ParseBody(Marshal(e)): %v\n%s", err, data)
			}
			if isBatch || len(parsed) != 1 {
				t.Fatalf("batch=%v n=%d", isBatch, len(parsed))
			}
			got := parsed[0].Event
			if !bytes.Equal(parsed[0].Body, data) {
				t.Errorf("Body is not the whole canonical object")
			}
			// Raw comes back as the bytes on the wire, which the encoder compacts and escapes;
			// compare it as JSON, and the rest field by field.
			if !jsonEqual(t, got.Raw, e.Raw) {
				t.Errorf("raw: got %s, want %s", got.Raw, e.Raw)
			}
			got.Raw, e.Raw = nil, nil
			if !reflect.DeepEqual(got, e) {
				t.Errorf("round trip:\n got  %#v\n want %#v", got, e)
			}
			// And through a batch.
			parsed, _, err = ParseBody([]byte(`{"events":[` + string(data) + `,` + string(data) + `]}`))
			if err != nil || len(parsed) != 2 || !bytes.Equal(parsed[1].Body, data) {
				t.Fatalf("in a batch: %v", err)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestMarshalJSONCanonical(t *testing.T) {
	// Absent fields are left out, occurredAt is written in UTC, and fields keep a fixed order.
	paris := time.FixedZone("CET", 3600)
	e := Event{Type: CallMissed, ProviderCallID: "c", OccurredAt: time.Date(2026, 3, 1, 10, 30, 0, 0, paris), Call: Call{Direction: Inbound}}
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"call_missed","providerCallId":"c","occurredAt":"2026-03-01T09:30:00Z","call":{"direction":"inbound"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if e.OccurredAt.Location() != paris {
		t.Fatal("MarshalJSON changed its receiver")
	}
	// Zero values that are present are written: false, 0.
	e.Type = CallEnded
	e.Duration, e.AnsweredElsewhere, e.SIPCode = Ptr(0.0), Ptr(false), Ptr(0)
	b, _ = e.MarshalJSON()
	want = `{"type":"call_ended","providerCallId":"c","occurredAt":"2026-03-01T09:30:00Z","call":{"direction":"inbound"},"duration":0,"answeredElsewhere":false,"sipCode":0}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestConstructors(t *testing.T) {
	at := time.Date(2026, 3, 1, 4, 30, 0, 0, time.FixedZone("EST", -5*3600))
	e := New(CallReceived, "c-1", at, Call{Direction: Inbound})
	if e.Type != CallReceived || e.ProviderCallID != "c-1" || e.Call.Direction != Inbound {
		t.Fatalf("New = %#v", e)
	}
	if e.OccurredAt.Location() != time.UTC || !e.OccurredAt.Equal(at) {
		t.Fatalf("New kept occurredAt as %v", e.OccurredAt)
	}
	if p := E164("+12"); *p != (Party{Kind: KindE164, Number: "+12"}) {
		t.Errorf("E164 = %#v", p)
	}
	if p := Extension("7"); *p != (Party{Kind: KindExtension, Extension: "7"}) {
		t.Errorf("Extension = %#v", p)
	}
	if p := Anonymous(); *p != (Party{Kind: KindAnonymous}) {
		t.Errorf("Anonymous = %#v", p)
	}
	if a, b := Anonymous(), Anonymous(); a == b {
		t.Errorf("Anonymous shares its result")
	}
	v := 3
	p := Ptr(v)
	v = 4
	if *p != 3 {
		t.Errorf("Ptr aliases its argument")
	}
}

func TestEffectiveDefaults(t *testing.T) {
	var e Event
	if got := e.EffectiveProvider(); got != "sip" {
		t.Errorf("EffectiveProvider() = %q", got)
	}
	if got := e.EffectiveObserver(); got != ObserverEndpoint {
		t.Errorf("EffectiveObserver() = %q", got)
	}
	if got := e.EffectiveLocations(); !slices.Equal(got, []string{"main"}) {
		t.Errorf("EffectiveLocations() = %q", got)
	}
	e.Locations = []string{}
	if got := e.EffectiveLocations(); !slices.Equal(got, []string{DefaultLocation}) {
		t.Errorf("EffectiveLocations() of empty = %q", got)
	}
	// The default is fresh each time, so a caller cannot change it for others.
	e.EffectiveLocations()[0] = "changed"
	if got := e.EffectiveLocations(); got[0] != "main" {
		t.Errorf("default location changed to %q", got[0])
	}

	e.Provider, e.Observer, e.Locations = "twilio", ObserverPBXAPI, []string{"lab", "front"}
	if e.EffectiveProvider() != "twilio" || e.EffectiveObserver() != ObserverPBXAPI || !slices.Equal(e.EffectiveLocations(), []string{"lab", "front"}) {
		t.Errorf("set values not returned: %q %q %q", e.EffectiveProvider(), e.EffectiveObserver(), e.EffectiveLocations())
	}

	if k := (Party{}).EffectiveKind(); k != KindE164 {
		t.Errorf("EffectiveKind() = %q", k)
	}
	if k := (Party{Kind: KindUnknown}).EffectiveKind(); k != KindUnknown {
		t.Errorf("EffectiveKind() = %q", k)
	}
}

func TestDedupeKey(t *testing.T) {
	tests := []struct {
		e    Event
		want string
	}{
		{Event{Type: CallReceived}, "call_received:0"},
		{Event{Type: CallHold, Sequence: 3}, "call_hold:3"},
		{Event{Type: CallEnded, Sequence: 1234567890}, "call_ended:1234567890"},
		{Event{Type: CallEnded, Sequence: math.MaxInt64}, "call_ended:9223372036854775807"},
		{Event{Type: CallEnded, Sequence: math.MinInt64}, "call_ended:-9223372036854775808"},
		{Event{Type: Type(strings.Repeat("t", 70)), Sequence: 7}, strings.Repeat("t", 70) + ":7"},
		{Event{Type: CallHold, Sequence: 3, ProviderEventID: "evt-42"}, "evt-42"},
		{Event{Type: CallHold, ProviderEventID: "call_hold:9"}, "call_hold:9"},
	}
	for _, tc := range tests {
		if got := tc.e.DedupeKey(); got != tc.want {
			t.Errorf("DedupeKey(%s, %d, %q) = %q, want %q", tc.e.Type, tc.e.Sequence, tc.e.ProviderEventID, got, tc.want)
		}
		if got := string(tc.e.AppendDedupeKey([]byte("k="))); got != "k="+tc.want {
			t.Errorf("AppendDedupeKey(%s, %d, %q) = %q, want %q", tc.e.Type, tc.e.Sequence, tc.e.ProviderEventID, got, "k="+tc.want)
		}
	}
}

func TestTypes(t *testing.T) {
	want := []Type{"call_received", "call_placed", "call_missed", "call_answered", "call_ended",
		"call_hold", "call_transferred", "call_recorded", "call_transcribed"}
	got := Types()
	if !slices.Equal(got, want) {
		t.Fatalf("Types() = %v", got)
	}
	for _, typ := range got {
		if !typ.Valid() {
			t.Errorf("%s not Valid", typ)
		}
	}
	got[0] = "changed"
	if Types()[0] != CallReceived {
		t.Fatal("Types() shares its slice")
	}
	for _, typ := range []Type{"", "CALL_RECEIVED", "call_ringing", "call_received ", "received"} {
		if typ.Valid() {
			t.Errorf("%q Valid", typ)
		}
	}
}

func TestEnumValid(t *testing.T) {
	for _, c := range []struct {
		valid func(string) bool
		good  []string
		bad   []string
	}{
		{func(s string) bool { return Observer(s).Valid() }, []string{"endpoint", "proxy", "pbx_api"}, []string{"", "pbx", "Proxy"}},
		{func(s string) bool { return Direction(s).Valid() }, []string{"inbound", "outbound", "internal"}, []string{"", "in", "INBOUND"}},
		{func(s string) bool { return PartyKind(s).Valid() }, []string{"e164", "extension", "anonymous", "unknown"}, []string{"", "E164", "sip"}},
		{func(s string) bool { return Disposition(s).Valid() }, []string{"answered", "no_answer", "busy", "cancelled", "rejected", "failed", "voicemail"}, []string{"", "canceled", "no-answer"}},
		{func(s string) bool { return TransferMode(s).Valid() }, []string{"blind", "attended"}, []string{"", "warm", "Blind"}},
	} {
		for _, s := range c.good {
			if !c.valid(s) {
				t.Errorf("%q not valid", s)
			}
		}
		for _, s := range c.bad {
			if c.valid(s) {
				t.Errorf("%q valid", s)
			}
		}
	}
}

// Validate judges events built in code, without the decoder.
func TestValidate(t *testing.T) {
	base := func() Event {
		return New(CallReceived, "c-1", time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC), Call{Direction: Inbound, From: E164("+442071234567")})
	}
	tests := []struct {
		name string
		edit func(*Event)
		want []string
	}{
		{"valid", func(*Event) {}, nil},
		{"zero event", func(e *Event) { *e = Event{} }, []string{"type|required", "providerCallId|required", "occurredAt|required", "call.direction|required"}},
		{"occurredAt before 1970", func(e *Event) { e.OccurredAt = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) }, []string{"occurredAt|1970"}},
		{"occurredAt year 10000", func(e *Event) { e.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, []string{"occurredAt|9999"}},
		{"sequence negative", func(e *Event) { e.Sequence = -1 }, []string{"sequence|zero or more"}},
		{"empty locations", func(e *Event) { e.Locations = []string{} }, []string{"locations|at least one"}},
		{"raw object", func(e *Event) { e.Raw = json.RawMessage(" {\"a\":1} ") }, nil},
		{"raw null", func(e *Event) { e.Raw = json.RawMessage("null") }, nil},
		{"raw array", func(e *Event) { e.Raw = json.RawMessage(`[1]`) }, []string{"raw|object or null"}},
		{"raw string", func(e *Event) { e.Raw = json.RawMessage(`"x"`) }, []string{"raw|object or null"}},
		{"raw truncated object", func(e *Event) { e.Raw = json.RawMessage(`{"a":`) }, []string{"raw|object or null"}},
		{"raw null with trailing text", func(e *Event) { e.Raw = json.RawMessage(`nullx`) }, []string{"raw|object or null"}},
		{"raw two objects", func(e *Event) { e.Raw = json.RawMessage(`{}{}`) }, []string{"raw|object or null"}},
		{"duration NaN", func(e *Event) { e.Type = CallEnded; e.Duration = Ptr(math.NaN()) }, []string{"duration|seconds"}},
		{"talkTime +Inf", func(e *Event) { e.Type = CallEnded; e.TalkTime = Ptr(math.Inf(1)) }, []string{"talkTime|seconds"}},
		{"confidence NaN", func(e *Event) { e.Type = CallTranscribed; e.Text = "a"; e.Confidence = Ptr(math.NaN()) }, []string{"confidence|0 to 1"}},
		{"confidence +Inf", func(e *Event) { e.Type = CallTranscribed; e.Text = "a"; e.Confidence = Ptr(math.Inf(1)) }, []string{"confidence|0 to 1"}},
		{"extra on wrong type", func(e *Event) { e.Released = Ptr(false); e.TransferTo = &Party{} }, []string{"released|not a field", "to|not a field"}},
		{"bad diversion counter", func(e *Event) { e.Call.Diversion = []Diversion{{Party: *Anonymous(), Counter: Ptr(-1)}} }, []string{"call.diversion[0].counter|0 to 100"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := base()
			tc.edit(&e)
			err := e.Validate()
			requireProblems(t, err, tc.want)
			if err == nil {
				// What Validate accepts, MarshalJSON can encode and ParseBody accepts.
				b, merr := json.Marshal(e)
				if merr != nil {
					t.Fatalf("valid event does not marshal: %v", merr)
				}
				if _, _, perr := ParseBody(b); perr != nil {
					t.Fatalf("valid event refused by ParseBody: %v\n%s", perr, b)
				}
			}
		})
	}
}

func TestCallCloneSharesNothing(t *testing.T) {
	n := 2
	orig := Call{Direction: Inbound, From: &Party{Number: "+15551230100"}, To: &Party{Extension: "201"},
		Diversion: []Diversion{{Party: Party{Number: "+15551230200"}, Reason: "no-answer", Counter: &n}}}
	c := orig.Clone()
	c.From.Number, c.To.Extension, c.Diversion[0].Reason, *c.Diversion[0].Counter = "x", "y", "z", 9
	if orig.From.Number != "+15551230100" || orig.To.Extension != "201" || orig.Diversion[0].Reason != "no-answer" || *orig.Diversion[0].Counter != 2 {
		t.Errorf("changing the clone changed the original: %+v", orig)
	}
	if empty := (Call{}).Clone(); empty.From != nil || empty.To != nil || empty.Diversion != nil {
		t.Errorf("the clone of an empty block is %+v", empty)
	}
}
