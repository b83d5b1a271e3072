package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The requests of one call in the realistic mix, in the order a reporter sends it.
const (
	reqReceived = iota // a lone call_received
	reqAnswered        // a lone call_answered
	reqTail            // a batch: call_ended, call_recorded, call_transcribed
)

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

// render returns the body with the holes filled. When starts is not nil, the offset in the body
// of each part of the template is appended to it.
func (t template) render(id, at, num string, starts *[]int) []byte {
	n := 0
	for _, p := range t.parts {
		n += len(p)
	}
	b := make([]byte, 0, n+len(t.holes)*len(id))
	for i, h := range t.holes {
		if starts != nil {
			*starts = append(*starts, len(b))
		}
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
	if starts != nil {
		*starts = append(*starts, len(b))
	}
	return append(b, t.parts[len(t.parts)-1]...)
}

// request is one request of a unit of work: its kind (an index into the mix's requests), its
// body, and, when the phase asked for them, the raw-SQL ceiling's parameters built from it.
type request struct {
	kind int
	body []byte
	raw  *rawWrite
}

// reqSpec is one request of a mix's unit of work.
type reqSpec struct {
	name   string
	tmpl   template
	events int64
	// plan is what the raw-SQL ceiling needs of the request, found once from a sample.
	plan rawPlan
}

// callMix renders the request bodies of a unit of work: for the realistic mix one call reported
// in three requests, for the bulk mix one batch of ten whole calls.
type callMix struct {
	name  string
	reqs  []reqSpec
	calls int64 // calls per unit
	// ats are the occurredAt of each request, as offsets from the time the unit is rendered.
	ats []time.Duration
}

// Mix names.
const (
	mixRealistic = "realistic"
	mixBulk      = "bulk"
)

// newMix returns the named mix, its raw-SQL plans made from sample bodies.
func newMix(name string) (callMix, error) {
	var m callMix
	switch name {
	case mixRealistic:
		m = callMix{name: name, calls: 1, ats: []time.Duration{-190 * time.Second, -172 * time.Second, 0}, reqs: []reqSpec{
			{name: "call_received", tmpl: parseTemplate(receivedTemplate), events: 1},
			{name: "call_answered", tmpl: parseTemplate(answeredTemplate), events: 1},
			{name: "ended+recorded+transcribed", tmpl: parseTemplate(tailTemplate), events: 3},
		}}
	case mixBulk:
		m = callMix{name: name, calls: bulkCalls, ats: []time.Duration{0}, reqs: []reqSpec{
			{name: "batch of 10 calls", tmpl: parseTemplate(bulkTemplate()), events: bulkCalls * eventsPerCall},
		}}
	default:
		return callMix{}, fmt.Errorf("unknown mix %q (want realistic or bulk)", name)
	}
	for k := range m.reqs {
		p, err := planRaw(m.reqs[k].tmpl)
		if err != nil {
			return callMix{}, fmt.Errorf("mix %s, %s: %w", name, m.reqs[k].name, err)
		}
		if int64(len(p.events)) != m.reqs[k].events {
			return callMix{}, fmt.Errorf("mix %s, %s: %d events, want %d", name, m.reqs[k].name, len(p.events), m.reqs[k].events)
		}
		m.reqs[k].plan = p
	}
	return m, nil
}

// eventsPerUnit is how many events one unit of the mix reports.
func (m callMix) eventsPerUnit() int64 {
	var n int64
	for _, r := range m.reqs {
		n += r.events
	}
	return n
}

// unitID returns the identifier of a unit: label tells phases apart, worker and n make it unique
// within the phase. The realistic mix uses it as the providerCallId, and the bulk mix as the
// stem of its calls'. It is shaped as a SIP Call-ID: it starts with digits that look random, so
// that calls land all over the index of (organization, provider, providerCallId) as a PBX's
// calls do, not beside the last call their worker made.
func unitID(label string, worker, n int) string {
	return callIDStem(label, int64(worker), int64(n)) + "-w" + strconv.Itoa(worker) + "-" + strconv.Itoa(n) + "@pbx.clinic.example"
}

// callIDStem returns 12 hex digits derived from label, a and b, then "-" and label.
func callIDStem(label string, a, b int64) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", label, a, b))
	return hex.EncodeToString(sum[:6]) + "-" + label
}

