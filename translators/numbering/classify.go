package numbering

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"

	"github.com/callwire/callwire/sdk/event"
)

// Bounds on what Classify takes apart. Longer texts are kept as kind unknown without parsing.
const (
	maxInput = 2048 // a whole URI
	maxUser  = 64   // the number or user part of it
)

// Classify turns what a translator saw of one end of a call into a party. text is a number as
// written ("+1 (555) 123-0100", "011 44 20 7123 4567", "101"), a SIP user part, or a whole sip:,
// sips: or tel: URI, optionally in angle brackets; name is the display name seen with it, or "".
//
// The result is, in this order of precedence:
//   - kind anonymous, without number or name, when the URI's host is anonymous.invalid (RFC 3323)
//     or the user part is a withheld-number marker (anonymous, restricted, private, withheld, in
//     any letter case); or when nothing else could be made of text and name is such a marker.
//     URI keeps text.
//   - kind extension with Extension in ASCII digits, when the user part is MinExtensionDigits to
//     extension_max_digits digits with nothing else, is not a valid number in the default
//     country, and is not an emergency number of the default country (with or without a dial
//     prefix in front: "911", "9911" with prefix 9).
//   - kind e164 with Number in E.164, when the digits (after the visual separators, star codes
//     such as *67 or #31#, and if need be a dial prefix are removed) are a number the
//     phone-number library finds valid, read in the default country, or one of the clinic's
//     numbers. A number written in full international form ('+' and country code) needs only
//     be possible for its country code (the right length), as carriers assert it whole.
//   - kind unknown otherwise, with URI exactly text (made valid UTF-8 and cut to
//     event.MaxURILength characters if it has to be).
//
// Name is the display name without surrounding space, cut to event.MaxNameLength characters, and
// left out when it has no letter in it (it is a number, not a name) or is a withheld or
// unavailable marker. Classify never fails and never drops what it saw.
func (p *Plan) Classify(text, name string) event.Party {
	pt, ok := p.cache.Get(text)
	if !ok {
		pt = p.classify(text)
		if len(text) <= cacheMaxInput {
			p.cache.Add(text, pt)
		}
	}
	if pt.Kind == event.KindAnonymous {
		return pt
	}
	switch markerOf(name) {
	case markerAnonymous:
		if pt.Kind == event.KindUnknown {
			pt.Kind = event.KindAnonymous
		}
		return pt
	case markerUnavailable:
		return pt
	}
	pt.Name = cleanName(name)
	return pt
}

