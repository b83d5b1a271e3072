package sip

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/callwire/callwire/internal/confload"
	"github.com/callwire/callwire/translators/netaddr"
	"github.com/callwire/callwire/translators/numbering"
	"github.com/callwire/callwire/translators/secret"
)

// The observer's two modes.
const (
	// ModeProxy places the observer in the call path as a record-routing SIP proxy.
	ModeProxy = "proxy"
	// ModeHEP makes the observer a passive HEPv3 collector of copies of the signalling.
	ModeHEP = "hep"
)

// Defaults for keys left out of the configuration.
const (
	DefaultProvider  = "sip"
	DefaultSIPPort   = 5060
	DefaultHEPPort   = 9060
	DefaultQueueSize = 65536
)

// Config is the `config:` block of a `builtin: sip` translator in the agent's configuration.
// docs/sip-observer.md describes every key.
type Config struct {
	// Mode is ModeProxy or ModeHEP. Required.
	Mode string `json:"mode"`
	// Listen are the addresses to listen on, as netaddr.ParseListen reads them ("udp://ip:port",
	// "tcp://ip:port", "ip:port" for both; the port defaults to the mode's). Default: UDP and TCP
	// on 0.0.0.0:5060 (proxy) or 0.0.0.0:9060 (hep).
	Listen []string `json:"listen,omitempty"`
	// PBX is the clinic's PBX, "host:port" (port 5060 when left out). Required: a call headed to
	// it is inbound, one coming from it outbound; the proxy forwards calls from outside to it.
	PBX string `json:"pbx"`
	// Trunk is the carrier's SIP address, "host:port" (port 5060 when left out). Required in
	// proxy mode: initial requests from the PBX go there. Optional in hep mode, where it tells
	// trunk calls from the PBX's legs to its own phones, which are then not reported as calls of
	// their own.
	Trunk string `json:"trunk,omitempty"`

	// Listeners, PBXAddr and TrunkAddr are Listen, PBX and Trunk as ParseConfig parsed them, with
	// their default ports; TrunkAddr is zero without a trunk. The proxy and the tap take these.
	Listeners []netaddr.Listener `json:"-"`
	PBXAddr   netaddr.HostPort   `json:"-"`
	TrunkAddr netaddr.HostPort   `json:"-"`
	// Provider is the events' provider. Default "sip".
	Provider string `json:"provider,omitempty"`

	numbering.Config

	// RingTimeout ends a call whose INVITE got no final answer, as no answer. Default the call
	// model's.
	RingTimeout Duration `json:"ring_timeout,omitempty"`
	// CallTimeout ends an answered call after this much silence when it has no session timer
	// and no BYE was seen. Default the call model's.
	CallTimeout Duration `json:"call_timeout,omitempty"`
	// Grace is how long an ended call is remembered, to absorb retransmissions and late copies.
	// Default the call model's.
	Grace Duration `json:"grace,omitempty"`
	// MaxCalls bounds the calls held in memory. Default the call model's.
	MaxCalls int `json:"max_calls,omitempty"`

	// Advertise is the host (IP address or name) the proxy writes in its Via and Record-Route
	// headers (proxy mode). Default: the listener's address, or for a listener on 0.0.0.0 the
	// local address that routes to the PBX.
	Advertise string `json:"advertise,omitempty"`
	// MaxTransactions bounds the transactions the proxy keeps state for (proxy mode); beyond it
	// requests are forwarded without state. Default the proxy's.
	MaxTransactions int `json:"max_transactions,omitempty"`

	// ReorderWindow is how long the tap holds captured packets to put them back in timestamp
	// order (hep mode). Default the tap's.
	ReorderWindow Duration `json:"reorder_window,omitempty"`
	// MaxHeld bounds the messages the tap holds in its reorder window (hep mode). Default the
	// tap's.
	MaxHeld int `json:"max_held,omitempty"`
	// MaxConns bounds the HEP-over-TCP connections served at once (hep mode). Default the tap's.
	MaxConns int `json:"max_conns,omitempty"`
	// HEPPassword is the capture password the capture agents send (hep mode); packets without
	// it are dropped. Default none: every packet is taken. HEPPasswordFile names a file holding
	// it instead, so it need not be written in the configuration.
	HEPPassword     string `json:"hep_password,omitempty"`
	HEPPasswordFile string `json:"hep_password_file,omitempty"`

	// QueueSize bounds the SIP messages waiting between the observer and the call model. When it
	// is full, messages are dropped (counted and logged), never the call path slowed.
	// Default DefaultQueueSize.
	QueueSize int `json:"queue_size,omitempty"`
}

// Duration is a span of time in configuration: Go duration text ("90s") or a number of seconds.
type Duration = confload.Duration

// ParseConfig decodes a configuration block and reports every problem with it at once: unknown
// keys (with the nearest known one), values of the wrong type, and what Validate finds. The
// result has its defaults filled in and its addresses parsed (Listeners, PBXAddr, TrunkAddr).
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	decodeErr := confload.DecodeJSON(raw, &c)
	c.setDefaults()
	addrErr := c.parseAddresses()
	return c, errors.Join(decodeErr, addrErr, c.validate())
}