// render returns the requests of one unit. now dates the events (for the realistic mix: ringing
// 3 minutes ago, ended now). With orgID set it also builds each request's raw-SQL parameters.
func (m callMix) render(label string, worker, n int, now time.Time, orgID string) []request {
	id := unitID(label, worker, n)
	// A UK London number that differs from call to call.
	num := "+44207" + strconv.Itoa(1000000+(worker*7919+n*104729)%9000000)
	out := make([]request, len(m.reqs))
	var starts []int
	for k := range m.reqs {
		at := now.Add(m.ats[k]).UTC()
		if orgID == "" {
			out[k] = request{kind: k, body: m.reqs[k].tmpl.render(id, at.Format(time.RFC3339Nano), num, nil)}
			continue
		}
		starts = starts[:0]
		body := m.reqs[k].tmpl.render(id, at.Format(time.RFC3339Nano), num, &starts)
		out[k] = request{kind: k, body: body, raw: m.reqs[k].plan.build(orgID, id, at, body, starts)}
	}
	return out
}

// bulkCalls is the number of calls in one request of the bulk mix.
const bulkCalls = 10

// The events of one call in the bulk mix: about 400 bytes each, the whole call in one batch, as
// a system that reports after the fact (a call-detail export, a reconnecting agent) sends it.
// {{ID}} is followed by the call's index in the batch.
const bulkCallTemplate = `{"type":"call_received","providerCallId":"{{ID}}.%d","occurredAt":"{{AT}}","sequence":1,` +
	`"provider":"sip","locations":["front-desk"],` +
	`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
	`"to":{"kind":"extension","extension":"101","name":"Reception"}},` +
	`"raw":{"transport":"udp","source":"198.51.100.20:5060"}},` +
	`{"type":"call_answered","providerCallId":"{{ID}}.%d","occurredAt":"{{AT}}","sequence":2,` +
	`"provider":"sip","locations":["front-desk"],` +
	`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
	`"to":{"kind":"extension","extension":"101","name":"Reception"}},` +
	`"answeredBy":"101","raw":{"transport":"udp","source":"10.0.0.5:5060"}},` +
	`{"type":"call_ended","providerCallId":"{{ID}}.%d","occurredAt":"{{AT}}","sequence":3,` +
	`"provider":"sip","locations":["front-desk"],` +
	`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
	`"to":{"kind":"extension","extension":"101","name":"Reception"}},` +
	`"disposition":"answered","duration":187.4,"talkTime":171.9,"sipCode":200},` +
	`{"type":"call_recorded","providerCallId":"{{ID}}.%d","occurredAt":"{{AT}}","sequence":4,` +
	`"provider":"sip","locations":["front-desk"],` +
	`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
	`"to":{"kind":"extension","extension":"101","name":"Reception"}},` +
	`"url":"https://recordings.clinic.example/{{ID}}.%d.wav","mimeType":"audio/wav"},` +
	`{"type":"call_transcribed","providerCallId":"{{ID}}.%d","occurredAt":"{{AT}}","sequence":5,` +
	`"provider":"sip","locations":["front-desk"],` +
	`"call":{"direction":"inbound","from":{"kind":"e164","number":"{{NUM}}"},` +
	`"to":{"kind":"extension","extension":"101","name":"Reception"}},` +
	`"text":"Please call me back about Thursday.","language":"en-GB"}`

// bulkTemplate is the body of the bulk mix: a batch of the five events of each of bulkCalls calls.
func bulkTemplate() string {
	var b strings.Builder
	b.WriteString(`{"events":[`)
	for c := range bulkCalls {
		if c > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, bulkCallTemplate, c, c, c, c, c, c)
	}
	b.WriteString(`]}`)
	return b.String()
}
