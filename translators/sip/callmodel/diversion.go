package callmodel

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/callwire/callwire/sdk/event"
)

// diversion is one hop of the forwarded-from chain, shaped like event.Diversion: the party the
// call was forwarded from (zero and anonymous when that party asked for privacy), why (lower
// case, RFC 5806 words where the wire gives a SIP cause), and the diversion counter when the
// wire carried one.
type diversion struct {
	party     party
	anonymous bool
	reason    string
	counter   *int
}

// Limits: event.Diversion's on reason, in characters; event's on hops per call (the outermost
// are kept: the number the caller dialled is the one a clinic files the call under); and on the
// header values read, which bounds the work a hostile message can cause.
const (
	maxReasonLen = 64
	maxHops      = event.MaxDiversions
	maxValues    = 100
)

// diversions reads the forwarded-from chain of an initial request, outermost first (the number
// the caller dialled first, the most recent forwarding last). The Diversion header (RFC 5806)
// is read when present; History-Info (RFC 7044) otherwise, since a request carrying both
// describes one chain twice (RFC 7544). Values that do not parse are skipped and reported in the
// error, next to the hops that did.
func diversions(req headerer) ([]diversion, error) {
	if vs := headerValues(req, "Diversion"); len(vs) > 0 {
		return parseDiversion(vs)
	}
	return parseHistoryInfo(headerValues(req, "History-Info"))
}

