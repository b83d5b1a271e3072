package event

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// plainEvent is an Event without its MarshalJSON: what encoding/json writes for it by reflection.
type plainEvent Event

// stdJSON is the canonical JSON as encoding/json writes it: the reference AppendJSON must equal.
func stdJSON(e Event) ([]byte, error) {
	e.OccurredAt = e.OccurredAt.UTC()
	return json.Marshal(plainEvent(e))
}

// sameJSON fails t unless AppendJSON and encoding/json agree on e: the same bytes, or both an
// error.
func sameJSON(t *testing.T, name string, e Event) {
	t.Helper()
	want, wantErr := stdJSON(e)
	prefix := []byte("prefix")
	got, err := e.AppendJSON(bytes.Clone(prefix))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%s: AppendJSON error %v, encoding/json error %v", name, err, wantErr)
	}
	if err != nil {
		if !bytes.Equal(got, prefix) {
			t.Fatalf("%s: AppendJSON failed and left %q, want the buffer unchanged", name, got)
		}
		return
	}
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("%s:\nAppendJSON    %s\nencoding/json %s", name, got, want)
	}
	m, err := e.MarshalJSON()
	if err != nil || !bytes.Equal(m, want) {
		t.Fatalf("%s: MarshalJSON = %s, %v", name, m, err)
	}
	// The same event with its raw in canonical form, as its maker would write it, encodes to
	// the same bytes when the raw is trusted.
	if len(e.Raw) > 0 {
		canon, err := appendCompact(nil, e.Raw)
		if err != nil {
			t.Fatalf("%s: raw encoded but does not compact: %v", name, err)
		}
		e.Raw = canon
	}
	if got, err := e.AppendJSONTrustingRaw(bytes.Clone(prefix)); err != nil || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("%s:\nAppendJSONTrustingRaw %s (%v)\nencoding/json         %s", name, got, err, want)
	}
}

// fullEvent sets every field, with text that needs every kind of escaping.
func fullEvent() Event {
	odd := "Zoë <\"x\" & 'y'>\\ \x01\t\n\u2028\u2029 \xff\xe2\x80 ☎"
	e := New(CallTransferred, "id-"+odd, time.Date(2026, 11, 26, 9, 0, 0, 123456789, time.FixedZone("x", 3600)), Call{
		Direction: Inbound,
		From:      &Party{Kind: KindE164, Number: "+15557654321", Name: odd, Extension: "12", URI: "sip:a@b"},
		To:        &Party{Kind: KindExtension, Extension: "100"},
		Trunk:     "trunk & co",
		Diversion: []Diversion{{Party: Party{Number: "+15551230100"}, Reason: "no-answer", Counter: Ptr(-2)}, {Reason: odd}},
	})
	e.Provider, e.Sequence, e.ProviderEventID, e.Observer = "sip<", -7, odd, ObserverProxy
	e.Locations = []string{"main", odd, ""}
	e.Raw = json.RawMessage(" { \"sip\" : \"a <b> & c\u2028\\u2028\\\"\\/\" , \"n\" : [ 1 , -0.5e+3 , true , false , null , { } , [ ] ] }\n")
	e.AnsweredBy, e.Disposition = "100", DispositionAnswered
	e.Duration, e.TalkTime, e.Confidence = Ptr(1e21), Ptr(1e-7), Ptr(0.000001)
	e.AnsweredElsewhere, e.Released = Ptr(true), Ptr(false)
	e.SIPCode, e.SIPReason = Ptr(486), odd
	e.TransferTo, e.Mode = &Party{URI: "sip:x@y;a=<b>"}, TransferBlind
	e.URL, e.MIMEType, e.Bytes = "https://x/?a=1&b=2", "audio/wav", Ptr(int64(math.MaxInt64))
	e.Text, e.Language = odd, "en-GB"
	return e
}

