package numbering

import (
	"strings"
	"testing"

	"github.com/callwire/callwire/sdk/event"
)

// Numbers used below: +12125550123 (New York, valid), +442071234567 (London, valid),
// +49301234567 (Berlin, valid), and the clinic's fictional +1 555 numbers, which the metadata
// does not know and which count only because they are the clinic's own.

func mustPlan(t testing.TB, c Config) *Plan {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func usPlan(t testing.TB) *Plan {
	return mustPlan(t, Config{
		Numbers:        []string{"+15551230100", "+15551230200"},
		DefaultCountry: "US",
		Locations:      map[string][]string{"+15551230100": {"main"}, "+15551230200": {"branch-east"}},
		DialPrefixes:   []string{"9"},
	})
}

func e164(n string) event.Party                 { return event.Party{Kind: event.KindE164, Number: n} }
func ext(x string) event.Party                  { return event.Party{Kind: event.KindExtension, Extension: x} }
func unknown(uri string) event.Party            { return event.Party{Kind: event.KindUnknown, URI: uri} }
func anonymous(uri string) event.Party          { return event.Party{Kind: event.KindAnonymous, URI: uri} }
func named(p event.Party, n string) event.Party { p.Name = n; return p }

type classifyCase struct {
	name, text, display string
	want                event.Party
}

func runClassify(t *testing.T, p *Plan, cases []classifyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for round := range 2 { // the second answer comes from the cache
				got := p.Classify(c.text, c.display)
				if got != c.want {
					t.Fatalf("round %d: Classify(%q, %q)\n got  %#v\n want %#v", round, c.text, c.display, got, c.want)
				}
				checkParty(t, got)
			}
		})
	}
}

// checkParty asserts got is a party the event contract accepts.
func checkParty(t testing.TB, got event.Party) {
	t.Helper()
	e := event.New(event.CallReceived, "c-1", testTime, event.Call{Direction: event.Inbound, From: &got})
	if err := e.Validate(); err != nil {
		t.Fatalf("party %#v makes an invalid event: %v", got, err)
	}
}