// parseDiversion reads Diversion header values. Each value names the party that forwarded the
// call; RFC 5806 section 4 adds each new diversion on top, so the values arrive newest first and
// are returned reversed, outermost first.
func parseDiversion(values []string) ([]diversion, error) {
	var out []diversion
	var errs []error
	values = values[max(0, len(values)-maxValues):] // the outermost are last
	for i := len(values) - 1; i >= 0 && len(out) < maxHops; i-- {
		na, err := parseNameAddr(values[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("diversion %q: %w", values[i], err))
			continue
		}
		d := diversion{party: na.party}
		if r, ok := paramFold(na.params, "reason"); ok {
			d.reason = cleanReason(unquote(r))
		}
		if c, ok := paramFold(na.params, "counter"); ok {
			if n, err := strconv.Atoi(c); err == nil && n >= 0 && n <= 100 {
				d.counter = &n
			}
		}
		switch p, _ := paramFold(na.params, "privacy"); strings.ToLower(unquote(p)) {
		case "full", "uri":
			d = diversion{anonymous: true, reason: d.reason, counter: d.counter}
		case "name":
			d.party.display = ""
		}
		if isAnonymousParty(d.party) {
			d = diversion{anonymous: true, reason: d.reason, counter: d.counter}
		}
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

// historyEntry is one parsed History-Info value.
type historyEntry struct {
	na    nameAddr
	index []int
	raw   string // the index as written
}

// parseHistoryInfo reads History-Info values (RFC 7044; RFC 4244 senders too). The entries are
// put in index order; each entry that retargeted the request to a new user is a diversion from
// the entry it came from:
//   - an entry with mp=<index> (the target user changed) is a diversion from the entry <index>;
//   - an entry with rc=<index> (the same user reached at another URI) is not a diversion;
//   - an entry with neither (RFC 4244) is a diversion from its parent index (the previous entry
//     when the parent is missing) when its user part differs from that entry's.
//
// The reason is the RFC 4458 cause URI parameter of the new target, else the Reason header
// embedded in the diverting entry's URI, mapped to RFC 5806 words (RFC 7544). An entry
// whose URI carries ?Privacy=history is an anonymous hop. History-Info has no counter.
func parseHistoryInfo(values []string) ([]diversion, error) {
	var entries []historyEntry
	var errs []error
	for _, v := range values[:min(len(values), maxValues)] {
		na, err := parseNameAddr(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("history-info %q: %w", v, err))
			continue
		}
		raw, _ := paramFold(na.params, "index")
		idx, ok := parseIndex(raw)
		if !ok {
			errs = append(errs, fmt.Errorf("history-info %q: no valid index", v))
			continue
		}
		entries = append(entries, historyEntry{na: na, index: idx, raw: strings.Join(strings.Fields(raw), "")})
	}
	slices.SortStableFunc(entries, func(a, b historyEntry) int { return slices.Compare(a.index, b.index) })

	find := func(idx []int) int {
		return slices.IndexFunc(entries, func(e historyEntry) bool { return slices.Equal(e.index, idx) })
	}
	var out []diversion
	for i := 1; i < len(entries) && len(out) < maxHops; i++ {
		e := entries[i]
		from := -1
		if mp, ok := paramFold(e.na.params, "mp"); ok {
			if idx, ok := parseIndex(mp); ok {
				from = find(idx)
			}
		} else if _, ok := paramFold(e.na.params, "rc"); ok {
			continue
		} else {
			from = find(e.index[:len(e.index)-1])
			if from < 0 {
				from = i - 1
			}
			if sameTarget(entries[from].na.party, e.na.party) {
				continue
			}
		}
		if from < 0 || from >= i {
			continue
		}
		out = append(out, historyHop(entries, from, i))
	}
	return out, errors.Join(errs...)
}

// historyHop is the diversion from entries[from] to entries[to].
func historyHop(entries []historyEntry, from, to int) diversion {
	f, t := entries[from], entries[to]
	d := diversion{party: f.na.party}
	if c, ok := paramFold(t.na.uri.UriParams, "cause"); ok {
		if n, err := strconv.Atoi(c); err == nil {
			d.reason = causeReason(n)
		}
	}
	if d.reason == "" {
		// The Reason is in the diverting entry, or, when that user was tried at its contacts
		// first (rc entries), in the contact that gave the response.
		d.reason = historyReason(f)
		for i := from + 1; i < to && d.reason == ""; i++ {
			if rc, ok := paramFold(entries[i].na.params, "rc"); ok && strings.TrimSpace(unquote(rc)) == f.raw {
				d.reason = historyReason(entries[i])
			}
		}
	}
	if p, ok := paramFold(f.na.uri.Headers, "Privacy"); ok && strings.Contains(strings.ToLower(unescape(p)), "history") || isAnonymousParty(d.party) {
		d = diversion{anonymous: true, reason: d.reason}
	}
	return d
}

// historyReason maps the SIP Reason header embedded in an entry's URI to a reason word; "" when
// there is none.
func historyReason(e historyEntry) string {
	r, ok := paramFold(e.na.uri.Headers, "Reason")
	if !ok {
		return ""
	}
	rs, _ := parseReasons(unescape(r))
	if x, ok := sipCause(rs); ok {
		return causeReason(x.cause)
	}
	return ""
}

// causeReason maps a SIP response code that caused a retarget to the RFC 5806 reason word,
// after RFC 4458 and RFC 7544. Any other code is "unknown".
func causeReason(code int) string {
	switch code {
	case 302:
		return "unconditional"
	case 486:
		return "user-busy"
	case 408:
		return "no-answer"
	case 480, 487:
		return "deflection"
	case 503:
		return "unavailable"
	}
	return "unknown"
}

// sameTarget reports whether two parties name the same user: the same user part, or, without
// user parts, the same URI.
func sameTarget(a, b party) bool {
	if a.user != "" || b.user != "" {
		return a.user == b.user
	}
	return strings.EqualFold(a.uri, b.uri)
}

// parseIndex reads a History-Info index ("1.1.2"): dot-separated whole numbers.
func parseIndex(s string) ([]int, bool) {
	s = strings.Join(strings.Fields(unquote(s)), "")
	if s == "" || len(s) > 64 {
		return nil, false
	}
	var out []int
	for _, part := range strings.Split(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// cleanReason lower-cases a reason word and bounds it to event.Diversion's limit.
func cleanReason(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if r := []rune(s); len(r) > maxReasonLen {
		s = string(r[:maxReasonLen])
	}
	return s
}
