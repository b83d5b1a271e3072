package callmodel

import (
	"errors"
	"fmt"
	"strings"
)

// replaces is the dialog a Replaces header names (RFC 3891): the call to be replaced.
type replaces struct {
	callID    string
	toTag     string
	fromTag   string
	earlyOnly bool
}

// referTarget is what a REFER asks for: the party the call is transferred to, and, for an
// attended transfer, the dialog the new call replaces.
type referTarget struct {
	party    party
	attended bool
	replaces replaces
}

// referTargetOf reads the Refer-To header (RFC 3515, compact form "r") of a REFER.
func referTargetOf(req headerer) (referTarget, error) {
	vs := headerValues(req, "Refer-To", "r")
	switch len(vs) {
	case 0:
		return referTarget{}, errors.New("no Refer-To header")
	case 1:
		return parseReferTo(vs[0])
	}
	// RFC 3515 section 2.1: exactly one Refer-To. Read the first, say so.
	t, err := parseReferTo(vs[0])
	if err != nil {
		return referTarget{}, err
	}
	return t, fmt.Errorf("%d Refer-To values, read the first", len(vs))
}

// parseReferTo reads one Refer-To value, a name-addr or addr-spec. The transfer is attended when
// the URI carries an embedded Replaces header (RFC 3891 section 6.1,
// `<sip:bob@host?Replaces=callid%3Bto-tag%3D1%3Bfrom-tag%3D2>`); its value is URL-unescaped and
// read into the dialog it names. A Replaces that names no Call-ID still marks the transfer
// attended.
func parseReferTo(value string) (referTarget, error) {
	na, err := parseNameAddr(value)
	if err != nil {
		return referTarget{}, fmt.Errorf("refer-to %q: %w", value, err)
	}
	t := referTarget{party: na.party}
	if r, ok := paramFold(na.uri.Headers, "Replaces"); ok {
		t.attended = true
		t.replaces = parseReplaces(unescape(r))
	}
	return t, nil
}

// parseReplaces reads a Replaces value: `callid;to-tag=x;from-tag=y[;early-only]`.
func parseReplaces(v string) replaces {
	parts := splitParams(v)
	r := replaces{callID: strings.TrimSpace(parts[0])}
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(p, "=")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "to-tag":
			r.toTag = strings.TrimSpace(val)
		case "from-tag":
			r.fromTag = strings.TrimSpace(val)
		case "early-only":
			r.earlyOnly = true
		}
	}
	return r
}
