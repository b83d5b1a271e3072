package history

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nyaruka/phonenumbers"

	"github.com/callwire/callwire/core/store"
)

// The call list's page sizes.
const (
	defaultListLimit = 50
	maxListLimit     = 500
)

// minTrailingDigits is the fewest digits a number filter matches as the end of a number.
const minTrailingDigits = 4

// listQuery is a parsed GET /api/v1/calls query.
type listQuery struct {
	filter store.CallFilter
	after  *store.CallPosition
	limit  int
	// scope is what a cursor is bound to: the organization and every filter parameter, so that
	// a cursor is refused by another organization or another filter.
	scope [sha256.Size]byte
}

// listParams are the parameters GET /api/v1/calls takes; repeatable ones may appear more than
// once.
var listParams = map[string]bool{
	"from": false, "until": false, "direction": true, "outcome": true, "number": false,
	"extension": false, "location": false, "provider": false, "recorded": false,
	"limit": false, "cursor": false,
}

// parseListQuery reads q for organization orgID, whose dates are read in loc and national
// numbers in country ("" for none). It returns every problem at once, each naming its parameter.
func parseListQuery(q url.Values, orgID string, loc *time.Location, country string) (listQuery, []string) {
	var (
		lq       = listQuery{limit: defaultListLimit}
		problems []string
	)
	bad := func(name, msg string) { problems = append(problems, name+": "+msg) }
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		repeatable, known := listParams[name]
		switch {
		case !known:
			bad(name, "is not a parameter of this endpoint")
		case !repeatable && len(q[name]) > 1:
			bad(name, "is given more than once")
		}
	}
	get := func(name string) (string, bool) {
		v, ok := q[name]
		if !ok || len(v) == 0 {
			return "", false
		}
		return v[0], true
	}
	if v, ok := get("from"); ok {
		t, err := parseBound(v, loc, false)
		if err != nil {
			bad("from", err.Error())
		}
		lq.filter.From = t
	}
	if v, ok := get("until"); ok {
		t, err := parseBound(v, loc, true)
		if err != nil {
			bad("until", err.Error())
		}
		lq.filter.Until = t
	}
	if f, u := lq.filter.From, lq.filter.Until; !f.IsZero() && !u.IsZero() && u.Before(f) {
		bad("until", "is before from")
	}
	for _, d := range q["direction"] {
		if d != "inbound" && d != "outbound" && d != "internal" {
			bad("direction", strconv.Quote(d)+" is not inbound, outbound or internal")
			continue
		}
		if !slices.Contains(lq.filter.Directions, d) {
			lq.filter.Directions = append(lq.filter.Directions, d)
		}
	}
	for _, o := range q["outcome"] {
		if !slices.Contains(store.Outcomes(), o) {
			bad("outcome", strconv.Quote(o)+" is not one of "+strings.Join(store.Outcomes(), ", "))
			continue
		}
		if !slices.Contains(lq.filter.Outcomes, o) {
			lq.filter.Outcomes = append(lq.filter.Outcomes, o)
		}
	}
	if v, ok := get("number"); ok {
		m, msg := parseNumber(v, country)
		if msg != "" {
			bad("number", msg)
		}
		lq.filter.Number = m
	}
	for _, name := range []string{"extension", "location", "provider"} {
		v, ok := get(name)
		if !ok {
			continue
		}
		switch {
		case v == "":
			bad(name, "is empty")
		case len(v) > 256:
			bad(name, "is longer than 256 characters")
		}
		switch name {
		case "extension":
			lq.filter.Extension = v
		case "location":
			lq.filter.Location = v
		case "provider":
			lq.filter.Provider = v
		}
	}
	if v, ok := get("recorded"); ok {
		if v != "true" {
			bad("recorded", "must be true, or left out")
		}
		lq.filter.Recorded = v == "true"
	}
	if v, ok := get("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			bad("limit", "must be a whole number from 1 to "+strconv.Itoa(maxListLimit))
		} else {
			lq.limit = n
		}
	}
	lq.scope = cursorScope(orgID, q)
	if v, ok := get("cursor"); ok {
		p, err := decodeCursor(v, lq.scope)
		if err != nil {
			bad("cursor", err.Error())
		}
		lq.after = p
	}
	return lq, problems
}