func TestClassifyUS(t *testing.T) {
	p := usPlan(t)
	long := strings.Repeat("1", 5000)
	runClassify(t, p, []classifyCase{
		// The clinic's own numbers, in every written form.
		{"own e164", "+15551230100", "", e164("+15551230100")},
		{"own formatted", "+1 (555) 123-0100", "", e164("+15551230100")},
		{"own national", "(555) 123-0100", "", e164("+15551230100")},
		{"own tel uri with domain context", "tel:+1-555-123-0100;phone-context=example.com", "", e164("+15551230100")},
		{"own sip uri user=phone", "sip:+15551230100@carrier.example;user=phone", "", e164("+15551230100")},
		{"national, not own and not valid", "(555) 123-9999", "", unknown("(555) 123-9999")},
		{"international, not valid but possible", "sip:+15551239999@carrier.example", "", e164("+15551239999")},
		{"international, not possible", "+1 555 123 999", "", unknown("+1 555 123 999")},
		{"international, no such country code", "+999 1234 5678", "", unknown("+999 1234 5678")},

		// Other numbers, national and international.
		{"e164", "+12125550123", "", e164("+12125550123")},
		{"national with punctuation", "(212) 555-0123", "", e164("+12125550123")},
		{"national with dots", "212.555.0123", "", e164("+12125550123")},
		{"trunk prefix 1", "12125550123", "", e164("+12125550123")},
		{"sip user part with port and params", "sip:2125550123@10.0.0.20:5060;transport=udp", "", e164("+12125550123")},
		{"sips", "sips:+12125550123@carrier.example:5061", "", e164("+12125550123")},
		{"scheme in upper case", "TEL:+12125550123", "", e164("+12125550123")},
		{"angle brackets", "<sip:+12125550123@carrier.example>", "", e164("+12125550123")},
		{"percent-encoded plus", "sip:%2B12125550123@carrier.example", "", e164("+12125550123")},
		{"sip password and headers", "sip:+12125550123:secret@carrier.example?subject=x", "", e164("+12125550123")},
		{"tel local number with global context", "tel:5550123;phone-context=+1-212", "", e164("+12125550123")},
		{"sip user with global context", "sip:0123;phone-context=+1212555@pbx.example;user=phone", "", e164("+12125550123")},
		{"international from US", "011 44 20 7123 4567", "", e164("+442071234567")},
		{"international from US unspaced", "011442071234567", "", e164("+442071234567")},
		{"international e164 UK", "+44 20 7123 4567", "", e164("+442071234567")},
		{"international e164 DE", "+49 30 1234567", "", e164("+49301234567")},
		{"fullwidth digits", "１２１２５５５０１２３", "", e164("+12125550123")},
		{"arabic-indic digits", "٢١٢٥٥٥٠١٢٣", "", e164("+12125550123")},
		{"fullwidth plus", "＋1 212 555 0123", "", e164("+12125550123")},
		{"no-break spaces and en dash", "212\u00a0555–0123", "", e164("+12125550123")},

		// Outside-line prefix and star codes.
		{"outside line 9", "912125550123", "", e164("+12125550123")},
		{"outside line 9 spaced", "9 1 212 555 0123", "", e164("+12125550123")},
		{"outside line 9 international", "9011442071234567", "", e164("+442071234567")},
		{"star 67", "*672125550123", "", e164("+12125550123")},
		{"star 67 spaced", "*67 (212) 555-0123", "", e164("+12125550123")},
		{"star 82 then 67", "*82*6712125550123", "", e164("+12125550123")},
		{"star 67 then outside line", "*6792125550123", "", e164("+12125550123")},
		{"hash 31 hash", "#31#2125550123", "", e164("+12125550123")},
		{"star 31 hash", "*31#+12125550123", "", e164("+12125550123")},
		{"star 67 in sip uri", "sip:*672125550123@pbx.example", "", e164("+12125550123")},
		{"star hash 31 hash", "*#31#2125550123", "", e164("+12125550123")},
		{"hash code without its closing hash", "#312125550123", "", unknown("#312125550123")},
		{"star and one digit", "*62125550123", "", unknown("*62125550123")},
		{"star code only", "*97", "", unknown("*97")},
		{"lower-case percent escape", "sip:%2b12125550123@carrier.example", "", e164("+12125550123")},
		{"phone-context that is not a number", "tel:5550123;phone-context=+1a", "", unknown("tel:5550123;phone-context=+1a")},
		{"phone-context of a plus alone", "tel:5550123;phone-context=+", "", unknown("tel:5550123;phone-context=+")},
		{"star in the middle", "212*5550123", "", unknown("212*5550123")},

		// Extensions and short codes.
		{"extension 101", "101", "", ext("101")},
		{"extension 2001", "2001", "", ext("2001")},
		{"extension of two digits", "12", "", ext("12")},
		{"extension of six digits", "123456", "", ext("123456")},
		{"seven digits is not an extension", "1234567", "", unknown("1234567")},
		{"one digit is not an extension", "0", "", unknown("0")},
		{"extension in sip uri", "sip:101@pbx.example", "", ext("101")},
		{"extension with display name", "sip:101@pbx.example", "Reception", named(ext("101"), "Reception")},
		{"extension in unicode digits", "１０１", "", ext("101")},
		{"extension written with a separator is not one", "1-01", "", unknown("1-01")},
		{"emergency 911", "911", "", unknown("911")},
		{"emergency 911 through outside line", "9911", "", unknown("9911")},
		{"emergency 112", "112", "", unknown("112")},

		// Anonymous: clear markers only.
		{"anonymous", "anonymous", "", anonymous("anonymous")},
		{"Anonymous", "Anonymous", "", anonymous("Anonymous")},
		{"RFC 3323 uri", "sip:anonymous@anonymous.invalid", "", anonymous("sip:anonymous@anonymous.invalid")},
		{"RFC 3323 host with a number hides it", "sip:+12125550123@anonymous.invalid", "", anonymous("sip:+12125550123@anonymous.invalid")},
		{"restricted", "sip:restricted@carrier.example", "", anonymous("sip:restricted@carrier.example")},
		{"private number", "Private Number", "", anonymous("Private Number")},
		{"withheld", "WITHHELD", "", anonymous("WITHHELD")},
		{"anonymous name drops the name", "anonymous", "Jane", anonymous("anonymous")},
		{"anonymous display name on an opaque user", "sip:c8f3a1@10.0.0.1", "Anonymous", anonymous("sip:c8f3a1@10.0.0.1")},
		{"anonymous display name on a number keeps the number", "+12125550123", "Anonymous", e164("+12125550123")},
		{"unavailable is unknown, not anonymous", "sip:unavailable@carrier.example", "", unknown("sip:unavailable@carrier.example")},
		{"unavailable display name is dropped", "sip:x@carrier.example", "Unavailable", unknown("sip:x@carrier.example")},

		// Names.
		{"name kept", "+12125550123", "Jane Doe", named(e164("+12125550123"), "Jane Doe")},
		{"name trimmed", "+12125550123", "  Zoë O’Brien ", named(e164("+12125550123"), "Zoë O’Brien")},
		{"name that is a number is dropped", "+12125550123", "+1 212 555 0123", e164("+12125550123")},
		{"blank name", "+12125550123", "   ", e164("+12125550123")},
		{"long name cut", "+12125550123", strings.Repeat("é", 300), named(e164("+12125550123"), strings.Repeat("é", event.MaxNameLength))},

		// What cannot be classified is kept.
		{"empty", "", "", unknown("")},
		{"blank", "   ", "", unknown("   ")},
		{"user name", "alice", "", unknown("alice")},
		{"sip user name", "sip:alice@pbx.example", "Alice", named(unknown("sip:alice@pbx.example"), "Alice")},
		{"sip without user", "sip:pbx.example", "", unknown("sip:pbx.example")},
		{"letters in a number", "1-800-FLOWERS", "", unknown("1-800-FLOWERS")},
		{"extension suffix text", "+1 212 555 0123 ext. 5", "", unknown("+1 212 555 0123 ext. 5")},
		{"plus alone", "+", "", unknown("+")},
		{"plus in the middle", "1+2125550123", "", unknown("1+2125550123")},
		{"too short", "+1212", "", unknown("+1212")},
		{"too long", "+121255501234567", "", unknown("+121255501234567")},
		{"name-addr is not taken apart", `"Jane" <sip:+12125550123@carrier>`, "", unknown(`"Jane" <sip:+12125550123@carrier>`)},
		{"very long input", long, "", unknown(long[:event.MaxURILength])},
		{"invalid utf-8", "\xff\xfe101", "", unknown("\ufffd101")},
	})
}