func TestAppendJSONAgreesWithEncodingJSON(t *testing.T) {
	for name, e := range goldenEvents() {
		sameJSON(t, "golden "+string(name), e)
	}
	sameJSON(t, "empty", Event{})
	sameJSON(t, "full", fullEvent())
	for _, f := range []float64{0, math.Copysign(0, -1), 0.5, 12.25, 1e-6, 9.99e-7, 1e20, 1e21, -1e-9, 123456789.123, math.MaxFloat64,
		math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1)} {
		e := fullEvent()
		e.Duration = Ptr(f)
		sameJSON(t, "duration "+strconv.FormatFloat(f, 'g', -1, 64), e)
	}
	for _, at := range []time.Time{{}, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -3600))} {
		e := fullEvent()
		e.OccurredAt = at
		sameJSON(t, "occurredAt "+at.String(), e)
	}
	for _, raw := range []string{`{}`, `[]`, `"s"`, `0`, `-0`, `1.5E-2`, `null`, ` true `, `{"a":1,}`, `{"a" 1}`, `[1,]`, `01`, `1.`,
		`-`, `1e`, `1e+`, `"\x01"`, `"\q"`, `"\u12"`, `"\u12G4"`, `"abc`, `{"a":1}x`, `{"a":1} {}`, `tru`, `nul`, `{`, `[`, `"`,
		"\"\xff\xfe\"", `{"<":">"}`, "\"\xe2\x80\xa8\"", "\"\xe2\x80\"", `"\\"`, `"\\\""`, "[\u00a0]", strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat(`{"a":`, 9999) + "1" + strings.Repeat("}", 9999)} {
		e := fullEvent()
		e.Raw = json.RawMessage(raw)
		sameJSON(t, "raw "+raw[:min(len(raw), 40)], e)
	}
}

// FuzzAppendJSON holds AppendJSON to encoding/json's bytes for any raw, any text and any number.
func FuzzAppendJSON(f *testing.F) {
	e := fullEvent()
	f.Add([]byte(e.Raw), "plain", 1.5)
	f.Add([]byte(`{"sip":"INVITE sip:100@pbx SIP/2.0\r\nFrom: <sip:a@b>;tag=1\r\n\r\n","src":"1.2.3.4:5060"}`), "Zoë <&>", 0.0)
	f.Add([]byte(`[1, 2 ,"\u2028", {"x" : null}]`), "\xff\u2028", 1e-7)
	f.Add([]byte(`{"a":}`), "", math.Inf(1))
	f.Fuzz(func(t *testing.T, raw []byte, s string, x float64) {
		e := fullEvent()
		e.Raw = raw
		e.Call.From.Name, e.SIPReason, e.Locations[1] = s, s, s
		e.Duration = Ptr(x)
		sameJSON(t, "fuzz", e)
	})
}

func BenchmarkMarshalJSON(b *testing.B) {
	sip := "INVITE sip:+15551230100@10.0.0.20:5060 SIP/2.0\r\n" + strings.Repeat("Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-1;rport\r\n", 4) +
		"From: \"Zoe\" <sip:+15557654321@203.0.113.5>;tag=8c2a1b\r\nTo: <sip:+15551230100@10.0.0.20>\r\nCall-ID: 1-4242@203.0.113.5\r\n" +
		"CSeq: 1 INVITE\r\nContact: <sip:+15557654321@203.0.113.5:5060>\r\nContent-Type: application/sdp\r\nContent-Length: 152\r\n\r\n" +
		"v=0\r\no=- 4242 4242 IN IP4 203.0.113.5\r\ns=-\r\nc=IN IP4 203.0.113.5\r\nt=0 0\r\nm=audio 6000 RTP/AVP 0 8 101\r\na=rtpmap:0 PCMU/8000\r\n"
	raw, err := json.Marshal(map[string]string{"sip": sip, "transport": "udp", "src": "203.0.113.5:5060", "dst": "10.0.0.20:5060", "seenAt": "2026-11-26T09:00:00.123456Z"})
	if err != nil {
		b.Fatal(err)
	}
	e := New(CallReceived, "1-4242@203.0.113.5", time.Now(), Call{Direction: Inbound, From: E164("+15557654321"), To: &Party{Kind: KindE164, Number: "+15551230100", Name: "Main"}})
	e.Provider, e.Sequence, e.ProviderEventID, e.Observer, e.Raw = "sip", 1, "sip-0123456789abcdef", ObserverProxy, raw
	e.Locations = []string{"main"}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
	}
}
