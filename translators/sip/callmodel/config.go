package callmodel

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/numbering"
)

// Defaults of the tracker's configuration.
const (
	// DefaultRingTimeout is how long an initial INVITE may go without a final response before
	// the call is taken as rung out (no_answer).
	DefaultRingTimeout = 3 * time.Minute
	// DefaultCallTimeout is how long an answered call without a session timer may stay silent
	// (no in-dialog message) before it is taken as ended.
	DefaultCallTimeout = 4 * time.Hour
	// DefaultGrace is how long an ended call is remembered: 64*T1 (RFC 3261 Timer B/F), the
	// longest a retransmission or a late capture copy of its messages can arrive.
	DefaultGrace = 32 * time.Second
	// DefaultMaxCalls bounds the calls held at once.
	DefaultMaxCalls = 50_000
	// SessionMargin is added to Session-Expires (RFC 4028) after the last in-dialog activity
	// before an answered call whose refreshes stopped is taken as ended.
	SessionMargin = 32 * time.Second
)

// Config is the dialog tracker's configuration. The zero values of the optional fields take the
// documented defaults.
type Config struct {
	// Plan classifies parties and knows the clinic's numbers. Required.
	Plan *numbering.Plan
	// PBX lists the PBX's addresses: a message whose Dst is one is headed to the PBX, one whose
	// Src is one comes from it. Required, at least one.
	PBX []netip.AddrPort
	// Trunk lists the carrier's addresses. Optional. When set, only dialogs with the trunk (or
	// internal calls placed by a phone to the PBX) are calls: the PBX's own legs to its phones
	// are not reported a second time.
	Trunk []netip.AddrPort
	// Provider is the events' provider; "" is "sip".
	Provider string
	// Observer is the events' observer; "" is event.ObserverProxy.
	Observer event.Observer
	// RingTimeout ends an initial INVITE that got no final response; 0 is DefaultRingTimeout.
	RingTimeout time.Duration
	// CallTimeout ends an answered call without a session timer after this much silence; 0 is
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// Grace is how long an ended call is remembered to absorb retransmissions and late copies,
	// and how long a challenged or redirected INVITE waits for its retry; 0 is DefaultGrace.
	Grace time.Duration
	// MaxCalls bounds the calls held; 0 is DefaultMaxCalls.
	MaxCalls int
}

// Validate reports every problem with the configuration at once, each naming its key.
func (c Config) Validate() error {
	var errs []error
	if c.Plan == nil {
		errs = append(errs, errors.New("plan: is required"))
	}
	if len(c.PBX) == 0 {
		errs = append(errs, errors.New("pbx: at least one address is required"))
	}
	pbx := make(map[netip.AddrPort]bool, len(c.PBX))
	for i, a := range c.PBX {
		if !a.IsValid() || a.Port() == 0 {
			errs = append(errs, fmt.Errorf("pbx[%d]: %q is not an address with a port", i, a))
		}
		pbx[a] = true
	}
	for i, a := range c.Trunk {
		switch {
		case !a.IsValid() || a.Port() == 0:
			errs = append(errs, fmt.Errorf("trunk[%d]: %q is not an address with a port", i, a))
		case pbx[a]:
			errs = append(errs, fmt.Errorf("trunk[%d]: %s is also a pbx address", i, a))
		}
	}
	if c.Provider != "" && !validProvider(c.Provider) {
		errs = append(errs, fmt.Errorf("provider: %q must be 1 to 64 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit", c.Provider))
	}
	if c.Observer != "" && !c.Observer.Valid() {
		errs = append(errs, fmt.Errorf("observer: %q must be endpoint, proxy or pbx_api", c.Observer))
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"ring_timeout", c.RingTimeout}, {"call_timeout", c.CallTimeout}, {"grace", c.Grace}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s: %s must not be negative", d.key, d.v))
		}
	}
	if c.MaxCalls < 0 {
		errs = append(errs, fmt.Errorf("max_calls: %d must not be negative", c.MaxCalls))
	}
	return errors.Join(errs...)
}

// withDefaults returns the configuration with every zero optional field set to its default.
func (c Config) withDefaults() Config {
	if c.Provider == "" {
		c.Provider = event.DefaultProvider
	}
	if c.Observer == "" {
		c.Observer = event.ObserverProxy
	}
	if c.RingTimeout == 0 {
		c.RingTimeout = DefaultRingTimeout
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.MaxCalls == 0 {
		c.MaxCalls = DefaultMaxCalls
	}
	return c
}

// validProvider is event's rule for provider: 1 to 64 of a-z, 0-9, '.', '_', '-', starting with
// a letter or digit.
func validProvider(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-' || c == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}
