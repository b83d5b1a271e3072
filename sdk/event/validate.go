package event

import (
	"encoding/json"
	"errors"
	"math"
	"mime"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Field limits. Values past them are refused with a problem naming the field.
const (
	MaxIDLength        = 512  // providerCallId, providerEventId (bytes)
	MaxNameLength      = 256  // party name, trunk, sipReason (characters)
	MaxExtensionLength = 64   // party extension, answeredBy (characters)
	MaxURILength       = 4096 // party uri, recording url
	MaxLocations       = 32
	MaxDiversions      = 20
)

// Problem is one thing wrong with an event: the JSON path of the field and what is wrong with it.
type Problem struct {
	// Field is the path of the field, for example "events[2].call.from.number", or "body" for
	// the body as a whole.
	Field string `json:"field"`
	// Message says what is wrong, in a sentence fragment such as "must be E.164".
	Message string `json:"problem"`
}

// ValidationError lists every problem found. ParseBody lists the problems with the body as a whole
// first, then each event's in body order; within an event, problems with the JSON (types, unknown
// or duplicate fields) come before problems with the values.
type ValidationError struct {
	Problems []Problem
}

// Error joins the problems as "field: message; field: message".
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Field)
		b.WriteString(": ")
		b.WriteString(p.Message)
	}
	return b.String()
}

// AsValidationError returns the *ValidationError in err's chain, if any.
func AsValidationError(err error) (*ValidationError, bool) {
	var v *ValidationError
	ok := errors.As(err, &v)
	return v, ok
}

// problems collects problems under a path prefix.
type problems struct {
	list []Problem
	// skip holds paths that already have a type problem from decoding, so that validation does
	// not report them a second time as missing.
	skip map[string]bool
}

func (ps *problems) add(field, msg string) {
	if ps.skip[field] {
		return
	}
	ps.list = append(ps.list, Problem{Field: field, Message: msg})
}

// mark records that field has been reported, so that no further problem is listed for it.
func (ps *problems) mark(field string) {
	if ps.skip == nil {
		ps.skip = map[string]bool{}
	}
	ps.skip[field] = true
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	if p := callPath(prefix, name); p != "" {
		return p
	}
	return prefix + "." + name
}

// Validate reports every problem with the event that the ingest endpoint would refuse, as a
// *ValidationError, or nil when the event is acceptable.
func (e *Event) Validate() error {
	var ps problems
	e.validate(&ps, "", false)
	if len(ps.list) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps.list}
}

// The range of occurredAt: 1970-01-01T00:00:00Z up to, not including, the year 10000.
const (
	minUnix = 0
	endUnix = 253402300800
)

// The checks of the members whose check is more than the schema describes, which the generated
// validate methods call in wire order, each with the path of the member's object.

// checkOccurredAt checks that occurredAt is given and from 1970 up to, not including, the year
// 10000.
func (e *Event) checkOccurredAt(ps *problems, p string) {
	switch {
	case e.OccurredAt.IsZero():
		ps.add(join(p, "occurredAt"), "is required: an ISO 8601 timestamp in UTC")
	case e.OccurredAt.Unix() < minUnix || e.OccurredAt.Unix() >= endUnix:
		ps.add(join(p, "occurredAt"), "must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z")
	}
}

// checkProvider checks the provider's name, when given.
func (e *Event) checkProvider(ps *problems, p string) {
	if e.Provider != "" && !validToken(e.Provider, true) {
		ps.add(join(p, "provider"), "must be 1 to 64 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit")
	}
}

// checkProviderEventID checks the event's id, when given: an id that does not have the form of
// the dedupe key of an event without one.
func (e *Event) checkProviderEventID(ps *problems, p string) {
	if e.ProviderEventID != "" {
		checkID(ps, join(p, "providerEventId"), e.ProviderEventID, false)
		if looksLikeSequenceKey(e.ProviderEventID) {
			ps.add(join(p, "providerEventId"), "must not have the form <event type>:<number>, which is the dedupe key of an event without an id: it would be taken for that event")
		}
	}
}

// checkLocations checks the locations, when given: 1 to MaxLocations valid names.
func (e *Event) checkLocations(ps *problems, p string) {
	if e.Locations != nil {
		lp := join(p, "locations")
		switch {
		case len(e.Locations) == 0:
			ps.add(lp, "must name at least one location, or be left out for [\"main\"]")
		case len(e.Locations) > MaxLocations:
			ps.add(lp, "must name at most "+strconv.Itoa(MaxLocations)+" locations")
		}
		for i, l := range e.Locations {
			if !ValidLocation(l) {
				ps.add(lp+"["+strconv.Itoa(i)+"]", "must be 1 to 64 characters of a-z, 0-9, '_' or '-', starting with a letter or digit")
			}
		}
	}
}

