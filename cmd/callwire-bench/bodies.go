package main

import (
	"strconv"
	"strings"
	"time"
)

// The request mix of one call, in the order a reporter sends it.
const (
	reqReceived = iota // a lone call_received
	reqAnswered        // a lone call_answered
	reqTail            // a batch: call_ended, call_recorded, call_transcribed
	reqKinds
)

// reqName names request kind k of a call in reports.
func reqName(k int) string {
	switch k {
	case reqReceived:
		return "call_received"
	case reqAnswered:
		return "call_answered"
	}
	return "ended+recorded+transcribed"
}

// reqEvents is how many events request kind k of a call carries.
func reqEvents(k int) int64 {
	if k == reqTail {
		return 3
	}
	return 1
}

// eventsPerCall is the number of events one call reports.
const eventsPerCall = 5

// Placeholders of the body templates.
const (
	holeID  = "{{ID}}"  // providerCallId, also the SIP Call-ID
	holeAt  = "{{AT}}"  // occurredAt of the event
	holeNum = "{{NUM}}" // the caller's E.164 number
)

// The bodies of one call, written as a SIP proxy observing a clinic's PBX would report it. The
// raw objects carry the SIP messages the events were read from, escaped as JSON strings.
const (
	receivedTemplate = `{"type":"call_received","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":1,` +
		`"provider":"sip","observer":"proxy","locations":["front-desk"],` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"raw":{"transport":"udp","source":"198.51.100.20:5060","message":"` +
		`INVITE sip:101@pbx.clinic.example SIP/2.0\r\n` +
		`Via: SIP/2.0/UDP 198.51.100.20:5060;branch=z9hG4bK776asdhds;rport\r\n` +
		`Max-Forwards: 70\r\n` +
		`From: <sip:{{NUM}}@gw1.carrier.example>;tag=1928301774\r\n` +
		`To: <sip:101@pbx.clinic.example>\r\n` +
		`Call-ID: {{ID}}\r\n` +
		`CSeq: 314159 INVITE\r\n` +
		`Contact: <sip:{{NUM}}@198.51.100.20:5060>\r\n` +
		`User-Agent: CarrierGW/4.2\r\n` +
		`Content-Type: application/sdp\r\n` +
		`Content-Length: 142\r\n"}}`

	answeredTemplate = `{"type":"call_answered","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":2,` +
		`"provider":"sip","observer":"proxy","locations":["front-desk"],` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"answeredBy":"101",` +
		`"raw":{"transport":"udp","source":"10.0.0.5:5060","message":"` +
		`SIP/2.0 200 OK\r\n` +
		`Via: SIP/2.0/UDP 198.51.100.20:5060;branch=z9hG4bK776asdhds;rport=5060\r\n` +
		`From: <sip:{{NUM}}@gw1.carrier.example>;tag=1928301774\r\n` +
		`To: <sip:101@pbx.clinic.example>;tag=a6c85cf\r\n` +
		`Call-ID: {{ID}}\r\n` +
		`CSeq: 314159 INVITE\r\n` +
		`Contact: <sip:101@10.0.0.5:5060>\r\n` +
		`Content-Type: application/sdp\r\n` +
		`Content-Length: 131\r\n"}}`

	tailTemplate = `{"events":[` +
		`{"type":"call_ended","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":3,` +
		`"provider":"sip","observer":"proxy","locations":["front-desk"],` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"disposition":"answered","duration":187.4,"talkTime":171.9,"answeredElsewhere":false,` +
		`"sipCode":200,"sipReason":"OK",` +
		`"raw":{"transport":"udp","source":"198.51.100.20:5060","message":"` +
		`BYE sip:101@10.0.0.5:5060 SIP/2.0\r\n` +
		`Via: SIP/2.0/UDP 198.51.100.20:5060;branch=z9hG4bK5bd1f2\r\n` +
		`From: <sip:{{NUM}}@gw1.carrier.example>;tag=1928301774\r\n` +
		`To: <sip:101@pbx.clinic.example>;tag=a6c85cf\r\n` +
		`Call-ID: {{ID}}\r\n` +
		`CSeq: 314160 BYE\r\n` +
		`Content-Length: 0\r\n"}},` +
		`{"type":"call_recorded","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":4,` +
		`"provider":"sip","observer":"proxy","locations":["front-desk"],` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"url":"https://recordings.clinic.example/2026/11/20/{{ID}}.wav","mimeType":"audio/wav",` +
		`"bytes":2998400,"duration":187.4},` +
		`{"type":"call_transcribed","providerCallId":"{{ID}}","occurredAt":"{{AT}}","sequence":5,` +
		`"provider":"sip","observer":"proxy","locations":["front-desk"],` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
		`"to":{"kind":"extension","extension":"101","name":"Reception"},"trunk":"gw1.carrier.example"},` +
		`"text":"Hello, I would like to move my appointment on Thursday to the following week, ` +
		`ideally in the morning. My date of birth is the fourth of March.",` +
		`"language":"en-GB","confidence":0.93}` +
		`]}`
)

// template is a request body with holes for the values that change from call to call.
type template struct {
	parts []string // text around the holes: len(parts) == len(holes)+1
	holes []string // holeID, holeAt or holeNum, in order
}

// parseTemplate splits s at its holes.
func parseTemplate(s string) template {
	var t template
	for {
		at, which := -1, ""
		for _, h := range []string{holeID, holeAt, holeNum} {
			if i := strings.Index(s, h); i >= 0 && (at < 0 || i < at) {
				at, which = i, h
			}
		}
		if at < 0 {
			t.parts = append(t.parts, s)
			return t
		}
		t.parts = append(t.parts, s[:at])
		t.holes = append(t.holes, which)
		s = s[at+len(which):]
	}
}

// render returns the body with the holes filled.
func (t template) render(id, at, num string) []byte {
	n := 0
	for _, p := range t.parts {
		n += len(p)
	}
	b := make([]byte, 0, n+len(t.holes)*len(id))
	for i, h := range t.holes {
		b = append(b, t.parts[i]...)
		switch h {
		case holeID:
			b = append(b, id...)
		case holeAt:
			b = append(b, at...)
		case holeNum:
			b = append(b, num...)
		}
	}
	return append(b, t.parts[len(t.parts)-1]...)
}

// callMix renders the three request bodies of calls.
type callMix struct {
	tmpl [reqKinds]template
}

func newCallMix() callMix {
	return callMix{tmpl: [reqKinds]template{
		parseTemplate(receivedTemplate), parseTemplate(answeredTemplate), parseTemplate(tailTemplate),
	}}
}

// bodies returns the request bodies of one call. label tells phases apart, worker and n make the
// call unique within the phase; now dates the events (ringing 3 minutes ago, ended now).
func (m callMix) bodies(label string, worker, n int, now time.Time) [reqKinds][]byte {
	id := label + "-w" + strconv.Itoa(worker) + "-" + strconv.Itoa(n) + "@pbx.clinic.example"
	// A UK London number that differs from call to call.
	num := "+44207" + strconv.Itoa(1000000+(worker*7919+n*104729)%9000000)
	at := [reqKinds]string{
		now.Add(-190 * time.Second).UTC().Format(time.RFC3339Nano),
		now.Add(-172 * time.Second).UTC().Format(time.RFC3339Nano),
		now.UTC().Format(time.RFC3339Nano),
	}
	var out [reqKinds][]byte
	for k := range out {
		out[k] = m.tmpl[k].render(id, at[k], num)
	}
	return out
}
