package callmodel

import (
	"errors"
	"fmt"
	"strings"
)

// identitySource names the header an identity was read from.
type identitySource string

// The headers an identity can come from.
const (
	sourcePAI     identitySource = "P-Asserted-Identity"
	sourceRPID    identitySource = "Remote-Party-ID"
	sourceFrom    identitySource = "From"
	sourceContact identitySource = "Contact"
)

// identity is a party read from a message's identity headers: the party, the header it came
// from, and whether the party withheld it. An anonymous identity carries no party at all, so
// that nothing the caller withheld can reach an event by mistake.
type identity struct {
	party
	source    identitySource
	anonymous bool
}

// callerIdentity reads who is calling from an initial request: P-Asserted-Identity (RFC 3325)
// over Remote-Party-ID (draft-ietf-sip-privacy-04, party=calling) over From. The caller is
// anonymous when a Privacy header (RFC 3323, RFC 3325) asks for id, user or header privacy,
// when a calling Remote-Party-ID asks for privacy=full or privacy=uri, or when the From or the
// chosen identity is one of the anonymous forms (anonymous@anonymous.invalid and kin). It
// fails only when no identity header at all can be read.
func callerIdentity(req headerer) (identity, error) {
	var problems []error
	anonymous := privacyHidesIdentity(headerValues(req, "Privacy"))

	var from *nameAddr
	if na, ok, err := firstNameAddr(req, "From", "f"); ok {
		if err != nil {
			problems = append(problems, fmt.Errorf("from: %w", err))
		} else {
			from = &na
			if isAnonymous(na) {
				anonymous = true
			}
		}
	}

	asserted, errs := nameAddrs(req, "P-Asserted-Identity")
	problems = append(problems, errs...)

	var rpid *nameAddr
	hideName := false
	rpids, errs := nameAddrs(req, "Remote-Party-ID")
	problems = append(problems, errs...)
	for i := range rpids {
		if !rpidIsParty(rpids[i], "calling") {
			continue
		}
		switch p, _ := paramFold(rpids[i].params, "privacy"); strings.ToLower(p) {
		case "full", "uri":
			anonymous = true
		case "name":
			if rpid == nil {
				hideName = true
			}
		}
		if rpid == nil {
			rpid = &rpids[i]
		}
	}

	var id identity
	switch {
	case len(asserted) > 0:
		id = identity{party: pickAsserted(asserted), source: sourcePAI}
		id.anonymous = isAnonymousParty(id.party)
	case rpid != nil:
		id = identity{party: rpid.party, source: sourceRPID, anonymous: isAnonymous(*rpid)}
		if hideName {
			id.display = ""
		}
	case from != nil:
		id = identity{party: from.party, source: sourceFrom}
	default:
		if len(problems) == 0 {
			return identity{}, errors.New("no From, P-Asserted-Identity or Remote-Party-ID header")
		}
		return identity{}, fmt.Errorf("no readable identity header: %w", errors.Join(problems...))
	}
	if anonymous || id.anonymous {
		return identity{source: id.source, anonymous: true}, nil
	}
	return id, nil
}

// answeringParty reads who answered from a 2xx response to an INVITE: P-Asserted-Identity, then
// a Remote-Party-ID with party=called, then the Contact. Anonymous forms and URIs without a user
// part are skipped. It reports false when none names a party.
func answeringParty(resp headerer) (identity, bool) {
	asserted, _ := nameAddrs(resp, "P-Asserted-Identity")
	if len(asserted) > 0 {
		if p := pickAsserted(asserted); p.user != "" && !isAnonymousParty(p) {
			return identity{party: p, source: sourcePAI}, true
		}
	}
	rpids, _ := nameAddrs(resp, "Remote-Party-ID")
	for _, r := range rpids {
		if rpidIsParty(r, "called") && r.party.user != "" && !isAnonymous(r) {
			return identity{party: r.party, source: sourceRPID}, true
		}
	}
	contacts, _ := nameAddrs(resp, "Contact", "m")
	for _, c := range contacts {
		if c.party.user != "" && !isAnonymous(c) {
			return identity{party: c.party, source: sourceContact}, true
		}
	}
	return identity{}, false
}

// pickAsserted chooses among the values of P-Asserted-Identity, of which RFC 3325 allows one sip
// or sips URI and one tel URI naming the same party: a tel URI first (it is a number by
// definition), then a sip URI with user=phone, then the first sip or sips URI, then the first
// value. The display name is the chosen value's, or else the first one another value gives.
func pickAsserted(vs []nameAddr) party {
	best, rank := 0, 5
	for i, v := range vs {
		r := 4
		switch s := strings.ToLower(v.uri.Scheme); {
		case s == "tel":
			r = 1
		case (s == "sip" || s == "sips") && v.party.phone:
			r = 2
		case s == "sip" || s == "sips":
			r = 3
		}
		if r < rank {
			best, rank = i, r
		}
	}
	p := vs[best].party
	if p.display == "" {
		for _, v := range vs {
			if v.party.display != "" {
				p.display = v.party.display
				break
			}
		}
	}
	return p
}

// rpidIsParty reports whether a Remote-Party-ID value speaks of the given party; a value
// without a party parameter speaks of the calling party.
func rpidIsParty(na nameAddr, which string) bool {
	p, ok := paramFold(na.params, "party")
	if !ok || p == "" {
		return which == "calling"
	}
	return strings.EqualFold(p, which)
}

// privacyHidesIdentity reports whether the Privacy header values ask to hide who is calling.
// RFC 3323 priv-values are separated by semicolons (commas are accepted too): "id" (RFC 3325:
// withhold the asserted identity), "user" (withhold what the user put in From) and "header"
// (withhold identifying headers) hide it; "session", "critical" and "none" do not.
func privacyHidesIdentity(values []string) bool {
	for _, v := range values {
		for _, tok := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ',' }) {
			switch strings.ToLower(strings.TrimSpace(tok)) {
			case "id", "user", "header":
				return true
			}
		}
	}
	return false
}

// isAnonymous reports whether a parsed value is one of the anonymous forms.
func isAnonymous(na nameAddr) bool { return isAnonymousParty(na.party) }

// isAnonymousParty reports whether a party's user part or display name is one of the words
// phone systems put there for a withheld identity (RFC 3323 section 4.1.1.3 recommends
// "Anonymous" <sip:anonymous@anonymous.invalid>; carriers and PBXs also send "restricted",
// "private" and "withheld"), or its URI is in the anonymous.invalid domain.
func isAnonymousParty(p party) bool {
	if anonymousWord(p.user) || anonymousWord(p.display) {
		return true
	}
	_, host, ok := strings.Cut(p.uri, "@")
	if !ok {
		return false
	}
	host, _, _ = strings.Cut(host, ";")
	host, _, _ = strings.Cut(host, ":")
	return strings.EqualFold(host, "anonymous.invalid")
}

func anonymousWord(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "anonymous", "restricted", "private", "withheld":
		return true
	}
	return false
}