// parseAddresses parses Listen, PBX and Trunk into Listeners, PBXAddr and TrunkAddr, reporting
// each bad one under its key. It expects Mode and Listen's default to be set.
func (c *Config) parseAddresses() error {
	var errs []error
	port := uint16(DefaultSIPPort)
	if c.Mode == ModeHEP {
		port = DefaultHEPPort
	}
	var err error
	if c.Listeners, err = netaddr.ParseListens("listen", c.Listen, port); err != nil {
		errs = append(errs, err)
	}
	if c.PBX == "" {
		errs = append(errs, errors.New("pbx: is required: the PBX's SIP address as host:port"))
	} else if c.PBXAddr, err = netaddr.ParseHostPort(c.PBX, DefaultSIPPort); err != nil {
		errs = append(errs, fmt.Errorf("pbx: %w", err))
	}
	switch {
	case c.Trunk == "" && c.Mode == ModeProxy:
		errs = append(errs, errors.New("trunk: is required in proxy mode: where calls from the PBX go, as host:port"))
	case c.Trunk != "":
		if c.TrunkAddr, err = netaddr.ParseHostPort(c.Trunk, DefaultSIPPort); err != nil {
			errs = append(errs, fmt.Errorf("trunk: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) setDefaults() {
	c.Mode = strings.ToLower(strings.TrimSpace(c.Mode))
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if len(c.Listen) == 0 {
		port := DefaultSIPPort
		if c.Mode == ModeHEP {
			port = DefaultHEPPort
		}
		p := strconv.Itoa(port)
		c.Listen = []string{"udp://0.0.0.0:" + p, "tcp://0.0.0.0:" + p}
	}
}

// Validate reports every problem with c at once, each naming its key, its addresses among them.
// It expects the defaults to be filled in, as ParseConfig does.
func (c Config) Validate() error {
	return errors.Join(c.parseAddresses(), c.validate())
}

// validate reports every problem with c's keys other than its addresses.
func (c Config) validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	switch c.Mode {
	case ModeProxy, ModeHEP:
	case "":
		bad("mode", "is required: %q or %q", ModeProxy, ModeHEP)
	default:
		bad("mode", "%q is not a mode; use %q or %q", c.Mode, ModeProxy, ModeHEP)
	}
	if len(c.Provider) > 64 {
		bad("provider", "is longer than 64 characters")
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"ring_timeout", c.RingTimeout}, {"call_timeout", c.CallTimeout}, {"grace", c.Grace}, {"reorder_window", c.ReorderWindow}} {
		if d.v < 0 {
			bad(d.key, "must not be negative")
		}
	}
	if c.ReorderWindow > Duration(10*time.Second) {
		bad("reorder_window", "is longer than 10s: the tap would hold every message that long")
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"max_calls", c.MaxCalls}, {"max_transactions", c.MaxTransactions}, {"max_held", c.MaxHeld}, {"max_conns", c.MaxConns}} {
		if n.v < 0 {
			bad(n.key, "must not be negative")
		}
	}
	if c.QueueSize < 1 || c.QueueSize > 1<<24 {
		bad("queue_size", "must be between 1 and %d", 1<<24)
	}
	if c.Mode == ModeHEP && (c.Advertise != "" || c.MaxTransactions != 0) {
		bad("mode", "hep mode takes no advertise or max_transactions (they are for mode proxy)")
	}
	if c.Mode == ModeProxy && (c.ReorderWindow != 0 || c.MaxHeld != 0 || c.MaxConns != 0 || c.HEPPassword != "" || c.HEPPasswordFile != "") {
		bad("mode", "proxy mode takes no reorder_window, max_held, max_conns, hep_password or hep_password_file (they are for mode hep)")
	}
	if c.HEPPassword != "" && c.HEPPasswordFile != "" {
		bad("hep_password_file", "set hep_password or hep_password_file, not both")
	}
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// CheckListeners reports, each under its listen key, a listen address that is not an address of
// this machine, as interfaceAddrs (net.InterfaceAddrs) lists them: the observer could not bind
// it. 0.0.0.0, :: and loopback addresses always are this machine's. The agent calls it when it
// starts, so that such an address is refused then rather than failing every launch of the
// translator. It expects Listeners parsed, as ParseConfig does.
func (c Config) CheckListeners(interfaceAddrs func() ([]net.Addr, error)) error {
	var local []netip.Addr
	var errs []error
	listed, reported := false, -1 // an entry without a transport gives two listeners: report it once
	for _, l := range c.Listeners {
		ip := l.Addr.Addr()
		if ip.IsUnspecified() || ip.IsLoopback() {
			continue
		}
		if !listed {
			as, err := interfaceAddrs()
			if err != nil {
				return fmt.Errorf("listen: list this machine's addresses: %w", err)
			}
			for _, a := range as {
				if n, ok := a.(*net.IPNet); ok {
					if ip, ok := netip.AddrFromSlice(n.IP); ok {
						local = append(local, ip.Unmap())
					}
				}
			}
			listed = true
		}
		if !slices.Contains(local, ip) && (len(errs) == 0 || reported != l.Entry) {
			reported = l.Entry
			errs = append(errs, fmt.Errorf("listen[%d]: %s is not an address of this machine (it has %s); listen on one of them, or on 0.0.0.0",
				l.Entry, ip, joinAddrs(local)))
		}
	}
	return errors.Join(errs...)
}

func joinAddrs(as []netip.Addr) string {
	if len(as) == 0 {
		return "none"
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// ReadHEPPassword returns the capture password from hep_password or hep_password_file, or ""
// when neither is set (every packet is taken).
func (c Config) ReadHEPPassword() (string, error) {
	if c.HEPPassword == "" && c.HEPPasswordFile == "" {
		return "", nil
	}
	return secret.Source{Key: "hep_password", Value: c.HEPPassword, File: c.HEPPasswordFile}.Read(os.Getenv)
}
