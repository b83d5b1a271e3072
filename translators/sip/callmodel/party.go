package callmodel

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/emiago/sipgo/sip"
)

// party is one end of a call as SIP names it, before numbering: the display name, the user part
// (for a tel: URI, its number), the URI text without header parameters, and whether the user
// part is a telephone number by the URI's own word (a tel: URI, or user=phone).
type party struct {
	display string
	user    string
	uri     string
	phone   bool
}

// nameAddr is one parsed name-addr or addr-spec header value: the party, its URI and the header
// parameters that follow it.
type nameAddr struct {
	party  party
	uri    sip.Uri
	params sip.HeaderParams
}

// parseNameAddr reads one name-addr or addr-spec (RFC 3261 section 20.10) with its header
// parameters.
func parseNameAddr(text string) (nameAddr, error) {
	var na nameAddr
	display, err := sip.ParseAddressValue(strings.TrimSpace(text), &na.uri, &na.params)
	if err != nil {
		return nameAddr{}, err
	}
	na.party = partyOf(display, &na.uri)
	return na, nil
}

// partyOf builds the party of a parsed URI and its display name.
func partyOf(display string, u *sip.Uri) party {
	p := party{display: unquoteDisplay(display)}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case "sip", "sips":
		p.user = unescape(u.User)
		if v, ok := paramFold(u.UriParams, "user"); ok && strings.EqualFold(v, "phone") {
			p.phone = true
		}
		// The URI text without its embedded headers: those are instructions for building a
		// request (Replaces, Reason), not part of whom the URI names.
		c := *u
		c.Headers = nil
		p.uri = uriText(&c)
	case "tel":
		num, _, _ := strings.Cut(u.Raw(), ";")
		p.user = unescape(num)
		p.phone = true
		p.uri = uriText(u)
	default:
		p.uri = uriText(u)
	}
	return p
}

// uriText is u.String() written into one buffer grown for it up front.
func uriText(u *sip.Uri) string {
	var b strings.Builder
	b.Grow(len(u.Scheme) + len(u.User) + len(u.Password) + len(u.Host) + 16 + 24*(len(u.UriParams)+len(u.Headers)))
	u.StringWrite(&b)
	return b.String()
}

// unquoteDisplay removes the quoted-pair escapes sipgo keeps in a quoted display name.
func unquoteDisplay(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unescape undoes the %HH escapes of a URI component, keeping the text as it was when it is not
// validly escaped.
func unescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// paramFold returns the value of the parameter named key, compared without case (RFC 3261
// parameter names are case-insensitive).
func paramFold(ps sip.HeaderParams, key string) (string, bool) {
	for _, kv := range ps {
		if strings.EqualFold(strings.TrimSpace(kv.K), key) {
			return strings.TrimSpace(kv.V), true
		}
	}
	return "", false
}

// headerValues returns every value of the header known by any of names (full and compact
// forms), in message order, with comma-separated lists split into their elements.
func headerValues(msg headerer, names ...string) []string {
	var out []string
	for _, h := range msg.Headers() {
		if !nameIn(h.Name(), names) {
			continue
		}
		out = appendList(out, h.Value())
	}
	return out
}

// nameAddrs reads every value of the header known by any of names as a name-addr, in message
// order, with the errors of the values that do not parse. The From, To and Contact headers
// sipgo parsed already are taken as parsed rather than rendered to text and parsed again.
func nameAddrs(msg headerer, names ...string) ([]nameAddr, []error) {
	var out []nameAddr
	var errs []error
	for _, h := range msg.Headers() {
		if !nameIn(h.Name(), names) {
			continue
		}
		if na, ok := typedNameAddr(h); ok {
			out = append(out, na)
			continue
		}
		for _, v := range splitList(h.Value()) {
			na, err := parseNameAddr(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%q: %w", v, err))
				continue
			}
			out = append(out, na)
		}
	}
	return out, errs
}

// firstNameAddr is the first of nameAddrs: false when there is no such header, the error of
// the first value when it does not parse.
func firstNameAddr(msg headerer, names ...string) (nameAddr, bool, error) {
	for _, h := range msg.Headers() {
		if !nameIn(h.Name(), names) {
			continue
		}
		if na, ok := typedNameAddr(h); ok {
			return na, true, nil
		}
		vs := splitList(h.Value())
		if len(vs) == 0 {
			continue
		}
		na, err := parseNameAddr(vs[0])
		return na, true, err
	}
	return nameAddr{}, false, nil
}

// typedNameAddr returns the name-addr of a From, To or Contact header as sipgo parsed it
// (with sip.ParseAddressValue, as parseNameAddr does).
func typedNameAddr(h sip.Header) (nameAddr, bool) {
	var display string
	var na nameAddr
	switch v := h.(type) {
	case *sip.FromHeader:
		if v == nil {
			return nameAddr{}, false
		}
		display, na.uri, na.params = v.DisplayName, v.Address, v.Params
	case *sip.ToHeader:
		if v == nil {
			return nameAddr{}, false
		}
		display, na.uri, na.params = v.DisplayName, v.Address, v.Params
	case *sip.ContactHeader:
		if v == nil {
			return nameAddr{}, false
		}
		display, na.uri, na.params = v.DisplayName, v.Address, v.Params
	default:
		return nameAddr{}, false
	}
	na.party = partyOf(display, &na.uri)
	return na, true
}

// appendList appends the elements of a header value, split as splitList splits them, to out.
func appendList(out []string, v string) []string {
	if strings.IndexByte(v, ',') < 0 {
		// One element: the common case, without splitList's slice.
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
		return out
	}
	return append(out, splitList(v)...)
}

// headerer is the part of a SIP message the readings walk: its headers in order. Both
// *sip.Request and *sip.Response have it.
type headerer interface {
	Headers() []sip.Header
}

func nameIn(name string, names []string) bool {
	for _, n := range names {
		if len(name) == len(n) && strings.EqualFold(name, n) {
			return true
		}
	}
	if name != "" && (maybeSpace(name[0]) || maybeSpace(name[len(name)-1])) {
		if t := strings.TrimSpace(name); len(t) != len(name) {
			return nameIn(t, names) // a name with stray spaces around it (parsers keep them)
		}
	}
	return false
}

// maybeSpace reports whether b may begin or end white space as strings.TrimSpace sees it: ASCII
// white space, or any byte of a multi-byte character (which TrimSpace then decides on).
func maybeSpace(b byte) bool { return b == ' ' || '\t' <= b && b <= '\r' || b >= 0x80 }

// splitList splits a header value at the commas that separate list elements: those outside a
// quoted string and outside angle brackets. Empty elements are dropped.
func splitList(v string) []string {
	var out []string
	inQuote, inAngle, start := false, false, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case c == '<':
			inAngle = true
		case c == '>':
			inAngle = false
		case c == ',' && !inAngle:
			if s := strings.TrimSpace(v[start:i]); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if start <= len(v) {
		if s := strings.TrimSpace(v[start:]); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// unquote removes the double quotes around a parameter value, if any.
func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return unquoteDisplay(s[1 : len(s)-1])
	}
	return s
}
