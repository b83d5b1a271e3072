package numbering

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/nyaruka/phonenumbers"

	"github.com/callwire/callwire/sdk/event"
)

// Limits on the configuration.
const (
	// DefaultExtensionMaxDigits is the longest internal extension when ExtensionMaxDigits is 0.
	DefaultExtensionMaxDigits = 6
	// MinExtensionDigits is the shortest internal extension; a single digit is never one.
	MinExtensionDigits = 2
	// MaxExtensionMaxDigits is the most ExtensionMaxDigits may be set to.
	MaxExtensionMaxDigits = 8
	// MaxDialPrefixLength is the longest dial prefix, in digits.
	MaxDialPrefixLength = 4
)

// Config is the numbering part of a translator's configuration. Translators receive their
// configuration block as JSON; embed Config in the translator's own config struct so its keys sit
// beside the translator's (encoding/json promotes the fields of an embedded struct; with koanf
// use the ",squash" tag option). Validate reports what is wrong with it.
type Config struct {
	// Numbers are the clinic's own numbers, each written in E.164 ("+15551230100"). Optional.
	// A number listed here is accepted as a number even when the phone-number metadata does not
	// know its range (newly assigned ranges, fictional 555-01xx numbers).
	Numbers []string `json:"numbers,omitempty" koanf:"numbers"`
	// DefaultCountry is the ISO 3166-1 alpha-2 region ("US", "GB", "DE") whose national and
	// international dialling rules apply to numbers written without a country code. Required;
	// letter case is ignored.
	DefaultCountry string `json:"default_country,omitempty" koanf:"default_country"`
	// Locations maps a clinic number (E.164) to the locations its calls wake; a number given here
	// is one of the clinic's numbers whether or not Numbers lists it. The locations are
	// each 1 to 64 characters of a-z, 0-9, '_' or '-'. A number without an entry gets none, so
	// the event's default (["main"]) applies.
	Locations map[string][]string `json:"locations,omitempty" koanf:"locations"`
	// DialPrefixes are digit strings a PBX user dials before an outside number ("9", "0"), and
	// national caller-ID codes dialled the same way (UK "141"). One is removed from the front of
	// a number that is not valid as it stands. Default none.
	DialPrefixes []string `json:"dial_prefixes,omitempty" koanf:"dial_prefixes"`
	// ExtensionMaxDigits is the longest internal extension: a string of MinExtensionDigits to
	// ExtensionMaxDigits plain digits that is not a valid number in DefaultCountry is an
	// extension. 0 means DefaultExtensionMaxDigits (6); at most MaxExtensionMaxDigits.
	ExtensionMaxDigits int `json:"extension_max_digits,omitempty" koanf:"extension_max_digits"`
}

// Validate reports every problem with c at once, each error naming its key, such as
// `numbers[1]: "+1 555 123 0100" must be written in E.164, as +15551230100`. It returns nil when
// c is usable. The error joins the problems with errors.Join, so a translator can join it with
// its own problems and still report them all.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	region := strings.ToUpper(strings.TrimSpace(c.DefaultCountry))
	switch {
	case region == "":
		bad("default_country", "is required: the ISO 3166-1 alpha-2 code of the clinic's country, such as US, GB or DE")
	case !phonenumbers.GetSupportedRegions()[region]:
		bad("default_country", "%q is not a region the phone-number metadata knows; use an ISO 3166-1 alpha-2 code such as US, GB or DE", c.DefaultCountry)
	}

	own := make(map[string]bool, len(c.Numbers))
	for i, n := range c.Numbers {
		key := "numbers[" + strconv.Itoa(i) + "]"
		if msg := checkOwnNumber(n); msg != "" {
			bad(key, "%s", msg)
			continue
		}
		if own[n] {
			bad(key, "%s is listed twice", n)
		}
		own[n] = true
	}

	keys := make([]string, 0, len(c.Locations))
	for k := range c.Locations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		key := "locations[" + strconv.Quote(k) + "]"
		if msg := checkOwnNumber(k); msg != "" {
			bad(key, "%s", msg)
		}
		locs := c.Locations[k]
		switch {
		case len(locs) == 0:
			bad(key, "must name at least one location, or be left out for the default [\"main\"]")
		case len(locs) > event.MaxLocations:
			bad(key, "must name at most %d locations", event.MaxLocations)
		}
		seen := make(map[string]bool, len(locs))
		for j, l := range locs {
			lkey := key + "[" + strconv.Itoa(j) + "]"
			switch {
			case !event.ValidLocation(l):
				bad(lkey, "%q must be 1 to 64 characters of a-z, 0-9, '_' or '-', starting with a letter or digit", l)
			case seen[l]:
				bad(lkey, "%q is listed twice", l)
			}
			seen[l] = true
		}
	}

	seen := make(map[string]bool, len(c.DialPrefixes))
	for i, p := range c.DialPrefixes {
		key := "dial_prefixes[" + strconv.Itoa(i) + "]"
		switch {
		case p == "" || len(p) > MaxDialPrefixLength || !allDigits(p):
			bad(key, "%q must be 1 to %d digits, such as \"9\"", p, MaxDialPrefixLength)
		case seen[p]:
			bad(key, "%q is listed twice", p)
		}
		seen[p] = true
	}

	if m := c.ExtensionMaxDigits; m != 0 && (m < MinExtensionDigits || m > MaxExtensionMaxDigits) {
		bad("extension_max_digits", "must be %d to %d, or 0 for %d; got %d", MinExtensionDigits, MaxExtensionMaxDigits, DefaultExtensionMaxDigits, m)
	}
	return errors.Join(errs...)
}

// checkOwnNumber says what is wrong with n as one of the clinic's own numbers, or "" when
// nothing is: it must be written in E.164 and be a possible number for its country (the right
// length); it need not be in a range the metadata knows to be assigned.
func checkOwnNumber(n string) string {
	if !event.ValidE164(n) {
		if pn, err := phonenumbers.Parse(n, "ZZ"); err == nil && phonenumbers.IsPossibleNumber(pn) {
			return fmt.Sprintf("%q must be written in E.164, as %s", n, phonenumbers.Format(pn, phonenumbers.E164))
		}
		return fmt.Sprintf("%q must be an E.164 number: '+', country code and subscriber number, such as +15551230100", n)
	}
	pn, err := phonenumbers.Parse(n, "ZZ")
	if err != nil || !phonenumbers.IsPossibleNumber(pn) {
		return fmt.Sprintf("%s is not a possible number in its country (wrong length or country code)", n)
	}
	return ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
