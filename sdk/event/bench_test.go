package event

import (
	"strconv"
	"strings"
	"testing"
)

// benchEvent is a typical single call_received body: about 600 bytes, most of it the raw SIP
// INVITE a proxy saw.
func benchEvent(seq int) string {
	return `{"type":"call_received","providerCallId":"a84b4c76e66710@carrier.example","occurredAt":"2026-03-01T09:30:00Z",` +
		`"call":{"direction":"inbound","from":{"number":"+442071234567","name":"Jane Doe"},"to":{"number":"+442071234500"}},` +
		`"provider":"kamailio","sequence":` + strconv.Itoa(seq) + `,"observer":"proxy","locations":["front-desk"],` +
		`"raw":{"sip":"INVITE sip:+442071234500@pbx.clinic.example SIP/2.0\r\nVia: SIP/2.0/UDP 203.0.113.7:5060;branch=z9hG4bK776asdhds\r\n` +
		`From: \"Jane Doe\" <sip:+442071234567@carrier.example>;tag=1928301774\r\nTo: <sip:+442071234500@pbx.clinic.example>\r\n` +
		`Call-ID: a84b4c76e66710@carrier.example\r\nCSeq: 314159 INVITE\r\nContent-Length: 0\r\n\r\n"}}`
}

// BenchmarkParseBody parses a single event, a report's tail of three, a batch of 50 and a batch of
// 50 with a problem, each three ways: ParseBody, a Parser kept from body to body (Parse), whose
// memory serves a body with a problem, and a Parser with a Room kept too (ParseInto), whose
// memory serves the events of a body without.
func BenchmarkParseBody(b *testing.B) {
	tail := batch(
		evt("call_ended", `"sequence":5,"disposition":"answered","duration":93,"talkTime":85.75,"sipCode":200,"sipReason":"OK"`),
		evt("call_recorded", `"sequence":6,"url":"https://recordings.example.com/a84b4c76.wav","mimeType":"audio/wav","bytes":1487360,"duration":92.5`),
		evt("call_transcribed", `"sequence":7,"text":"Hello, I'd like to move my appointment to Thursday.","language":"en-GB","confidence":0.93`),
	)
	// A batch of 50 with one problem, which is read again as a tree to list it.
	wrong := strings.Replace(bulk(), `"sequence":5,`, `"sequence":-5,`, 1)
	for _, bc := range []struct {
		name string
		body []byte
		n    int // events parsed; 0 when the body is refused
	}{
		{"single", []byte(benchEvent(1)), 1},
		{"batch3", []byte(tail), 3},
		{"batch50", []byte(bulk()), 50},
		{"batch50wrong", []byte(wrong), 0},
	} {
		if parsed, _, err := ParseBody(bc.body); len(parsed) != bc.n || (err == nil) != (bc.n > 0) {
			b.Fatalf("%s: %d events, %v", bc.name, len(parsed), err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				parsed, _, err := ParseBody(bc.body)
				if len(parsed) != bc.n || (err == nil) != (bc.n > 0) {
					b.Fatal(err)
				}
			}
		})
		// As the service parses: with a Parser kept from one body to the next.
		b.Run(bc.name+"/parser", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			var p Parser
			for b.Loop() {
				parsed, _, err := p.Parse(bc.body)
				if len(parsed) != bc.n || (err == nil) != (bc.n > 0) {
					b.Fatal(err)
				}
			}
		})
		// As the endpoint parses: with a Parser and a Room kept from one body to the next.
		b.Run(bc.name+"/room", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			var p Parser
			var r Room
			for b.Loop() {
				parsed, _, err := p.ParseInto(&r, bc.body)
				if len(parsed) != bc.n || (err == nil) != (bc.n > 0) {
					b.Fatal(err)
				}
				r.Forget()
			}
		})
	}
}

// bulk is a batch of 50 events, five of each of ten calls, as a system reporting after the fact
// sends them: each a benchEvent under its own call and sequence.
func bulk() string {
	events := make([]string, 0, 50)
	for c := range 10 {
		for seq := 1; seq <= 5; seq++ {
			e := strings.Replace(benchEvent(seq), "a84b4c76e66710@", "a84b4c76e66710-"+strconv.Itoa(c)+"@", 1)
			events = append(events, e)
		}
	}
	return batch(events...)
}
