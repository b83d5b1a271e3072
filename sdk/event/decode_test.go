package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// decodeCase is one rule of the body format: a body and the problems it must produce ("field|word",
// see requireProblems), or none.
type decodeCase struct {
	name string
	body string
	want []string
}

// extraField is one type-specific field with a valid value and the types that have it.
type extraField struct {
	name  string
	value string
	types []Type
}

var extraFields = []extraField{
	{"answeredBy", `"101"`, []Type{CallAnswered}},
	{"disposition", `"answered"`, []Type{CallEnded}},
	{"duration", `93.5`, []Type{CallEnded, CallRecorded}},
	{"talkTime", `80`, []Type{CallEnded}},
	{"answeredElsewhere", `true`, []Type{CallEnded}},
	{"sipCode", `200`, []Type{CallEnded}},
	{"sipReason", `"OK"`, []Type{CallEnded}},
	{"released", `false`, []Type{CallHold}},
	{"to", `{"kind":"extension","extension":"102"}`, []Type{CallTransferred}},
	{"mode", `"blind"`, []Type{CallTransferred}},
	{"url", `"https://rec.example.com/c-1.wav"`, []Type{CallRecorded}},
	{"mimeType", `"audio/wav"`, []Type{CallRecorded}},
	{"bytes", `1048576`, []Type{CallRecorded}},
	{"text", `"Hello, clinic."`, []Type{CallTranscribed}},
	{"language", `"en-GB"`, []Type{CallTranscribed}},
	{"confidence", `0.92`, []Type{CallTranscribed}},
}

// required returns the members a type needs beyond the envelope, so that it is valid.
func required(t Type) string {
	switch t {
	case CallRecorded:
		return `"url":"https://rec.example.com/c-1.wav"`
	case CallTranscribed:
		return `"text":"Hello, clinic."`
	}
	return ""
}

// extraCases builds, for every type-specific field, a row accepting it on each type that has it
// and a row refusing it on each type that does not.
func extraCases() []decodeCase {
	var out []decodeCase
	for _, f := range extraFields {
		for _, t := range Types() {
			member := `"` + f.name + `":` + f.value
			extra := member
			if r := required(t); r != "" && !strings.HasPrefix(r, `"`+f.name+`"`) {
				extra = r + "," + member
			}
			var want []string
			if !typeHas(f, t) {
				want = []string{f.name + "|is not a field of " + string(t)}
			}
			verb := "refused on"
			if want == nil {
				verb = "accepted on"
			}
			out = append(out, decodeCase{"extra " + f.name + " " + verb + " " + string(t), evt(string(t), extra), want})
		}
	}
	return out
}

func typeHas(f extraField, t Type) bool {
	for _, x := range f.types {
		if x == t {
			return true
		}
	}
	return false
}