func TestClassifyUK(t *testing.T) {
	p := mustPlan(t, Config{DefaultCountry: "GB", DialPrefixes: []string{"9", "141"}})
	runClassify(t, p, []classifyCase{
		{"national", "020 7123 4567", "", e164("+442071234567")},
		{"e164 with bracketed trunk prefix", "+44 (0)20 7123 4567", "", e164("+442071234567")},
		{"international from UK", "00 1 212 555 0123", "", e164("+12125550123")},
		{"international to DE", "0049 30 1234567", "", e164("+49301234567")},
		{"outside line 9", "9 020 7123 4567", "", e164("+442071234567")},
		{"caller-ID withhold 141", "141 020 7123 4567", "", e164("+442071234567")},
		{"outside line then 141", "9141 020 7123 4567", "", e164("+442071234567")},
		{"hash 31 hash", "#31#02071234567", "", e164("+442071234567")},
		{"101 is an extension", "101", "", ext("101")},
		{"999", "999", "", unknown("999")},
		{"999 through the outside line", "9999", "", unknown("9999")},
	})
}

func TestClassifyDE(t *testing.T) {
	p := mustPlan(t, Config{DefaultCountry: "de", DialPrefixes: []string{"0"}})
	runClassify(t, p, []classifyCase{
		{"national", "030 1234567", "", e164("+49301234567")},
		{"national with slash", "030/1234567", "", e164("+49301234567")},
		{"e164 with area code in brackets", "+49 (30) 1234567", "", e164("+49301234567")},
		{"international from DE", "00 44 20 7123 4567", "", e164("+442071234567")},
		{"outside line 0 then national", "0030 1234567", "", e164("+49301234567")},
		{"outside line 0 then international", "000442071234567", "", e164("+442071234567")},
		{"extension", "21", "", ext("21")},
		{"112", "112", "", unknown("112")},
		{"110", "110", "", unknown("110")},
	})
}

func TestClassifyExtensionMaxDigits(t *testing.T) {
	p := mustPlan(t, Config{DefaultCountry: "US", ExtensionMaxDigits: 3})
	runClassify(t, p, []classifyCase{
		{"three digits", "101", "", ext("101")},
		{"four digits", "2001", "", unknown("2001")},
	})
}