// checkRaw checks that the raw, when given, is a JSON object or null, unless rawChecked says it
// is known to be an object.
func (e *Event) checkRaw(ps *problems, p string, rawChecked bool) {
	if len(e.Raw) > 0 && !rawChecked {
		r := strings.Trim(string(e.Raw), " \t\r\n")
		if !json.Valid(e.Raw) || (!strings.HasPrefix(r, "{") && r != "null") {
			ps.add(join(p, "raw"), "must be a JSON object or null")
		}
	}
}

// checkURL checks the recording's URL, when given: absolute, http or https, at most
// MaxURILength characters.
func (e *Event) checkURL(ps *problems, p string) {
	if e.URL != "" {
		if u, err := url.Parse(e.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(e.URL) > MaxURILength {
			ps.add(join(p, "url"), "must be an absolute http or https URL of at most 4096 characters")
		}
	}
}

// checkMIMEType checks the recording's media type, when given.
func (e *Event) checkMIMEType(ps *problems, p string) {
	if e.MIMEType != "" {
		if mt, _, err := mime.ParseMediaType(e.MIMEType); err != nil || !strings.Contains(mt, "/") || len(e.MIMEType) > 255 {
			ps.add(join(p, "mimeType"), "must be a media type such as audio/wav")
		}
	}
}

// checkLanguage checks the transcript's language tag, when given.
func (e *Event) checkLanguage(ps *problems, p string) {
	if e.Language != "" && !validLanguage(e.Language) {
		ps.add(join(p, "language"), "must be a BCP 47 language tag such as en or en-GB")
	}
}

// checkNumber checks a party's number, when given: the E.164 form, and none for a party of kind
// anonymous or unknown.
func (pt *Party) checkNumber(ps *problems, p string) {
	if pt.Number != "" && !ValidE164(pt.Number) {
		ps.add(join(p, "number"), "must be an E.164 number: '+', country code and subscriber number, at most 15 digits, for example +442071234567")
	}
	switch kind := pt.EffectiveKind(); kind {
	case KindAnonymous, KindUnknown:
		if pt.Number != "" {
			ps.add(join(p, "number"), "must be null for kind "+string(kind))
		}
	}
}

// ValidLocation reports whether s may name a location (a workstation group): 1 to 64 characters
// of a-z, 0-9, '_' or '-', starting with a letter or digit.
func ValidLocation(s string) bool { return validToken(s, false) }

// ValidE164 reports whether s is an E.164 number in its written form: '+', a country code that
// does not start with 0, and at most 15 digits in all. It checks the form, not whether the number
// is assigned.
func ValidE164(s string) bool {
	if len(s) < 3 || len(s) > 16 || s[0] != '+' || s[1] < '1' || s[1] > '9' {
		return false
	}
	for i := 2; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func checkID(ps *problems, field, v string, required bool) {
	switch {
	case v == "":
		if required {
			ps.add(field, "is required")
		} else {
			ps.add(field, "must not be empty")
		}
	case len(v) > MaxIDLength:
		ps.add(field, "must be at most "+strconv.Itoa(MaxIDLength)+" bytes")
	case hasControl(v):
		ps.add(field, "must not contain control characters")
	}
}

func checkText(ps *problems, field, v string, max int) {
	if utf8.RuneCountInString(v) > max {
		ps.add(field, "must be at most "+strconv.Itoa(max)+" characters")
	}
}

func checkSeconds(ps *problems, field string, v *float64) {
	if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0) {
		ps.add(field, "must be a number of seconds, zero or more")
	}
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// validToken reports whether s is 1 to 64 characters of a-z, 0-9, '_', '-' (and '.' when dot),
// starting with a letter or digit.
func validToken(s string, dot bool) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		case c == '.' && dot && i > 0:
		default:
			return false
		}
	}
	return true
}

func validLanguage(s string) bool {
	if len(s) > 35 {
		return false
	}
	for i, part := range strings.Split(s, "-") {
		if len(part) == 0 || len(part) > 8 || (i == 0 && (len(part) < 2 || len(part) > 8)) {
			return false
		}
		for j := 0; j < len(part); j++ {
			c := part[j]
			alpha := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
			if !alpha && !(i > 0 && c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}

// looksLikeSequenceKey reports whether id has the form "<event type>:<digits>", the dedupe key
// the vocabulary gives an event without a providerEventId.
func looksLikeSequenceKey(id string) bool {
	t, n, ok := strings.Cut(id, ":")
	if !ok || n == "" || !Type(t).Valid() {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}