// parseBound reads a from or until: an RFC 3339 time, or a date (2026-12-01) meaning that day in
// loc: from its first instant, or for until to the first instant of the next day.
func parseBound(v string, loc *time.Location, until bool) (time.Time, error) {
	if len(v) == len(time.DateOnly) {
		d, err := time.ParseInLocation(time.DateOnly, v, loc)
		if err != nil {
			return time.Time{}, errors.New("is not a date (2026-12-01) or an RFC 3339 time (2026-12-01T09:30:00Z)")
		}
		if until {
			d = time.Date(d.Year(), d.Month(), d.Day()+1, 0, 0, 0, 0, loc)
		}
		return d.UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, errors.New("is not a date (2026-12-01) or an RFC 3339 time (2026-12-01T09:30:00Z)")
	}
	return t.UTC(), nil
}

// parseNumber reads a number filter: an E.164 number, a number in national form read as a
// number of country, or at least minTrailingDigits digits that end a number. Spaces, dots,
// dashes and brackets are ignored.
func parseNumber(v, country string) (*store.NumberMatch, string) {
	const msg = "must be an E.164 number (+442071234567), a number in the organization's national form, or at least 4 trailing digits"
	if len(v) > 64 {
		return nil, msg
	}
	// A '+' left unescaped in a query string reads as a space: a number that starts with one
	// was written in E.164.
	if strings.HasPrefix(v, " ") {
		v = "+" + strings.TrimLeft(v, " ")
	}
	digits := 0
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == ' ' || r == '.' || r == '-' || r == '(' || r == ')' || r == '+' && digits == 0:
		default:
			return nil, msg
		}
	}
	if digits == 0 {
		return nil, msg
	}
	plus := strings.HasPrefix(strings.TrimSpace(v), "+")
	region := "ZZ"
	if !plus {
		region = country
	}
	if plus || country != "" {
		var pn phonenumbers.PhoneNumber
		if err := phonenumbers.ParseToNumber(v, region, &pn); err == nil &&
			(plus && phonenumbers.IsPossibleNumber(&pn) || !plus && phonenumbers.IsValidNumber(&pn)) {
			return &store.NumberMatch{Key: store.NumberKey(phonenumbers.Format(&pn, phonenumbers.E164))}, ""
		}
	}
	if plus {
		return nil, "is not a possible E.164 number"
	}
	if digits < minTrailingDigits {
		return nil, msg
	}
	return &store.NumberMatch{Key: store.NumberKey(v), Trailing: true}, ""
}

// cursorScope binds a cursor to the organization and to every filter parameter of q (all but
// limit and cursor), in a canonical order.
func cursorScope(orgID string, q url.Values) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte("callwire calls cursor v1\x00"))
	h.Write([]byte(orgID))
	names := make([]string, 0, len(q))
	for name := range q {
		if name != "limit" && name != "cursor" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		vs := slices.Clone(q[name])
		sort.Strings(vs)
		for _, v := range vs {
			h.Write([]byte{0})
			h.Write([]byte(name))
			h.Write([]byte{1})
			h.Write([]byte(v))
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// A cursor is base64url (unpadded) of: version 1 (one byte), the last call's start in Unix
// nanoseconds and its number (eight bytes each, big-endian), the first eight bytes of its scope,
// then the first eight bytes of the SHA-256 of all that. The check catches a cursor changed or
// cut short; the scope, one used with another filter or by another organization. A cursor
// grants nothing: every query is confined to the key's own organization whatever the cursor says.
const (
	cursorVersion = 1
	cursorLen     = 1 + 8 + 8 + 8 + 8
)

// encodeCursor returns the cursor continuing after p under scope.
func encodeCursor(p store.CallPosition, scope [sha256.Size]byte) string {
	b := make([]byte, 0, cursorLen)
	b = append(b, cursorVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(p.StartedAt.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(p.No))
	b = append(b, scope[:8]...)
	sum := sha256.Sum256(b)
	b = append(b, sum[:8]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor made by encodeCursor under scope.
func decodeCursor(v string, scope [sha256.Size]byte) (*store.CallPosition, error) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) != cursorLen || b[0] != cursorVersion {
		return nil, errors.New("is not a cursor this endpoint gave; start again without it")
	}
	sum := sha256.Sum256(b[:cursorLen-8])
	if string(sum[:8]) != string(b[cursorLen-8:]) {
		return nil, errors.New("has been changed; start again without it")
	}
	if string(b[17:25]) != string(scope[:8]) {
		return nil, errors.New("belongs to another query or organization: pass the same filters as the page that gave it, or start again without it")
	}
	no := int64(binary.BigEndian.Uint64(b[9:17]))
	if no < 0 {
		return nil, errors.New("has been changed; start again without it")
	}
	return &store.CallPosition{StartedAt: time.Unix(0, int64(binary.BigEndian.Uint64(b[1:9]))).UTC(), No: no}, nil
}
