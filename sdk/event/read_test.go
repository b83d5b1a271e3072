package event

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// checkReaders holds readBody to the tree's decoder on data: readBody accepts data exactly when
// the tree's decoder does, with the same events, whether or not it decodes into a Room.
func checkReaders(t *testing.T, data []byte, room *Room) {
	t.Helper()
	var s, ts scanner
	got, gotBatch, ok := s.readBody(data, room)
	want, wantBatch, err := parseBodyTree(&ts, data, nil)
	switch {
	case ok && err != nil:
		t.Fatalf("readBody accepted %q, which the tree's decoder refuses: %v", data, err)
	case !ok && err == nil:
		t.Fatalf("readBody refused %q, which the tree's decoder accepts", data)
	case ok && (gotBatch != wantBatch || !reflect.DeepEqual(got, want)):
		t.Fatalf("readBody and the tree's decoder read %q differently:\n%v %+v\n%v %+v", data, gotBatch, got, wantBatch, want)
	}
}

// TestReadBody holds readBody to the tree's decoder on every body the decoder's own tests read,
// on every event of the golden files, and on bodies near each edge readBody checks itself.
func TestReadBody(t *testing.T) {
	var bodies []string
	for _, tc := range decodeCases() {
		bodies = append(bodies, tc.body)
	}
	for _, e := range goldenEvents() {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(b), batch(string(b), string(b)), batch(string(b), ev("")))
	}
	// Nesting: raw's object is at depth 2 in a single event and 4 in a batch; maxDepth is the
	// deepest allowed.
	nested := func(depth int) string { return `{"a":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}` }
	bodies = append(bodies,
		ev(`"raw":`+nested(maxDepth-2)), ev(`"raw":`+nested(maxDepth-1)),
		batch(ev(`"raw":`+nested(maxDepth-4))), batch(ev(`"raw":`+nested(maxDepth-3))),
	)
	// Every kind of value in raw, escapes, white space, and what is allowed but unusual.
	bodies = append(bodies,
		ev(`"raw":{"a":[1,-2.5e+3,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800",{},[],{"a":1,"a":2}]}`),
		ev(`"raw":null`), ev(`"raw":{}`), ev(`"raw":[]`), ev(`"raw":"x"`), ev(`"raw":{"a":01}`), ev(`"raw":{"a":"\x"}`),
		" \t\r\n{ \"events\" : [ "+ev(` "sequence" : 7 `)+" , "+ev("")+" ] } \n",
		`{"\u0065vents":[`+ev("")+`]}`, `{"type":"call_received","\u0065vents":[]}`,
		ev(`"provider":""`), ev(`"provider":null`), ev(`"providerEventId":""`), ev(`"providerEventId":null`),
		ev(`"sequence":null`), ev(`"sequence":1.0`), ev(`"sequence":9223372036854775808`), ev(`"sequence":-0`),
		ev(`"locations":[]`), ev(`"locations":null`), ev(`"locations":["a",null]`), ev(`"locations":["front-\u0064esk"]`),
		ev(`"observer":null,"answeredBy":null,"disposition":null`),
		evt("call_ended", `"sipCode":2147483648`), evt("call_ended", `"sipCode":200,"duration":1e400`),
		evt("call_ended", `"answeredElsewhere":true,"talkTime":null`), evt("call_hold", `"released":false`),
		evt("call_transferred", `"to":{"number":"+442071234599","kind":"e164"},"mode":"blind"`),
		evt("call_transferred", `"to":{},"mode":null`), evt("call_transferred", `"to":"x"`),
		`{"events":[`+ev("")+`],"events":[`+ev("")+`]}`, `{"events":[`+ev("")+`],"x":1}`, `{"events":[]}`, `{"events":null}`,
		`{"events":[`+ev("")+`,1]}`, `{"events":[`+ev("")+`]`, `{"events":[`+ev("")+`]}x`,
	)
	for _, hops := range []string{`[]`, `null`, `[{"number":"+442071234501","reason":"no-answer","counter":1}]`,
		`[{"reason":"x","reason":"y"}]`, `[{"counter":101}]`, `[{"counter":null,"kind":null}]`, `[1]`, `{}`} {
		bodies = append(bodies, strings.Replace(ev(""), `"direction":"inbound"`, `"direction":"inbound","diversion":`+hops, 1))
	}
	var room Room
	for _, b := range bodies {
		checkReaders(t, []byte(b), nil)
		checkReaders(t, []byte(b), &room)
	}
	// The batch of the benchmark, and the same with one event wrong in each of its places.
	bulk := bulk()
	checkReaders(t, []byte(bulk), &room)
	for i := range 50 {
		at := -1
		for range i + 1 {
			at += 1 + strings.Index(bulk[at+1:], `"sequence":`)
		}
		wrong := bulk[:at] + `"sequence":-1,` + bulk[strings.IndexByte(bulk[at:], ',')+at+1:]
		checkReaders(t, []byte(wrong), &room)
	}
}