func (p *Plan) classify(orig string) event.Party {
	unknown := event.Party{Kind: event.KindUnknown, URI: keepURI(orig)}
	s := strings.TrimSpace(orig)
	if len(s) >= 2 && s[0] == '<' && s[len(s)-1] == '>' {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	if s == "" || len(s) > maxInput {
		return unknown
	}
	user, params, host := splitParty(s)
	if strings.EqualFold(host, "anonymous.invalid") || markerOf(user) == markerAnonymous {
		return event.Party{Kind: event.KindAnonymous, URI: unknown.URI}
	}
	if user == "" || len(user) > maxUser {
		return unknown
	}
	dial, plain, ok := dialString(user)
	if !ok || dial == "" {
		return unknown
	}
	if ctx := phoneContext(params); ctx != "" && allDigits(dial) {
		// RFC 3966 local number in the context of a global number prefix: the library joins them.
		if n, ok := p.number(dial + ";phone-context=" + ctx); ok {
			return event.Party{Kind: event.KindE164, Number: n}
		}
	}
	if plain && len(dial) >= MinExtensionDigits && len(dial) <= p.extMax {
		if n, ok := p.number(dial); ok {
			return event.Party{Kind: event.KindE164, Number: n}
		}
		if p.emergency(dial) {
			return unknown
		}
		return event.Party{Kind: event.KindExtension, Extension: dial}
	}
	dial = stripFeatureCodes(dial)
	if dial == "" || strings.ContainsAny(dial, "*#") {
		return unknown
	}
	if dial[0] == '+' {
		if n, ok := p.international(dial); ok {
			return event.Party{Kind: event.KindE164, Number: n}
		}
		return unknown
	}
	if n, ok := p.number(dial); ok {
		return event.Party{Kind: event.KindE164, Number: n}
	}
	// Dial prefixes, longest first; a prefix may follow another ("9" then "141"), up to three.
	for range 3 {
		stripped := false
		for _, pre := range p.prefixes {
			if len(dial) > len(pre) && strings.HasPrefix(dial, pre) {
				dial, stripped = dial[len(pre):], true
				break
			}
		}
		if !stripped {
			break
		}
		if n, ok := p.number(dial); ok {
			return event.Party{Kind: event.KindE164, Number: n}
		}
	}
	return unknown
}

// number parses s in the default country and returns it in E.164 when the library finds it a
// valid number or it is one of the clinic's own numbers.
func (p *Plan) number(s string) (string, bool) {
	var pn phonenumbers.PhoneNumber
	if err := phonenumbers.ParseToNumber(s, p.region, &pn); err != nil {
		return "", false
	}
	e := phonenumbers.Format(&pn, phonenumbers.E164)
	if phonenumbers.IsValidNumber(&pn) || p.IsClinic(e) {
		return e, true
	}
	return "", false
}

// international reads s, written in full international form ('+' and country code), and returns
// it in E.164 when the library finds it a valid number, or a possible one (the right length for
// its country code): the number was given whole, as a carrier asserts it, and a range assigned
// after the library's metadata was built must still reach the caller lookup.
func (p *Plan) international(s string) (string, bool) {
	var pn phonenumbers.PhoneNumber
	if err := phonenumbers.ParseToNumber(s, p.region, &pn); err != nil {
		return "", false
	}
	if phonenumbers.IsValidNumber(&pn) || phonenumbers.IsPossibleNumber(&pn) {
		return phonenumbers.Format(&pn, phonenumbers.E164), true
	}
	return "", false
}

// emergency reports whether digits, as dialled or after one dial prefix, is an emergency number
// of the default country.
func (p *Plan) emergency(digits string) bool {
	if phonenumbers.IsEmergencyNumber(digits, p.region) {
		return true
	}
	for _, pre := range p.prefixes {
		if len(digits) > len(pre) && strings.HasPrefix(digits, pre) && phonenumbers.IsEmergencyNumber(digits[len(pre):], p.region) {
			return true
		}
	}
	return false
}

// splitParty takes s apart into the number or user part, the parameters that follow it (tel:
// URI parameters, or the user parameters of a sip: URI's user part), and the host of a sip: URI.
// A SIP user part is percent-decoded; a password, port, URI
// parameters and headers are dropped.
func splitParty(s string) (user, params, host string) {
	switch {
	case hasPrefixFold(s, "tel:"):
		user, params, _ = strings.Cut(s[len("tel:"):], ";")
		return strings.TrimSpace(user), params, ""
	case hasPrefixFold(s, "sip:"):
		s = s[len("sip:"):]
	case hasPrefixFold(s, "sips:"):
		s = s[len("sips:"):]
	default:
		user, params, _ = strings.Cut(s, ";")
		return strings.TrimSpace(user), params, ""
	}
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[:i]
	}
	userinfo, hostport, found := strings.Cut(s, "@")
	if !found {
		userinfo, hostport = "", s
	}
	host = hostport
	if i := strings.IndexAny(host, ";:"); i >= 0 && !strings.HasPrefix(host, "[") {
		host = host[:i]
	}
	userinfo, _, _ = strings.Cut(userinfo, ":") // a password
	user, params, _ = strings.Cut(userinfo, ";")
	if strings.IndexByte(user, '%') >= 0 {
		user = percentDecode(user)
	}
	return user, params, host
}

// phoneContext returns the phone-context parameter among params when it is a global number
// prefix ('+' and digits, visual separators allowed), else "". Domain contexts are ignored: the
// number is then read in the default country.
func phoneContext(params string) string {
	for params != "" {
		var kv string
		kv, params, _ = strings.Cut(params, ";")
		k, v, _ := strings.Cut(kv, "=")
		if !strings.EqualFold(strings.TrimSpace(k), "phone-context") {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) < 2 || v[0] != '+' || len(v) > maxUser {
			return ""
		}
		digits := 0
		for i := 1; i < len(v); i++ {
			switch c := v[i]; {
			case c >= '0' && c <= '9':
				digits++
			case c == '-' || c == '.' || c == '(' || c == ')':
			default:
				return ""
			}
		}
		if digits == 0 {
			return ""
		}
		return v
	}
	return ""
}

