package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"testing"
)

// FuzzParseBody feeds ParseBody arbitrary bodies. It must never panic; whatever it accepts must
// be valid, verbatim, and survive a marshal and re-parse unchanged; and its one-pass reader must
// accept exactly what the tree's decoder accepts, with the same events.
func FuzzParseBody(f *testing.F) {
	for _, tc := range decodeCases() {
		if len(tc.body) <= 4096 {
			f.Add([]byte(tc.body))
		}
	}
	for _, e := range goldenEvents() {
		b, err := json.Marshal(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add([]byte(`{"events":[` + string(b) + `,` + ev("") + `]}`))
	}
	// One Parser for every input, as a service keeps one for body after body: it must decode
	// each exactly as ParseBody does, whatever it read before.
	var (
		mu     sync.Mutex
		parser Parser
		room   Room // each input is also read into it
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := bytes.Clone(data)
		parsed, isBatch, err := ParseBody(data)
		if !bytes.Equal(in, data) {
			t.Fatal("ParseBody modified its input")
		}
		checkReaders(t, data, nil)
		mu.Lock()
		again, againBatch, againErr := parser.Parse(data)
		if !reflect.DeepEqual(again, parsed) || againBatch != isBatch || fmt.Sprint(againErr) != fmt.Sprint(err) {
			mu.Unlock()
			t.Fatalf("a reused Parser decoded %q differently from ParseBody:\n%v %v %v\n%v %v %v",
				data, again, againBatch, againErr, parsed, isBatch, err)
		}
		again, againBatch, againErr = parser.ParseInto(&room, data)
		same := reflect.DeepEqual(again, parsed) && againBatch == isBatch && fmt.Sprint(againErr) == fmt.Sprint(err)
		mu.Unlock()
		if !same {
			t.Fatalf("ParseInto decoded %q differently from ParseBody:\n%v %v %v\n%v %v %v",
				data, again, againBatch, againErr, parsed, isBatch, err)
		}
		if err != nil {
			ve, ok := AsValidationError(err)
			if !ok {
				t.Fatalf("error is not a *ValidationError: %T %v", err, err)
			}
			if len(ve.Problems) == 0 || len(ve.Problems) > MaxProblems {
				t.Fatalf("%d problems", len(ve.Problems))
			}
			for _, p := range ve.Problems {
				if p.Field == "" || p.Message == "" {
					t.Fatalf("empty problem part: %+v", p)
				}
			}
			if parsed != nil {
				t.Fatal("events returned with an error")
			}
			return
		}
		if len(parsed) == 0 || len(parsed) > MaxBatch || (!isBatch && len(parsed) != 1) {
			t.Fatalf("accepted %d events, batch=%v", len(parsed), isBatch)
		}
		for i, p := range parsed {
			checkParsed(t, data, i, p)
		}
	})
}

func checkParsed(t *testing.T, data []byte, i int, p Parsed) {
	t.Helper()
	if !json.Valid(p.Body) || p.Body[0] != '{' {
		t.Fatalf("events[%d]: Body is not a JSON object: %q", i, p.Body)
	}
	if _, ok := within(data, p.Body); !ok {
		t.Fatalf("events[%d]: Body is not a subslice of the input", i)
	}
	if _, ok := within(p.Body, p.Block); !ok || !json.Valid(p.Block) {
		t.Fatalf("events[%d]: Block %q is not a JSON subslice of Body", i, p.Block)
	}
	if p.Event.Raw != nil {
		if _, ok := within(p.Body, p.Event.Raw); !ok || !json.Valid(p.Event.Raw) || p.Event.Raw[0] != '{' {
			t.Fatalf("events[%d]: Raw %q is not a JSON object inside Body", i, p.Event.Raw)
		}
	}
	if err := p.Event.Validate(); err != nil {
		t.Fatalf("events[%d]: accepted event fails Validate: %v", i, err)
	}
	b, err := json.Marshal(p.Event)
	if err != nil {
		t.Fatalf("events[%d]: accepted event does not marshal: %v", i, err)
	}
	again, _, err := ParseBody(b)
	if err != nil {
		t.Fatalf("events[%d]: canonical JSON refused: %v\n%s", i, err, b)
	}
	b2, err := json.Marshal(again[0].Event)
	if err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("events[%d]: canonical JSON not stable:\n%s\n%s", i, b, b2)
	}
	if p.Event.DedupeKey() == "" || p.Event.EffectiveProvider() == "" || len(p.Event.EffectiveLocations()) == 0 {
		t.Fatalf("events[%d]: empty effective value", i)
	}
}

var e164Form = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)

// FuzzValidE164 checks ValidE164 against the written form it documents, and that a number it
// accepts is accepted on a party.
func FuzzValidE164(f *testing.F) {
	for _, s := range []string{"+442071234567", "+12", "+1", "+", "", "+0442071234567", "442071234567",
		"+123456789012345", "+1234567890123456", "+44 20 7123 4567", "+44207ABC4567", "++44", "+4420712345６7",
		"+1\x00", "\xff", "+٤٤"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := ValidE164(s)
		if want := e164Form.MatchString(s); got != want {
			t.Fatalf("ValidE164(%q) = %v, want %v", s, got, want)
		}
		if s == "" {
			return // an absent number is allowed; the form is checked only when one is given
		}
		p := Party{Number: s}
		var ps problems
		p.validate(&ps, "from")
		if got != (len(ps.list) == 0) {
			t.Fatalf("ValidE164(%q) = %v but party problems %v", s, got, ps.list)
		}
	})
}
