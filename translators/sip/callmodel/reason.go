package callmodel

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// reason is one value of a Reason header (RFC 3326): the protocol ("SIP", "Q.850", upper case
// as registered), the cause (0 when absent or not a number) and the text (unquoted).
type reason struct {
	protocol string
	cause    int
	text     string
}

// maxReasonText bounds the text kept from a Reason header; longer text is cut.
const maxReasonText = 256

// parseReasons reads a Reason header value, a comma-separated list such as
// `SIP;cause=200;text="Call completed elsewhere", Q.850;cause=16`. Values without a protocol are
// skipped and reported in the error, next to the values that were read.
func parseReasons(value string) ([]reason, error) {
	var out []reason
	var errs []error
	for _, v := range splitList(value) {
		r, err := parseReason(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func parseReason(v string) (reason, error) {
	parts := splitParams(v)
	proto := strings.TrimSpace(parts[0])
	if proto == "" || strings.ContainsAny(proto, " \t=\"") {
		return reason{}, fmt.Errorf("reason %q: no protocol", v)
	}
	r := reason{protocol: strings.ToUpper(proto)}
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(p, "=")
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "cause":
			if n, err := strconv.Atoi(strings.TrimSpace(unquote(val))); err == nil && n >= 0 && n < 10000 {
				r.cause = n
			}
		case "text":
			t := unquote(val)
			if rs := []rune(t); len(rs) > maxReasonText {
				t = string(rs[:maxReasonText])
			}
			r.text = t
		}
	}
	return r, nil
}

// splitParams splits at the semicolons outside quoted strings.
func splitParams(v string) []string {
	var out []string
	inQuote, start := false, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			if inQuote {
				i++
			}
		case '"':
			inQuote = !inQuote
		case ';':
			if !inQuote {
				out = append(out, v[start:i])
				start = i + 1
			}
		}
	}
	return append(out, v[min(start, len(v)):])
}

// messageReasons reads every Reason header of a message, in order.
func messageReasons(msg headerer) []reason {
	var out []reason
	for _, v := range headerValues(msg, "Reason") {
		if r, err := parseReason(v); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// sipCause returns the first SIP-protocol reason with a response code as its cause (100 to 699,
// what event's sipCode accepts), for a BYE's sipCode and sipReason.
func sipCause(rs []reason) (reason, bool) {
	for _, r := range rs {
		if r.protocol == "SIP" && r.cause >= 100 && r.cause <= 699 {
			return r, true
		}
	}
	return reason{}, false
}

// q850Cause returns the first Q.850 reason with a cause (1 to 127), for a BYE's sipReason when no
// SIP reason gives a code.
func q850Cause(rs []reason) (reason, bool) {
	for _, r := range rs {
		if r.protocol == "Q.850" && r.cause >= 1 && r.cause <= 127 {
			return r, true
		}
	}
	return reason{}, false
}

// answeredElsewhere reports whether the reasons of a CANCEL (or BYE) say another branch took
// the call: SIP cause 200 (RFC 3326 section 2, "Call completed elsewhere", as Asterisk,
// FreeSWITCH and RFC 3261 forking proxies send it), the text "Call completed elsewhere" with any
// protocol, or Q.850 cause 26 ("non-selected user clearing").
func answeredElsewhere(rs []reason) bool {
	for _, r := range rs {
		switch {
		case r.protocol == "SIP" && r.cause == 200,
			r.protocol == "Q.850" && r.cause == 26,
			strings.EqualFold(strings.TrimSpace(r.text), "call completed elsewhere"):
			return true
		}
	}
	return false
}