// decodeCases is the rule table, shared with the fuzz target as its seeds.
func decodeCases() []decodeCase {
	events51 := make([]string, 51)
	events50 := make([]string, 50)
	for i := range events51 {
		events51[i] = evt("call_ended", `"sequence":`+strconv.Itoa(i))
	}
	copy(events50, events51)
	cases := []decodeCase{
		// The body as a whole.
		{"malformed JSON, cut short", `{"type":`, []string{"body|not valid JSON"}},
		{"malformed JSON, missing colon", `{"type" "call_received"}`, []string{"body|not valid JSON"}},
		{"malformed JSON, trailing comma", `{"type":"call_received",}`, []string{"body|not valid JSON"}},
		{"malformed JSON, single quotes", `{'type':'call_received'}`, []string{"body|not valid JSON"}},
		{"malformed JSON, bare word", `call_received`, []string{"body|not valid JSON"}},
		{"empty body", ``, []string{"body|empty"}},
		{"whitespace only", " \r\n\t ", []string{"body|empty"}},
		{"non-breaking space is not JSON whitespace", "\u00a0", []string{"body|not valid JSON"}},
		{"invalid UTF-8 in a string", ev(`"raw":{"sip":"caf` + "\xe9" + `"}`), []string{"body|UTF-8"}},
		{"invalid UTF-8 alone", "\xff\xfe", []string{"body|UTF-8"}},
		{"trailing object", ev("") + ` {}`, []string{"body|found more"}},
		{"trailing garbage", ev("") + `x`, []string{"body|found more"}},
		{"trailing bracket", ev("") + `]`, []string{"body|found more"}},
		{"trailing whitespace accepted", "\n " + ev("") + " \r\n\t", nil},
		{"top-level array", `[` + ev("") + `]`, []string{"body|JSON object"}},
		{"top-level string", `"call_received"`, []string{"body|JSON object"}},
		{"top-level number", `42`, []string{"body|JSON object"}},
		{"top-level null", `null`, []string{"body|JSON object"}},
		{"nesting too deep", ev(`"raw":{"a":` + strings.Repeat("[", 20000)), []string{"body|nested"}},
		{"nesting deep but allowed", ev(`"raw":{"a":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}`), nil},

		// Batches.
		{"batch of one", batch(ev("")), nil},
		{"batch of fifty", batch(events50...), nil},
		{"empty batch", `{"events":[]}`, []string{"events|at least one"}},
		{"51 events", batch(events51...), []string{"events|at most 50"}},
		{"events null", `{"events":null}`, []string{"events|array"}},
		{"events an object", `{"events":` + ev("") + `}`, []string{"events|array"}},
		{"batch element not an object", batch(ev(""), `"call_received"`, `[]`), []string{"events[1]|event object", "events[2]|event object"}},
		{"unknown top-level key next to events", `{"events":[` + ev("") + `],"source":"pbx"}`, []string{"source|batch body"}},
		{"event field next to events", `{"type":"call_received","events":[` + ev("") + `]}`, []string{"type|batch body"}},
		{"events twice", `{"events":[` + ev("") + `],"events":[]}`, []string{"events|more than once"}},

		// Every missing required field.
		{"empty object", `{}`, []string{"type|required", "providerCallId|required", "occurredAt|required", "call|required"}},
		{"type missing", `{"providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"type|required"}},
		{"providerCallId missing", `{"type":"call_received","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"providerCallId|required"}},
		{"occurredAt missing", `{"type":"call_received","providerCallId":"c-1","call":` + okCall + `}`, []string{"occurredAt|required"}},
		{"call missing", `{"type":"call_received","providerCallId":"c-1","occurredAt":"` + okAt + `"}`, []string{"call|required"}},
		{"direction missing", withCall(`{"from":{"number":"+442071234567"}}`, ""), []string{"call.direction|required"}},
		{"empty call block", withCall(`{}`, ""), []string{"call.direction|required"}},
		{"type null", `{"type":null,"providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"type|required"}},
		{"providerCallId null", `{"type":"call_received","providerCallId":null,"occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"providerCallId|required"}},
		{"occurredAt null", `{"type":"call_received","providerCallId":"c-1","occurredAt":null,"call":` + okCall + `}`, []string{"occurredAt|required"}},
		{"call null", withCall(`null`, ""), []string{"call|required"}},
		{"direction null", withCall(`{"direction":null}`, ""), []string{"call.direction|required"}},
		{"type empty", `{"type":"","providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"type|required"}},
		{"providerCallId empty", `{"type":"call_received","providerCallId":"","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"providerCallId|required"}},
		{"url required for call_recorded", evt("call_recorded", `"mimeType":"audio/wav"`), []string{"url|required"}},
		{"url null on call_recorded", evt("call_recorded", `"url":null`), []string{"url|required"}},
		{"text required for call_transcribed", evt("call_transcribed", `"language":"en"`), []string{"text|required"}},
		{"text empty on call_transcribed", evt("call_transcribed", `"text":""`), []string{"text|required"}},

		// Every wrong enum.
		{"unknown type", `{"type":"call_ringing","providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"type|one of"}},
		{"type in capitals", `{"type":"CALL_RECEIVED","providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"type|call_received"}},
		{"unknown observer", ev(`"observer":"phone"`), []string{"observer|endpoint, proxy, pbx_api"}},
		{"unknown direction", withCall(`{"direction":"sideways"}`, ""), []string{"call.direction|inbound, outbound, internal"}},
		{"unknown party kind", withCall(`{"direction":"inbound","from":{"kind":"mobile","number":"+442071234567"}}`, ""), []string{"call.from.kind|e164, extension, anonymous, unknown"}},
		{"unknown disposition", evt("call_ended", `"disposition":"hung_up"`), []string{"disposition|one of"}},
		{"unknown mode", evt("call_transferred", `"mode":"warm"`), []string{"mode|blind or attended"}},
		{"unknown type, extras not judged", `{"type":"call_rang","providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall + `,"sipCode":200}`, []string{"type|one of"}},

		// Every wrong JSON type.
		{"type a number", `{"type":5,"providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"type|string"}},
		{"providerCallId a number", `{"type":"call_received","providerCallId":123,"occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"providerCallId|put it in quotes"}},
		{"occurredAt a number", `{"type":"call_received","providerCallId":"c-1","occurredAt":1772357400,"call":` + okCall + `}`, []string{"occurredAt|string"}},
		{"call an array", withCall(`[]`, ""), []string{"call|call object"}},
		{"call a string", withCall(`"inbound"`, ""), []string{"call|call object"}},
		{"provider a number", ev(`"provider":5`), []string{"provider|string"}},
		{"sequence a string", ev(`"sequence":"1"`), []string{"sequence|whole number"}},
		{"sequence a bool", ev(`"sequence":true`), []string{"sequence|whole number"}},
		{"providerEventId an object", ev(`"providerEventId":{}`), []string{"providerEventId|string"}},
		{"observer a bool", ev(`"observer":true`), []string{"observer|string"}},
		{"locations a string", ev(`"locations":"main"`), []string{"locations|array of strings"}},
		{"locations element a number", ev(`"locations":["main",5]`), []string{"locations[1]|string"}},
		{"locations element null", ev(`"locations":[null]`), []string{"locations[0]|string"}},
		{"raw a string", ev(`"raw":"INVITE sip:101@pbx SIP/2.0"`), []string{"raw|object or null"}},
		{"raw an array", ev(`"raw":[]`), []string{"raw|object or null"}},
		{"from a string", withCall(`{"direction":"inbound","from":"+442071234567"}`, ""), []string{"call.from|party object"}},
		{"from an array", withCall(`{"direction":"inbound","from":[]}`, ""), []string{"call.from|party object"}},
		{"to a bool", withCall(`{"direction":"inbound","to":true}`, ""), []string{"call.to|party object"}},
		{"number a number", withCall(`{"direction":"inbound","from":{"number":442071234567}}`, ""), []string{"call.from.number|put it in quotes"}},
		{"name an array", withCall(`{"direction":"inbound","from":{"number":"+442071234567","name":["A"]}}`, ""), []string{"call.from.name|string"}},
		{"kind a number", withCall(`{"direction":"inbound","from":{"kind":1,"number":"+442071234567"}}`, ""), []string{"call.from.kind|string"}},
		{"trunk a number", withCall(`{"direction":"inbound","trunk":5}`, ""), []string{"call.trunk|string"}},
		{"direction a number", withCall(`{"direction":1}`, ""), []string{"call.direction|string"}},
		{"diversion an object", withCall(`{"direction":"inbound","diversion":{}}`, ""), []string{"call.diversion|array of diversion objects"}},
		{"answeredBy a number", evt("call_answered", `"answeredBy":101`), []string{"answeredBy|put it in quotes"}},
		{"duration a string", evt("call_ended", `"duration":"93"`), []string{"duration|number"}},
		{"talkTime a bool", evt("call_ended", `"talkTime":false`), []string{"talkTime|number"}},
		{"answeredElsewhere a number", evt("call_ended", `"answeredElsewhere":1`), []string{"answeredElsewhere|true or false"}},
		{"answeredElsewhere a string", evt("call_ended", `"answeredElsewhere":"true"`), []string{"answeredElsewhere|true or false"}},
		{"sipCode a string", evt("call_ended", `"sipCode":"200"`), []string{"sipCode|whole number"}},
		{"sipReason an object", evt("call_ended", `"sipReason":{}`), []string{"sipReason|string"}},
		{"released a string", evt("call_hold", `"released":"false"`), []string{"released|true or false"}},
		{"to an array", evt("call_transferred", `"to":[]`), []string{"to|party object"}},
		{"mode a number", evt("call_transferred", `"mode":1`), []string{"mode|string"}},
		{"url an object", evt("call_recorded", `"url":{}`), []string{"url|string"}},
		{"mimeType a number", evt("call_recorded", `"url":"https://r.example.com/1","mimeType":1`), []string{"mimeType|string"}},
		{"bytes a string", evt("call_recorded", `"url":"https://r.example.com/1","bytes":"1024"`), []string{"bytes|whole number"}},
		{"text a number", evt("call_transcribed", `"text":5`), []string{"text|string"}},
		{"language an array", evt("call_transcribed", `"text":"hi","language":["en"]`), []string{"language|string"}},
		{"confidence a string", evt("call_transcribed", `"text":"hi","confidence":"0.9"`), []string{"confidence|number"}},

		// Null for every nullable field is accepted.
		{"nullable envelope fields null", ev(`"provider":null,"sequence":null,"providerEventId":null,"observer":null,"locations":null,"raw":null`), nil},
		{"nullable call fields null", withCall(`{"direction":"inbound","from":null,"to":null,"trunk":null,"diversion":null}`, ""), nil},
		{"nullable party fields null", withCall(`{"direction":"inbound","from":{"kind":"anonymous","number":null,"name":null,"extension":null,"uri":null},"to":{"kind":null,"number":"+442071234567"}}`, ""), nil},
		{"nullable diversion fields null", withCall(`{"direction":"inbound","diversion":[{"number":"+442071234567","reason":null,"counter":null,"name":null}]}`, ""), nil},
		{"call_answered extras null", evt("call_answered", `"answeredBy":null`), nil},
		{"call_ended extras null", evt("call_ended", `"disposition":null,"duration":null,"talkTime":null,"answeredElsewhere":null,"sipCode":null,"sipReason":null`), nil},
		{"call_hold extras null", evt("call_hold", `"released":null`), nil},
		{"call_transferred extras null", evt("call_transferred", `"to":null,"mode":null`), nil},
		{"call_recorded extras null", evt("call_recorded", `"url":"https://r.example.com/1","mimeType":null,"bytes":null,"duration":null`), nil},
		{"call_transcribed extras null", evt("call_transcribed", `"text":"hi","language":null,"confidence":null`), nil},
		{"extras null on a type without them", ev(`"answeredBy":null,"released":null,"url":null,"text":null,"confidence":null`), nil},

		// The nine types with all their extra fields.
		{"call_received", evt("call_received", `"sequence":1,"providerEventId":"ev-1","observer":"proxy","locations":["front-desk","lab_2"],"provider":"asterisk","raw":{"sip":"INVITE"}`), nil},
		{"call_placed", withCall(`{"direction":"outbound","from":{"kind":"extension","extension":"101"},"to":{"number":"+15551234567"}}`, "") + "", nil},
		{"call_missed", evt("call_missed", ""), nil},
		{"call_answered", evt("call_answered", `"answeredBy":"101"`), nil},
		{"call_ended", evt("call_ended", `"disposition":"no_answer","duration":30,"talkTime":0,"answeredElsewhere":false,"sipCode":487,"sipReason":"Request Terminated"`), nil},
		{"call_ended, every disposition", batch(
			evt("call_ended", `"disposition":"answered"`), evt("call_ended", `"disposition":"no_answer"`),
			evt("call_ended", `"disposition":"busy"`), evt("call_ended", `"disposition":"cancelled"`),
			evt("call_ended", `"disposition":"rejected"`), evt("call_ended", `"disposition":"failed"`),
			evt("call_ended", `"disposition":"voicemail"`)), nil},
		{"call_ended, sipCode bounds", batch(evt("call_ended", `"sipCode":100`), evt("call_ended", `"sipCode":699`)), nil},
		{"call_hold on", evt("call_hold", `"released":false`), nil},
		{"call_hold off", evt("call_hold", `"released":true`), nil},
		{"call_transferred blind", evt("call_transferred", `"to":{"number":"+442071234568","name":"Dr Smith"},"mode":"blind"`), nil},
		{"call_transferred attended", evt("call_transferred", `"to":{"kind":"extension","extension":"102"},"mode":"attended"`), nil},
		{"call_recorded", evt("call_recorded", `"url":"https://rec.example.com/a/c-1.wav?sig=x","mimeType":"audio/wav; codecs=1","bytes":0,"duration":93.25`), nil},
		{"call_recorded http", evt("call_recorded", `"url":"http://10.0.0.5:8080/c-1.mp3","mimeType":"audio/mpeg"`), nil},
		{"call_transcribed", evt("call_transcribed", `"text":"I'd like to book an appointment.","language":"en-GB","confidence":0.87`), nil},
		{"call_transcribed confidence bounds", batch(evt("call_transcribed", `"text":"a","confidence":0`), evt("call_transcribed", `"text":"a","confidence":1`)), nil},
		{"call_transcribed language forms", batch(evt("call_transcribed", `"text":"a","language":"de"`), evt("call_transcribed", `"text":"a","language":"zh-Hant-TW"`), evt("call_transcribed", `"text":"a","language":"es-419"`)), nil},

		// Values of the extra fields.
		{"wrong-type field reported once, value not judged", ev(`"disposition":"hung_up","to":{},"sipCode":1`), []string{"disposition|not a field of call_received", "to|not a field of call_received", "sipCode|not a field of call_received"}},
		{"duration negative", evt("call_ended", `"duration":-1`), []string{"duration|zero or more"}},
		{"talkTime negative", evt("call_ended", `"talkTime":-0.5`), []string{"talkTime|zero or more"}},
		{"duration negative on call_recorded", evt("call_recorded", `"url":"https://r.example.com/1","duration":-3`), []string{"duration|zero or more"}},
		{"duration too large for a float", evt("call_ended", `"duration":1e400`), []string{"duration|out of range"}},
		{"sipCode below 100", evt("call_ended", `"sipCode":99`), []string{"sipCode|100 to 699"}},
		{"sipCode above 699", evt("call_ended", `"sipCode":700`), []string{"sipCode|100 to 699"}},
		{"sipCode fractional", evt("call_ended", `"sipCode":200.5`), []string{"sipCode|whole number"}},
		{"sipCode past int32", evt("call_ended", `"sipCode":10000000000`), []string{"sipCode|out of range"}},
		{"sipReason too long", evt("call_ended", `"sipReason":"`+strings.Repeat("é", 257)+`"`), []string{"sipReason|at most 256"}},
		{"answeredBy too long", evt("call_answered", `"answeredBy":"`+strings.Repeat("1", 65)+`"`), []string{"answeredBy|at most 64"}},
		{"to party without extension accepted", evt("call_transferred", `"to":{"kind":"extension"}`), nil},
		{"to party bad number", evt("call_transferred", `"to":{"number":"0207"}`), []string{"to.number|E.164"}},
		{"to party unknown field", evt("call_transferred", `"to":{"number":"+442071234567","label":"x"}`), []string{"to.label|not a field of a party"}},
		{"url relative", evt("call_recorded", `"url":"/rec/c-1.wav"`), []string{"url|absolute http or https"}},
		{"url ftp", evt("call_recorded", `"url":"ftp://rec.example.com/c-1.wav"`), []string{"url|absolute http or https"}},
		{"url without host", evt("call_recorded", `"url":"https://"`), []string{"url|absolute"}},
		{"url too long", evt("call_recorded", `"url":"https://r.example.com/`+strings.Repeat("a", 4096)+`"`), []string{"url|4096"}},
		{"mimeType without subtype", evt("call_recorded", `"url":"https://r.example.com/1","mimeType":"wav"`), []string{"mimeType|media type"}},
		{"mimeType empty subtype", evt("call_recorded", `"url":"https://r.example.com/1","mimeType":"audio/"`), []string{"mimeType|media type"}},
		{"bytes negative", evt("call_recorded", `"url":"https://r.example.com/1","bytes":-1`), []string{"bytes|zero or more"}},
		{"bytes fractional", evt("call_recorded", `"url":"https://r.example.com/1","bytes":1.5`), []string{"bytes|whole number"}},
		{"language one letter", evt("call_transcribed", `"text":"a","language":"e"`), []string{"language|BCP 47"}},
		{"language underscore", evt("call_transcribed", `"text":"a","language":"en_GB"`), []string{"language|BCP 47"}},
		{"language trailing hyphen", evt("call_transcribed", `"text":"a","language":"en-"`), []string{"language|BCP 47"}},
		{"language digits first", evt("call_transcribed", `"text":"a","language":"419"`), []string{"language|BCP 47"}},
		{"language subtag too long", evt("call_transcribed", `"text":"a","language":"en-abcdefghi"`), []string{"language|BCP 47"}},
		{"confidence above 1", evt("call_transcribed", `"text":"a","confidence":1.01`), []string{"confidence|0 to 1"}},
		{"confidence negative", evt("call_transcribed", `"text":"a","confidence":-0.1`), []string{"confidence|0 to 1"}},

		// Numbers must be E.164.
		{"E.164 minimal", withCall(`{"direction":"inbound","from":{"number":"+12"}}`, ""), nil},
		{"E.164 fifteen digits", withCall(`{"direction":"inbound","from":{"number":"+123456789012345"}}`, ""), nil},
		{"number with leading 0", withCall(`{"direction":"inbound","from":{"number":"02071234567"}}`, ""), []string{"call.from.number|E.164"}},
		{"number with letters", withCall(`{"direction":"inbound","from":{"number":"+44207ABC4567"}}`, ""), []string{"call.from.number|E.164"}},
		{"number too long", withCall(`{"direction":"inbound","from":{"number":"+1234567890123456"}}`, ""), []string{"call.from.number|E.164"}},
		{"number without +", withCall(`{"direction":"inbound","from":{"number":"442071234567"}}`, ""), []string{"call.from.number|E.164"}},
		{"number +0", withCall(`{"direction":"inbound","from":{"number":"+0442071234567"}}`, ""), []string{"call.from.number|E.164"}},
		{"number with spaces", withCall(`{"direction":"inbound","from":{"number":"+44 20 7123 4567"}}`, ""), []string{"call.from.number|E.164"}},
		{"number + alone", withCall(`{"direction":"inbound","from":{"number":"+"}}`, ""), []string{"call.from.number|E.164"}},
		{"number one digit", withCall(`{"direction":"inbound","from":{"number":"+1"}}`, ""), []string{"call.from.number|E.164"}},
		{"number on to", withCall(`{"direction":"inbound","to":{"number":"00442071234567"}}`, ""), []string{"call.to.number|E.164"}},

		// Party kinds.
		{"anonymous without number", withCall(`{"direction":"inbound","from":{"kind":"anonymous"}}`, ""), nil},
		{"anonymous with name and uri", withCall(`{"direction":"inbound","from":{"kind":"anonymous","name":"Anonymous","uri":"sip:anonymous@anonymous.invalid"}}`, ""), nil},
		{"anonymous with number", withCall(`{"direction":"inbound","from":{"kind":"anonymous","number":"+442071234567"}}`, ""), []string{"call.from.number|null for kind anonymous"}},
		{"unknown without number", withCall(`{"direction":"inbound","from":{"kind":"unknown","uri":"sip:garbage@pbx"}}`, ""), nil},
		{"unknown with number", withCall(`{"direction":"inbound","from":{"kind":"unknown","number":"+442071234567"}}`, ""), []string{"call.from.number|null for kind unknown"}},
		{"extension with extension", withCall(`{"direction":"internal","from":{"kind":"extension","extension":"101"},"to":{"kind":"extension","extension":"102","name":"Reception"}}`, ""), nil},
		{"extension kind without extension accepted", withCall(`{"direction":"internal","from":{"kind":"extension","number":"+442071234567"}}`, ""), nil},
		{"default kind without a number", withCall(`{"direction":"inbound","from":{"name":"Jane"}}`, ""), nil},
		{"empty party accepted", withCall(`{"direction":"inbound","to":{}}`, ""), nil},
		{"kind e164 without a number accepted", withCall(`{"direction":"inbound","from":{"kind":"e164","uri":"sip:x@y"}}`, ""), nil},
		{"party name too long", withCall(`{"direction":"inbound","from":{"number":"+442071234567","name":"`+strings.Repeat("n", 257)+`"}}`, ""), []string{"call.from.name|at most 256"}},
		{"party extension too long", withCall(`{"direction":"internal","from":{"kind":"extension","extension":"`+strings.Repeat("1", 65)+`"}}`, ""), []string{"call.from.extension|at most 64"}},
		{"party uri too long", withCall(`{"direction":"inbound","from":{"number":"+442071234567","uri":"sip:`+strings.Repeat("u", 4093)+`"}}`, ""), []string{"call.from.uri|at most 4096"}},
		{"party unknown field", withCall(`{"direction":"inbound","from":{"number":"+442071234567","display":"Jane"}}`, ""), []string{"call.from.display|not a field of a party"}},

		// Diversion elements.
		{"diversion chain", withCall(`{"direction":"inbound","diversion":[{"number":"+442071234567","reason":"no-answer","counter":1},{"kind":"extension","extension":"200","reason":"user-busy","counter":2},{"kind":"anonymous"}]}`, ""), nil},
		{"diversion element not an object", withCall(`{"direction":"inbound","diversion":["+442071234567"]}`, ""), []string{"call.diversion[0]|diversion object"}},
		{"diversion element without number accepted", withCall(`{"direction":"inbound","diversion":[{"reason":"no-answer"}]}`, ""), nil},
		{"diversion element bad number", withCall(`{"direction":"inbound","diversion":[{"number":"+442071234567"},{"number":"12"}]}`, ""), []string{"call.diversion[1].number|E.164"}},
		{"diversion element unknown field", withCall(`{"direction":"inbound","diversion":[{"number":"+442071234567","index":1}]}`, ""), []string{"call.diversion[0].index|not a field of a diversion"}},
		{"diversion counter negative", withCall(`{"direction":"inbound","diversion":[{"number":"+442071234567","counter":-1}]}`, ""), []string{"call.diversion[0].counter|0 to 100"}},
		{"diversion counter above 100", withCall(`{"direction":"inbound","diversion":[{"number":"+442071234567","counter":101}]}`, ""), []string{"call.diversion[0].counter|0 to 100"}},
		{"diversion counter a string", withCall(`{"direction":"inbound","diversion":[{"number":"+442071234567","counter":"1"}]}`, ""), []string{"call.diversion[0].counter|whole number"}},
		{"diversion reason too long", withCall(`{"direction":"inbound","diversion":[{"number":"+442071234567","reason":"`+strings.Repeat("r", 65)+`"}]}`, ""), []string{"call.diversion[0].reason|at most 64"}},
		{"diversion of 20 hops", withCall(`{"direction":"inbound","diversion":[`+repeat(`{"kind":"anonymous"}`, 20, ",")+`]}`, ""), nil},
		{"diversion of 21 hops", withCall(`{"direction":"inbound","diversion":[`+repeat(`{"kind":"anonymous"}`, 21, ",")+`]}`, ""), []string{"call.diversion|at most 20"}},
		{"diversion bad element keeps later indexes", withCall(`{"direction":"inbound","diversion":[5,{"number":"bad"}]}`, ""), []string{"call.diversion[0]|diversion object", "call.diversion[1].number|E.164"}},

		// Duplicate keys.
		{"duplicate type", `{"type":"call_received","type":"call_ended","providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"type|more than once"}},
		{"duplicate key by escape", `{"type":"call_received","\u0074ype":"call_ended","providerCallId":"c-1","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"type|more than once"}},
		{"duplicate extra", evt("call_ended", `"sipCode":200,"sipCode":486`), []string{"sipCode|more than once"}},
		{"duplicate key in call", withCall(`{"direction":"inbound","direction":"outbound"}`, ""), []string{"call.direction|more than once"}},
		{"duplicate key in party", withCall(`{"direction":"inbound","from":{"number":"+442071234567","number":"+442071234568"}}`, ""), []string{"call.from.number|more than once"}},
		{"duplicate key in diversion", withCall(`{"direction":"inbound","diversion":[{"number":"+442071234567","reason":"a","reason":"b"}]}`, ""), []string{"call.diversion[0].reason|more than once"}},
		{"duplicate key in to", evt("call_transferred", `"to":{"kind":"extension","kind":"e164","extension":"1"}`), []string{"to.kind|more than once"}},
		{"duplicate key in batch event", batch(ev(""), `{"type":"call_received","providerCallId":"c-1","providerCallId":"c-2","occurredAt":"`+okAt+`","call":`+okCall+`}`), []string{"events[1].providerCallId|more than once"}},
		{"duplicate key many times reported once", ev(`"sequence":1,"sequence":2,"sequence":3`), []string{"sequence|more than once"}},
		{"duplicate key in a large object", ev(`"sequence":1,"observer":"proxy","provider":"sip","providerEventId":"e","locations":["a"],"raw":{},"sequence":2`), []string{"sequence|more than once"}},
		{"duplicate key inside raw is not judged", ev(`"raw":{"a":1,"a":2}`), nil},

		// Timestamps.
		{"occurredAt with fraction", `{"type":"call_received","providerCallId":"c-1","occurredAt":"2026-03-01T09:30:00.123456789Z","call":` + okCall + `}`, nil},
		{"occurredAt +00:00", `{"type":"call_received","providerCallId":"c-1","occurredAt":"2026-03-01T09:30:00+00:00","call":` + okCall + `}`, nil},
		{"occurredAt +01:00", `{"type":"call_received","providerCallId":"c-1","occurredAt":"2026-03-01T10:30:00+01:00","call":` + okCall + `}`, []string{"occurredAt|UTC"}},
		{"occurredAt -05:00", `{"type":"call_received","providerCallId":"c-1","occurredAt":"2026-03-01T04:30:00-05:00","call":` + okCall + `}`, []string{"occurredAt|UTC"}},
		{"occurredAt +05:30", `{"type":"call_received","providerCallId":"c-1","occurredAt":"2026-03-01T15:00:00+05:30","call":` + okCall + `}`, []string{"occurredAt|UTC"}},
		{"occurredAt without zone", `{"type":"call_received","providerCallId":"c-1","occurredAt":"2026-03-01T09:30:00","call":` + okCall + `}`, []string{"occurredAt|ISO 8601"}},
		{"occurredAt date only", `{"type":"call_received","providerCallId":"c-1","occurredAt":"2026-03-01","call":` + okCall + `}`, []string{"occurredAt|ISO 8601"}},
		{"occurredAt words", `{"type":"call_received","providerCallId":"c-1","occurredAt":"yesterday","call":` + okCall + `}`, []string{"occurredAt|ISO 8601"}},
		{"occurredAt empty", `{"type":"call_received","providerCallId":"c-1","occurredAt":"","call":` + okCall + `}`, []string{"occurredAt|ISO 8601"}},
		{"occurredAt before 1970", `{"type":"call_received","providerCallId":"c-1","occurredAt":"1969-12-31T23:59:59Z","call":` + okCall + `}`, []string{"occurredAt|1970"}},
		{"occurredAt 1970 accepted", `{"type":"call_received","providerCallId":"c-1","occurredAt":"1970-01-01T00:00:00Z","call":` + okCall + `}`, nil},
		{"occurredAt year 9999 accepted", `{"type":"call_received","providerCallId":"c-1","occurredAt":"9999-12-31T23:59:59.999999999Z","call":` + okCall + `}`, nil},
		{"occurredAt year 0", `{"type":"call_received","providerCallId":"c-1","occurredAt":"0000-01-01T00:00:00Z","call":` + okCall + `}`, []string{"occurredAt|1970"}},

		// Locations.
		{"locations empty", ev(`"locations":[]`), []string{"locations|at least one"}},
		{"locations with capitals and space", ev(`"locations":["Front Desk"]`), []string{"locations[0]|a-z"}},
		{"locations empty string", ev(`"locations":["main",""]`), []string{"locations[1]|1 to 64"}},
		{"locations starting with hyphen", ev(`"locations":["-lab"]`), []string{"locations[0]|starting with"}},
		{"locations with a dot", ev(`"locations":["site.1"]`), []string{"locations[0]|a-z"}},
		{"locations non-ASCII", ev(`"locations":["réception"]`), []string{"locations[0]|a-z"}},
		{"locations 65 characters", ev(`"locations":["` + strings.Repeat("a", 65) + `"]`), []string{"locations[0]|64"}},
		{"locations 64 characters", ev(`"locations":["` + strings.Repeat("a", 64) + `"]`), nil},
		{"locations 32", ev(`"locations":[` + quoted("main", 32) + `]`), nil},
		{"locations 33", ev(`"locations":[` + quoted("main", 33) + `]`), []string{"locations|at most 32"}},
		{"locations bad element keeps later indexes", ev(`"locations":[5,"BAD"]`), []string{"locations[0]|string", "locations[1]|a-z"}},

		// Provider tokens.
		{"provider lower-case", ev(`"provider":"zoom"`), nil},
		{"provider with dot, digit, hyphen, underscore", ev(`"provider":"3cx.v18-pro_2"`), nil},
		{"provider capitals", ev(`"provider":"Zoom"`), []string{"provider|a-z"}},
		{"provider empty", ev(`"provider":""`), []string{"provider|not be empty"}},
		{"provider starting with hyphen", ev(`"provider":"-sip"`), []string{"provider|starting with"}},
		{"provider starting with dot", ev(`"provider":".sip"`), []string{"provider|starting with"}},
		{"provider with space", ev(`"provider":"my pbx"`), []string{"provider|a-z"}},
		{"provider 65 characters", ev(`"provider":"` + strings.Repeat("p", 65) + `"`), []string{"provider|64"}},

		// Sequence.
		{"sequence zero", ev(`"sequence":0`), nil},
		{"sequence max int64", ev(`"sequence":9223372036854775807`), nil},
		{"sequence negative", ev(`"sequence":-1`), []string{"sequence|zero or more"}},
		{"sequence fractional", ev(`"sequence":1.5`), []string{"sequence|whole number"}},
		{"sequence exponent", ev(`"sequence":1e3`), []string{"sequence|whole number"}},
		{"sequence past int64", ev(`"sequence":9223372036854775808`), []string{"sequence|out of range"}},
		{"sequence huge", ev(`"sequence":99999999999999999999999999`), []string{"sequence|out of range"}},
		{"sequence beyond float", ev(`"sequence":1e400`), []string{"sequence|out of range"}},

		// Identifiers.
		{"providerCallId 512 bytes", `{"type":"call_received","providerCallId":"` + strings.Repeat("c", 512) + `","occurredAt":"` + okAt + `","call":` + okCall + `}`, nil},
		{"providerCallId 513 bytes", `{"type":"call_received","providerCallId":"` + strings.Repeat("c", 513) + `","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"providerCallId|at most 512"}},
		{"providerCallId control character", `{"type":"call_received","providerCallId":"c\u0001","occurredAt":"` + okAt + `","call":` + okCall + `}`, []string{"providerCallId|control"}},
		{"providerEventId empty", ev(`"providerEventId":""`), []string{"providerEventId|not be empty"}},
		{"providerEventId newline", ev(`"providerEventId":"e\n1"`), []string{"providerEventId|control"}},
		{"providerEventId too long", ev(`"providerEventId":"` + strings.Repeat("e", 513) + `"`), []string{"providerEventId|at most 512"}},
		{"trunk too long", withCall(`{"direction":"inbound","trunk":"`+strings.Repeat("t", 257)+`"}`, ""), []string{"call.trunk|at most 256"}},

		// Unknown fields.
		{"unknown event field", ev(`"callerName":"Jane"`), []string{"callerName|not a field of an event"}},
		{"field names are case-sensitive", ev(`"Sequence":1`), []string{"Sequence|not a field of an event"}},
		{"empty key", `{"":[]}`, []string{`[""]|not a field of an event`, "type|required", "providerCallId|required", "occurredAt|required", "call|required"}},
		{"empty key in a batch", `{"events":[` + ev("") + `],"":1}`, []string{`[""]|batch body`}},
		{"empty key in a batch event", batch(ev(`"":1`)), []string{`events[0][""]|not a field of an event`}},
		{"dotted key cannot pose as a path", withCall(`{"direction":"up"}`, `"call.direction":1`), []string{`["call.direction"]|not a field of an event`, "call.direction|one of"}},
		{"odd key in a party", withCall(`{"direction":"inbound","from":{"number":"+442071234567","a b":1,"":2}}`, ""), []string{`call.from["a b"]|not a field of a party`, `call.from[""]|not a field of a party`}},
		{"odd duplicate key", ev(`"x.y":1,"x.y":2`), []string{`["x.y"]|more than once`}},
		{"unknown call field", withCall(`{"direction":"inbound","via":"x"}`, ""), []string{"call.via|not a field of a call block"}},

		// Several problems at once: every one is listed.
		{"five problems in one event", `{"type":"call_ringing","occurredAt":"2026-03-01T09:30:00+02:00","call":{"direction":"up"},"sequence":-2,"observer":"eye"}`,
			[]string{"type|one of", "providerCallId|required", "occurredAt|UTC", "call.direction|one of", "sequence|zero or more", "observer|one of"}},
		{"three events with problems in a batch", batch(
			`{"type":"call_ended","providerCallId":"c-1","occurredAt":"`+okAt+`","call":`+okCall+`,"sipCode":900}`,
			ev(""),
			withCall(`{"direction":"inbound","from":{"number":"0207"}}`, `"locations":[]`),
			`{"type":"call_hold","providerCallId":7,"occurredAt":"`+okAt+`","call":{"direction":"inbound","from":{"kind":"anonymous"}},"released":"yes"}`),
			[]string{"events[0].sipCode|100 to 699", "events[2].call.from.number|E.164", "events[2].locations|at least one", "events[3].providerCallId|string", "events[3].released|true or false"}},
	}
	return append(cases, extraCases()...)
}

func TestParseBodyRules(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range decodeCases() {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			parsed, _, err := ParseBody([]byte(tc.body))
			requireProblems(t, err, tc.want)
			if err != nil && parsed != nil {
				t.Errorf("events returned with an error: %d", len(parsed))
			}
			if err == nil && len(parsed) == 0 {
				t.Errorf("no events and no error")
			}
		})
	}
}

func TestParseBodyListsEveryProblem(t *testing.T) {
	// N distinct problems in one event: all N come back, not just the first.
	members := []string{
		`"type":"nope"`,
		`"providerCallId":""`,
		`"occurredAt":"2026-03-01T09:30:00+01:00"`,
		`"call":{"direction":"inbound","from":{"number":"123"},"to":{"kind":"extension"},"trunk":7}`,
		`"provider":"BAD"`,
		`"sequence":-1`,
		`"providerEventId":""`,
		`"observer":"x"`,
		`"locations":["A","b",""]`,
		`"raw":"x"`,
		`"bogus":1`,
	}
	body := "{" + strings.Join(members, ",") + "}"
	_, _, err := ParseBody([]byte(body))
	want := []string{"type", "providerCallId", "occurredAt", "call.from.number", "call.trunk",
		"provider", "sequence", "providerEventId", "observer", "locations[0]", "locations[2]", "raw", "bogus"}
	wantP := make([]string, len(want))
	for i, w := range want {
		wantP[i] = w + "|"
	}
	requireProblems(t, err, wantP)
	ve, _ := AsValidationError(err)
	if len(ve.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d", len(ve.Problems), len(want))
	}
}

func TestParseBodyProblemOrder(t *testing.T) {
	body := `{"events":[` +
		`{"type":"x","providerCallId":"c","occurredAt":"` + okAt + `","call":{"direction":"inbound","from":{"kind":"anonymous"}}},` +
		`{"type":"call_received","providerCallId":1,"occurredAt":"` + okAt + `","call":{"direction":"y","from":{"kind":"anonymous"}}}` +
		`],"extra":1,"events":[]}`
	_, _, err := ParseBody([]byte(body))
	ve, ok := AsValidationError(err)
	if !ok {
		t.Fatalf("want a ValidationError, got %v", err)
	}
	var got []string
	for _, p := range ve.Problems {
		got = append(got, p.Field)
	}
	want := []string{"events", "extra", "events[0].type", "events[1].providerCallId", "events[1].call.direction"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("order:\n got  %v\n want %v", got, want)
	}
}

func TestParseBodyProblemCap(t *testing.T) {
	// 50 events with 5 problems each: 250 problems, every one listed.
	bad := `{"type":"x","providerCallId":"","occurredAt":"x","call":{"direction":"x"},"sequence":-1}`
	events := make([]string, 50)
	for i := range events {
		events[i] = bad
	}
	_, _, err := ParseBody([]byte(batch(events...)))
	ve, ok := AsValidationError(err)
	if !ok {
		t.Fatalf("want a ValidationError, got %v", err)
	}
	if len(ve.Problems) != 250 || ve.Problems[249].Field != "events[49].sequence" {
		t.Fatalf("got %d problems, last %+v; want all 250", len(ve.Problems), ve.Problems[len(ve.Problems)-1])
	}

	// A pathological body (thousands of unknown fields) is capped at MaxProblems, the last
	// problem saying how many more there were.
	var b strings.Builder
	b.WriteString(`{"type":"call_hold","providerCallId":"a","occurredAt":"2026-01-01T00:00:00Z","call":{"direction":"inbound"}`)
	for i := range MaxProblems + 50 {
		fmt.Fprintf(&b, `,"f%d":1`, i)
	}
	b.WriteString("}")
	_, _, err = ParseBody([]byte(b.String()))
	ve, _ = AsValidationError(err)
	if len(ve.Problems) != MaxProblems {
		t.Fatalf("got %d problems, want %d", len(ve.Problems), MaxProblems)
	}
	if last := ve.Problems[MaxProblems-1]; last.Field != "body" || last.Message != "and 51 more problems" {
		t.Fatalf("last problem = %+v", last)
	}
}

func TestParseBodyBatchFlagAndOrder(t *testing.T) {
	parsed, isBatch, err := ParseBody([]byte(ev(`"sequence":4`)))
	if err != nil || isBatch || len(parsed) != 1 || parsed[0].Event.Sequence != 4 {
		t.Fatalf("single: batch=%v n=%d err=%v", isBatch, len(parsed), err)
	}
	parsed, isBatch, err = ParseBody([]byte(batch(evt("call_ended", `"sequence":2`), evt("call_recorded", `"sequence":3,"url":"https://r.example.com/1"`), evt("call_transcribed", `"sequence":4,"text":"a"`))))
	if err != nil || !isBatch || len(parsed) != 3 {
		t.Fatalf("batch: batch=%v n=%d err=%v", isBatch, len(parsed), err)
	}
	for i, want := range []Type{CallEnded, CallRecorded, CallTranscribed} {
		if parsed[i].Event.Type != want || parsed[i].Event.Sequence != int64(i+2) {
			t.Errorf("events[%d] = %s/%d", i, parsed[i].Event.Type, parsed[i].Event.Sequence)
		}
	}
	// A refused batch still says it was a batch; a refused body that is not an object does not.
	if _, isBatch, _ := ParseBody([]byte(`{"events":[]}`)); !isBatch {
		t.Errorf("empty batch: batch=false")
	}
	if _, isBatch, _ := ParseBody([]byte(`[]`)); isBatch {
		t.Errorf("array: batch=true")
	}
}

func TestParseBodyDecodedValues(t *testing.T) {
	body := `{"type":"call_ended","providerCallId":"pbx-77","occurredAt":"2026-03-01T09:30:00.5+00:00",` +
		`"call":{"direction":"inbound","from":{"kind":"e164","number":"+442071234567","name":"Jane \"JJ\" Doe","uri":"sip:+442071234567@carrier"},` +
		`"to":{"kind":"extension","extension":"101"},"trunk":"bt-1","diversion":[{"number":"+442071234568","reason":"no-answer","counter":1}]},` +
		`"provider":"asterisk","sequence":9,"providerEventId":"ev-9","observer":"pbx_api","locations":["front"],"raw":{"k":[1,2]},` +
		`"disposition":"answered","duration":93.5,"talkTime":80,"answeredElsewhere":true,"sipCode":200,"sipReason":"OK"}`
	parsed, _, err := ParseBody([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got := parsed[0].Event
	want := New(CallEnded, "pbx-77", time.Date(2026, 3, 1, 9, 30, 0, 5e8, time.UTC), Call{
		Direction: Inbound,
		From:      &Party{Kind: KindE164, Number: "+442071234567", Name: `Jane "JJ" Doe`, URI: "sip:+442071234567@carrier"},
		To:        Extension("101"),
		Trunk:     "bt-1",
		Diversion: []Diversion{{Party: Party{Number: "+442071234568"}, Reason: "no-answer", Counter: Ptr(1)}},
	})
	want.Provider = "asterisk"
	want.Sequence = 9
	want.ProviderEventID = "ev-9"
	want.Observer = ObserverPBXAPI
	want.Locations = []string{"front"}
	want.Raw = json.RawMessage(`{"k":[1,2]}`)
	want.Disposition = DispositionAnswered
	want.Duration = Ptr(93.5)
	want.TalkTime = Ptr(80.0)
	want.AnsweredElsewhere = Ptr(true)
	want.SIPCode = Ptr(200)
	want.SIPReason = "OK"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded:\n got  %#v\n want %#v", got, want)
	}
	if got.OccurredAt.Location() != time.UTC {
		t.Errorf("occurredAt location = %v", got.OccurredAt.Location())
	}
}

func TestParseBodyDefaultsNotApplied(t *testing.T) {
	parsed, _, err := ParseBody([]byte(ev("")))
	if err != nil {
		t.Fatal(err)
	}
	e := parsed[0].Event
	if e.Provider != "" || e.Observer != "" || e.Locations != nil || e.Sequence != 0 || e.ProviderEventID != "" || e.Raw != nil || e.Call.From.Kind != "" {
		t.Fatalf("defaults applied: %#v", e)
	}
	if e.EffectiveProvider() != "sip" || e.EffectiveObserver() != ObserverEndpoint || !slices.Equal(e.EffectiveLocations(), []string{"main"}) || e.Call.From.EffectiveKind() != KindE164 {
		t.Fatalf("effective values wrong")
	}
}

// Verbatim: Body, Block and Raw are the exact bytes of the request, not re-encodings.

func TestParseBodyVerbatim(t *testing.T) {
	raw1 := "{ \"sip\" : \"INVITE sip:101@pbx.example SIP/2.0\\r\\nFrom: \\\"Caf\\u00e9\\\" <sip:+442071234567@carrier>;tag=a1\\r\\n\" ,\n\t\"z\":1, \"a\" : [ 1 , 2.50 , true , null ], \"é\":\"ünïcødé 日本 😀\" }"
	block1 := "{\n    \"to\" : { \"kind\":\"extension\" , \"extension\" : \"101\" },\r\n    \"direction\":   \"inbound\",\n    \"from\":{\"number\":\"+442071234567\",\"name\":\"Zoë \\\"Z\\\" O\\u2019Brien\\/\\t\"}\n  }"
	ev1 := "{  \"raw\" :" + raw1 + ",\n  \"call\" : " + block1 + " ,\n  \"occurredAt\":\"2026-03-01T09:30:00Z\" , \"providerCallId\" : \"c\\u002d1\",\n  \"type\" :\"call_received\"\n}"
	block2 := `{"direction":"outbound","from":{"kind":"anonymous"}}`
	ev2 := `{"type":"call_ended","providerCallId":"c-2","occurredAt":"2026-03-01T09:31:00Z","call":` + block2 + `,"sipReason":"Déjà vu \u00e9"}`
	ev3 := "{\"type\":\"call_hold\",\"call\":{\"direction\":\"internal\",\"from\":{\"kind\":\"extension\",\"extension\":\"1\"}},\"providerCallId\":\"c-3\",\"occurredAt\":\"2026-03-01T09:32:00Z\",\"raw\":{}}"
	body := []byte("\n\t{ \"events\" :\r\n [\n  " + ev1 + "  ,\n" + ev2 + "," + ev3 + "\n ]\t}\n")

	parsed, _, err := ParseBody(body)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want []byte
	}{
		{"events[0] body", parsed[0].Body, []byte(ev1)},
		{"events[0] block", parsed[0].Block, []byte(block1)},
		{"events[0] raw", parsed[0].Event.Raw, []byte(raw1)},
		{"events[1] body", parsed[1].Body, []byte(ev2)},
		{"events[1] block", parsed[1].Block, []byte(block2)},
		{"events[2] body", parsed[2].Body, []byte(ev3)},
		{"events[2] raw", parsed[2].Event.Raw, []byte(`{}`)},
	}
	for _, c := range checks {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s:\n got  %q\n want %q", c.name, c.got, c.want)
			continue
		}
		off, ok := within(body, c.got)
		if !ok {
			t.Errorf("%s is not a subslice of the body", c.name)
		} else if !bytes.Equal(body[off:off+len(c.got)], c.want) {
			t.Errorf("%s: offset %d wrong", c.name, off)
		}
	}
	if parsed[1].Event.Raw != nil {
		t.Errorf("events[1] raw = %q, want nil", parsed[1].Event.Raw)
	}
	// The decoded values are unescaped.
	if got := parsed[0].Event.Call.From.Name; got != "Zoë \"Z\" O\u2019Brien/\t" {
		t.Errorf("name = %q", got)
	}
	if got := parsed[0].Event.ProviderCallID; got != "c-1" {
		t.Errorf("providerCallId = %q", got)
	}
	if got := parsed[1].Event.SIPReason; got != "Déjà vu é" {
		t.Errorf("sipReason = %q", got)
	}
}

func TestParseBodyVerbatimSingle(t *testing.T) {
	block := "{ \"direction\" : \"inbound\" }"
	raw := "{\"b\":1,\"a\":{\"y\":[],\"x\":{}}}"
	obj := "{\"type\":\"call_missed\",\"providerCallId\":\"c\",\"occurredAt\":\"" + okAt + "\",\"call\":" + block + ",\"raw\":" + raw + "}"
	body := []byte("  \r\n" + obj + "\n\n")
	parsed, _, err := ParseBody(body)
	if err != nil {
		t.Fatal(err)
	}
	p := parsed[0]
	if string(p.Body) != obj || string(p.Block) != block || string(p.Event.Raw) != raw {
		t.Fatalf("body %q\nblock %q\nraw %q", p.Body, p.Block, p.Event.Raw)
	}
	if off, ok := within(body, p.Body); !ok || off != 4 {
		t.Fatalf("body offset %d, subslice %v", off, ok)
	}
}

func TestValidationErrorText(t *testing.T) {
	_, _, err := ParseBody([]byte(`{"type":"call_received"}`))
	want := "providerCallId: is required; occurredAt: is required; call: is required"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	wrapped := fmt.Errorf("ingest: %w", err)
	ve, ok := AsValidationError(wrapped)
	if !ok || len(ve.Problems) != 3 {
		t.Fatalf("AsValidationError(wrapped) = %v, %v", ve, ok)
	}
	if _, ok := AsValidationError(fmt.Errorf("other")); ok {
		t.Fatal("AsValidationError matched a plain error")
	}
	if _, ok := AsValidationError(nil); ok {
		t.Fatal("AsValidationError matched nil")
	}
	b, _ := json.Marshal(ve.Problems[0])
	if string(b) != `{"field":"providerCallId","problem":"is required"}` {
		t.Fatalf("problem JSON = %s", b)
	}
}

func TestParseBodyDeepNesting(t *testing.T) {
	// Millions of open brackets used to recurse until the stack limit ended the process.
	for _, body := range []string{
		strings.Repeat("[", 5_000_000),
		`{"raw":` + strings.Repeat(`{"a":`, 1_000_000),
		ev(`"raw":` + strings.Repeat(`{"a":`, maxDepth) + `1` + strings.Repeat(`}`, maxDepth)),
	} {
		_, _, err := ParseBody([]byte(body))
		requireProblems(t, err, []string{"body|nested more than 10000 levels"})
	}
	// The deepest nesting allowed: the event object and maxDepth-1 levels of raw.
	body := ev(`"raw":` + strings.Repeat(`{"a":`, maxDepth-1) + `1` + strings.Repeat(`}`, maxDepth-1))
	parsed, _, err := ParseBody([]byte(body))
	if err != nil || len(parsed[0].Event.Raw) != 6*(maxDepth-1)+1 {
		t.Fatalf("at the limit: %v", err)
	}
}

// TestBatchProblemsArePrefixed: an event placed third in a batch has exactly the problems it has
// alone, each under events[2], in the same order. (A batch's events are decoded with paths of
// their own, prefixed only when there is a problem.)
func TestBatchProblemsArePrefixed(t *testing.T) {
	n := 0
	for _, tc := range decodeCases() {
		body := strings.TrimSpace(tc.body)
		if !strings.HasPrefix(body, "{") || strings.Contains(body, `"events"`) || !json.Valid([]byte(body)) {
			continue
		}
		_, _, errAlone := ParseBody([]byte(body))
		aloneVE, _ := AsValidationError(errAlone)
		_, _, errIn := ParseBody([]byte(batch(ev(""), ev(""), body)))
		inVE, _ := AsValidationError(errIn)
		if (aloneVE == nil) != (inVE == nil) {
			t.Errorf("%s: alone %v, in a batch %v", tc.name, errAlone, errIn)
			continue
		}
		if aloneVE == nil || len(aloneVE.Problems) >= MaxProblems {
			continue
		}
		n++
		var want []Problem
		for _, p := range aloneVE.Problems {
			if p.Field == "body" {
				want = nil // a whole-body problem alone is not one of the item's
				break
			}
			want = append(want, Problem{Field: under("events[2]", p.Field), Message: p.Message})
		}
		if want != nil && !slices.Equal(inVE.Problems, want) {
			t.Errorf("%s:\nin a batch %v\nwant       %v", tc.name, inVE.Problems, want)
		}
	}
	if n < 20 {
		t.Fatalf("only %d cases with problems compared", n)
	}
}

// TestParserAgreesWithParseBody runs every decode case through one Parser, in turn, and holds
// each to ParseBody; then checks that what an earlier Parse returned is untouched by later ones.
func TestParserAgreesWithParseBody(t *testing.T) {
	var p Parser
	type kept struct {
		body   string
		parsed []Parsed
		json   [][]byte
	}
	var earlier []kept
	for _, tc := range decodeCases() {
		want, wantBatch, wantErr := ParseBody([]byte(tc.body))
		got, gotBatch, gotErr := p.Parse([]byte(tc.body))
		if !reflect.DeepEqual(got, want) || gotBatch != wantBatch || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s: Parser gave %v %v %v, ParseBody %v %v %v", tc.name, got, gotBatch, gotErr, want, wantBatch, wantErr)
		}
		k := kept{body: tc.body, parsed: got}
		for _, pe := range got {
			b, err := json.Marshal(pe.Event)
			if err != nil {
				t.Fatal(err)
			}
			k.json = append(k.json, b)
		}
		earlier = append(earlier, k)
	}
	for _, k := range earlier {
		for i, pe := range k.parsed {
			if b, _ := json.Marshal(pe.Event); !bytes.Equal(b, k.json[i]) {
				t.Fatalf("an event of %q changed after later bodies: %s, was %s", k.body, b, k.json[i])
			}
		}
	}
}

// TestParseIntoAgreesWithParseBody runs every decode case through one Parser and one Room, in
// turn, and holds each to ParseBody: whatever an earlier body left in the Room, and whether or
// not it was forgotten in between.
func TestParseIntoAgreesWithParseBody(t *testing.T) {
	var (
		p Parser
		r Room
	)
	for i, tc := range decodeCases() {
		want, wantBatch, wantErr := ParseBody([]byte(tc.body))
		got, gotBatch, gotErr := p.ParseInto(&r, []byte(tc.body))
		if !reflect.DeepEqual(got, want) || gotBatch != wantBatch || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s: ParseInto gave %v %v %v, ParseBody %v %v %v", tc.name, got, gotBatch, gotErr, want, wantBatch, wantErr)
		}
		if i%2 == 0 {
			r.Forget()
		}
	}
}

// TestRoomForgets: after Forget, a Room holds nothing of the last body.
func TestRoomForgets(t *testing.T) {
	var (
		p Parser
		r Room
	)
	if _, _, err := p.ParseInto(&r, []byte(bulk())); err != nil {
		t.Fatal(err)
	}
	if cap(r.events) == 0 || cap(r.parties) == 0 {
		t.Fatal("ParseInto kept no memory for the next body")
	}
	r.Forget()
	for _, e := range r.events[:cap(r.events)] {
		if !reflect.DeepEqual(e, Parsed{}) {
			t.Fatalf("a kept event is not cleared: %+v", e)
		}
	}
	for _, pt := range r.parties[:cap(r.parties)] {
		if pt != (Party{}) {
			t.Fatalf("a kept party is not cleared: %+v", pt)
		}
	}
}

// TestParserKeepsBoundedMemory: after a body that is nearly all tree, a Parser keeps no more
// than its bound, and nothing of the body.
func TestParserKeepsBoundedMemory(t *testing.T) {
	var p Parser
	body := `{"events":[` + strings.Repeat(`[`+strings.Repeat(`1,`, 50_000)+`1],`, 3) + `{}]}`
	if _, _, err := p.Parse([]byte(body)); err == nil {
		t.Fatal("a batch of arrays was accepted")
	}
	s := &p.s
	if len(s.nodes.chunks) > nodeChunksKept || len(s.fields.chunks) > fieldChunksKept || len(s.items.chunks) > itemChunksKept {
		t.Errorf("kept %d, %d and %d chunks, want at most %d, %d and %d", len(s.nodes.chunks), len(s.fields.chunks),
			len(s.items.chunks), nodeChunksKept, fieldChunksKept, itemChunksKept)
	}
	if cap(s.istack) > stackKept || cap(s.fstack) > stackKept || cap(s.scratch) > scratchKept || s.text != "" {
		t.Errorf("kept stacks of %d and %d, scratch of %d, text of %d bytes", cap(s.istack), cap(s.fstack), cap(s.scratch), len(s.text))
	}
	for _, c := range s.nodes.chunks {
		for _, n := range c[:cap(c)] {
			if n.kind != 0 || n.b || n.esc || n.str != "" || n.fields != nil || n.dupKeys != nil || n.items != nil || n.start != 0 || n.end != 0 {
				t.Fatalf("a kept node is not cleared: %+v", n)
			}
		}
	}
}

// TestParserAllocatesLess: reading a batch of 50 events allocates the events and the body's
// copy, not a tree, and into a reused Room, less again: the body's copy, not the events. A body
// with a problem is read again as a tree, and a reused Parser keeps the tree's memory: it then
// allocates a small part of the bytes ParseBody does.
func TestParserAllocatesLess(t *testing.T) {
	body := []byte(bulk())
	wrong := []byte(strings.Replace(string(body), `"sequence":5,`, `"sequence":-5,`, 1))
	var p Parser
	if _, _, err := p.Parse(wrong); err == nil {
		t.Fatal("a batch with a negative sequence was accepted")
	}
	bytesPer := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 20 {
			f()
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 20
	}
	once := bytesPer(func() { _, _, _ = ParseBody(body) })
	var r Room
	into := bytesPer(func() { _, _, _ = p.ParseInto(&r, body) })
	if into > once*3/4 {
		t.Errorf("ParseInto allocated %d bytes a body, ParseBody %d", into, once)
	}
	// The body's copy and the events are each about the body's size; a tree took three more.
	if copied := uint64(len(body)); once > 5*copied/2 {
		t.Errorf("ParseBody allocated %d bytes for a body of %d", once, copied)
	}
	onceWrong := bytesPer(func() { _, _, _ = ParseBody(wrong) })
	reusedWrong := bytesPer(func() { _, _, _ = p.Parse(wrong) })
	if reusedWrong > onceWrong*3/5 {
		t.Errorf("a reused Parser allocated %d bytes for a body with a problem, ParseBody %d", reusedWrong, onceWrong)
	}
	t.Logf("bytes allocated per batch of 50 (%d bytes): ParseBody %d, ParseInto a reused Room %d; with a problem: ParseBody %d, reused Parser %d",
		len(body), once, into, onceWrong, reusedWrong)
}