// dialString reduces a dialled text to ASCII digits, with '+' allowed first or after a '#'
// (*31#+44…), and '*' and '#' anywhere: other Unicode decimal digits become ASCII, visual separators (space, dashes, dots,
// parentheses, brackets, '/') are dropped. ok is false when anything else is in s. plain
// reports that s was digits only, with nothing dropped and no '+', '*' or '#'.
func dialString(s string) (d string, plain, ok bool) {
	plain = true
	simple := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			continue
		}
		plain = false
		if c == '+' && (i == 0 || s[i-1] == '#') || c == '*' || c == '#' {
			continue
		}
		simple = false
		break
	}
	if simple {
		return s, plain, true
	}
	plain = true
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case unicode.IsDigit(r):
			ascii := phonenumbers.NormalizeDigitsOnly(string(r))
			if len(ascii) != 1 {
				return "", false, false
			}
			b.WriteString(ascii)
		case r == '+' || r == '\uFF0B':
			if d := b.String(); d != "" && d[len(d)-1] != '#' {
				return "", false, false
			}
			plain = false
			b.WriteByte('+')
		case r == '*' || r == '#':
			plain = false
			b.WriteRune(r)
		case r == '-' || r == '.' || r == '(' || r == ')' || r == '[' || r == ']' || r == '/' ||
			r == '\t' || r == '\uFF08' || r == '\uFF09' || r == '\u2212' ||
			unicode.Is(unicode.Zs, r) || unicode.Is(unicode.Pd, r):
			plain = false
		default:
			return "", false, false
		}
	}
	return b.String(), plain, true
}

// stripFeatureCodes removes up to three star codes from the front of d: a '#'-terminated code of
// one or two '*'/'#' and one to three digits (#31#, *31#, *#31#), or '*' and two digits (the
// North American vertical service codes *67, *82).
func stripFeatureCodes(d string) string {
	for range 3 {
		if d == "" || d[0] != '*' && d[0] != '#' {
			return d
		}
		i := 1
		if i < len(d) && (d[i] == '*' || d[i] == '#') {
			i++
		}
		j := i
		for j < len(d) && j-i < 3 && d[j] >= '0' && d[j] <= '9' {
			j++
		}
		switch {
		case j > i && j < len(d) && d[j] == '#':
			d = d[j+1:]
		case d[0] == '*' && len(d) >= 3 && isDigit(d[1]) && isDigit(d[2]):
			d = d[3:]
		default:
			return d
		}
	}
	return d
}

type marker uint8

const (
	markerNone marker = iota
	markerAnonymous
	markerUnavailable
)

// markerOf says whether s is a withheld-number marker (anonymous, restricted, private,
// "private number", withheld, "number withheld") or an unavailable marker (unavailable,
// unknown, "out of area", "not available"), in any letter case, ignoring spaces, '-', '_' and
// '.'.
func markerOf(s string) marker {
	var buf [24]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '-' || c == '_' || c == '.':
			continue
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z':
		default:
			return markerNone
		}
		if n == len(buf) {
			return markerNone
		}
		buf[n] = c
		n++
	}
	switch string(buf[:n]) {
	case "anonymous", "restricted", "private", "privatenumber", "withheld", "numberwithheld":
		return markerAnonymous
	case "unavailable", "unknown", "outofarea", "notavailable":
		return markerUnavailable
	}
	return markerNone
}

// cleanName trims name, makes it valid UTF-8, cuts it to event.MaxNameLength characters, and
// returns "" when it has no letter.
func cleanName(name string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		return ""
	}
	if !utf8.ValidString(name) {
		name = strings.ToValidUTF8(name, "\uFFFD")
	}
	if strings.IndexFunc(name, unicode.IsLetter) < 0 {
		return ""
	}
	return cutRunes(name, event.MaxNameLength)
}

// keepURI returns s as a party URI: valid UTF-8, at most event.MaxURILength characters.
func keepURI(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return cutRunes(s, event.MaxURILength)
}

func cutRunes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i]
		}
		n++
	}
	return s
}

func percentDecode(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case isDigit(c):
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
