package numbering

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"

	"github.com/callwire/callwire/sdk/event"
)

// FuzzClassify: Classify never panics, always answers a valid kind, writes e164 numbers that
// parse back to themselves, extensions of plain digits, keeps an unknown input in URI, and gives
// the same answer twice (the second from the cache).
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"+15551230100", "+1 (555) 123-0100", "tel:+1-555-123-0100;phone-context=example.com",
		"sip:+15551230100@carrier;user=phone", "912125550123", "*672125550123", "#31#2125550123",
		"011 44 20 7123 4567", "00 44 20 7123 4567", "101", "2001", "911", "9911", "anonymous",
		"sip:anonymous@anonymous.invalid", "sip:alice@pbx", "", "１２１２５５５０１２３", "\xff",
		"tel:0123;phone-context=+1212555", "sip:%2B1%32125550123@x", "*31#+12125550123",
	} {
		f.Add(s, "")
	}
	f.Add("sip:c8f3a1@10.0.0.1", "Anonymous")
	f.Add("+12125550123", "Jane Doe")
	p := usPlan(f)
	f.Fuzz(func(t *testing.T, text, name string) {
		got := p.Classify(text, name)
		if again := p.Classify(text, name); again != got {
			t.Fatalf("Classify(%q, %q) changed: %#v then %#v", text, name, got, again)
		}
		if !got.Kind.Valid() {
			t.Fatalf("kind %q", got.Kind)
		}
		switch got.Kind {
		case event.KindE164:
			if !strings.HasPrefix(got.Number, "+") || !event.ValidE164(got.Number) {
				t.Fatalf("number %q is not E.164", got.Number)
			}
			pn, err := phonenumbers.Parse(got.Number, "ZZ")
			if err != nil {
				t.Fatalf("number %q does not parse back: %v", got.Number, err)
			}
			if back := phonenumbers.Format(pn, phonenumbers.E164); back != got.Number {
				t.Fatalf("number %q parses back as %q", got.Number, back)
			}
			// Only a number written with '+' may be merely possible; one read in the default
			// country must be valid, or the clinic's own.
			written := strings.ContainsAny(text, "+\uFF0B") || strings.Contains(strings.ToLower(text), "%2b")
			if !phonenumbers.IsValidNumber(pn) && !p.IsClinic(got.Number) && !(written && phonenumbers.IsPossibleNumber(pn)) {
				t.Fatalf("number %q from %q is neither valid nor the clinic's", got.Number, text)
			}
		case event.KindExtension:
			if len(got.Extension) < MinExtensionDigits || len(got.Extension) > DefaultExtensionMaxDigits || !allDigits(got.Extension) {
				t.Fatalf("extension %q", got.Extension)
			}
		case event.KindUnknown:
			want := text
			if !utf8.ValidString(want) || utf8.RuneCountInString(want) > event.MaxURILength {
				want = keepURI(text)
			}
			if got.URI != want {
				t.Fatalf("unknown URI = %q, want the input %q", got.URI, want)
			}
		case event.KindAnonymous:
			if got.Number != "" || got.Name != "" {
				t.Fatalf("anonymous party carries %#v", got)
			}
		}
		checkParty(t, got)
	})
}
