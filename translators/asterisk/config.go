package asterisk

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/callwire/callwire/internal/confload"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/netaddr"
	"github.com/callwire/callwire/translators/numbering"
	"github.com/callwire/callwire/translators/secret"
)

// Defaults for keys left out of the configuration.
const (
	DefaultAddress      = "127.0.0.1:5038"
	DefaultPort         = 5038
	DefaultProvider     = "asterisk"
	DefaultEvents       = "call,agent,dialplan"
	DefaultPingInterval = 20 * time.Second
	DefaultReconnectMin = time.Second
	DefaultReconnectMax = 30 * time.Second
	DefaultCheckEvery   = 5 * time.Minute
)

// DefaultTrunkContexts are the dialplan contexts FreePBX and most hand-written dialplans give
// the carrier's channels: a channel first seen in one of them is a trunk channel.
var defaultTrunkContexts = []string{"from-trunk", "from-pstn"}

// Config is the `config:` block of a `builtin: asterisk` translator in the agent's
// configuration. docs/asterisk.md describes every key.
type Config struct {
	// Address is the manager's "host:port" (port 5038 when left out), as netaddr.ParseHostPort
	// reads it. Default DefaultAddress.
	Address string `json:"address,omitempty"`
	// Manager is Address as ParseConfig parsed it, with its default port. The AMI client dials it.
	Manager netaddr.HostPort `json:"-"`
	// TLS makes the connection speak TLS (Asterisk's tlsbindport, usually 5039).
	TLS bool `json:"tls,omitempty"`
	// TLSCAFile is a PEM file of the certificate authorities to trust for TLS instead of the
	// system's.
	TLSCAFile string `json:"tls_ca_file,omitempty"`
	// TLSServerName is the name the server's certificate must carry. Default the address's
	// host.
	TLSServerName string `json:"tls_server_name,omitempty"`
	// Username is the manager.conf user. Required.
	Username string `json:"username"`
	// Secret is the user's secret. Exactly one of Secret, SecretFile and SecretEnv is required;
	// the secret is never logged.
	Secret string `json:"secret,omitempty"`
	// SecretFile names a file holding the secret (its trailing newline is ignored).
	SecretFile string `json:"secret_file,omitempty"`
	// SecretEnv names an environment variable holding the secret.
	SecretEnv string `json:"secret_env,omitempty"`
	// Events is the event mask asked for at login. Default DefaultEvents.
	Events string `json:"events,omitempty"`
	// Provider is the events' provider. Default "asterisk".
	Provider string `json:"provider,omitempty"`

	numbering.Config

	// TrunkChannels are prefixes of the carrier trunks' channel names, such as
	// "PJSIP/mycarrier-" or "SIP/voipgrid-" (letter case ignored).
	TrunkChannels []string `json:"trunk_channels,omitempty"`
	// TrunkContexts are the dialplan contexts the carrier's channels start in. Default
	// ["from-trunk", "from-pstn"] (FreePBX's); set [] to rely on trunk_channels alone.
	TrunkContexts []string `json:"trunk_contexts,omitempty"`
	// EndpointExtensions maps a phone's endpoint name, as its channels show it ("PJSIP/frontdesk"
	// or "frontdesk", letter case ignored), to the extension the clinic knows the phone by, for
	// answeredBy and transfer targets. A phone not listed is known by its endpoint name.
	EndpointExtensions map[string]string `json:"endpoint_extensions,omitempty"`

	// PingInterval is the time between keepalive Pings. Default 20s.
	PingInterval Duration `json:"ping_interval,omitempty"`
	// ReconnectMin and ReconnectMax bound the wait before a reconnect, doubled after each
	// failure. Defaults 1s and 30s.
	ReconnectMin Duration `json:"reconnect_min,omitempty"`
	ReconnectMax Duration `json:"reconnect_max,omitempty"`
	// CheckEvery is how often the calls in progress are checked against CoreShowChannels while
	// connected, to end those whose hang-up was never seen. Default 5m; negative: never.
	CheckEvery Duration `json:"check_every,omitempty"`
}

// Duration is a span of time in configuration: Go duration text ("90s") or a number of seconds.
type Duration = confload.Duration

// ParseConfig decodes a configuration block and reports every problem with it at once: unknown
// keys, values of the wrong type, and what Validate finds. The result has its defaults filled
// in and its address parsed (Manager). It does not read the secret; ReadSecret does.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	decodeErr := confload.DecodeJSON(raw, &c)
	c.setDefaults()
	addrErr := c.parseAddress()
	return c, errors.Join(decodeErr, addrErr, c.validate())
}

// parseAddress parses Address into Manager, reporting a bad one under its key.
func (c *Config) parseAddress() error {
	m, err := netaddr.ParseHostPort(c.Address, DefaultPort)
	if err != nil {
		return fmt.Errorf("address: %w", err)
	}
	c.Manager = m
	return nil
}

func (c *Config) setDefaults() {
	if c.Address == "" {
		c.Address = DefaultAddress
	}
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
	if c.Events == "" {
		c.Events = DefaultEvents
	}
	if c.TrunkContexts == nil { // [] given in the configuration is kept: no trunk context
		c.TrunkContexts = append([]string(nil), defaultTrunkContexts...)
	}
	if c.PingInterval == 0 {
		c.PingInterval = Duration(DefaultPingInterval)
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = Duration(DefaultReconnectMin)
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = Duration(DefaultReconnectMax)
	}
	if c.CheckEvery == 0 {
		c.CheckEvery = Duration(DefaultCheckEvery)
	}
}

// Validate reports every problem with c at once, each naming its key, its address among them.
// It expects the defaults to be filled in, as ParseConfig does.
func (c Config) Validate() error {
	return errors.Join(c.parseAddress(), c.validate())
}

// validate reports every problem with c's keys other than its address.
func (c Config) validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if !c.TLS && (c.TLSCAFile != "" || c.TLSServerName != "") {
		bad("tls", "tls_ca_file and tls_server_name need tls: true")
	}
	if strings.TrimSpace(c.Username) == "" {
		bad("username", "is required: the manager.conf user")
	}
	n := 0
	for _, s := range []string{c.Secret, c.SecretFile, c.SecretEnv} {
		if s != "" {
			n++
		}
	}
	switch {
	case n == 0:
		bad("secret", "is required: set one of secret, secret_file or secret_env")
	case n > 1:
		bad("secret", "set only one of secret, secret_file or secret_env")
	}
	if len(c.Provider) > 64 {
		bad("provider", "is longer than 64 characters")
	}
	if strings.ContainsAny(c.Events, "\r\n") {
		bad("events", "must be one line, such as %q", DefaultEvents)
	}
	for i, p := range c.TrunkChannels {
		if strings.TrimSpace(p) == "" || !strings.Contains(p, "/") {
			bad(fmt.Sprintf("trunk_channels[%d]", i), "%q is not a channel name prefix such as \"PJSIP/mycarrier-\"", p)
		}
	}
	for i, p := range c.TrunkContexts {
		if strings.TrimSpace(p) == "" {
			bad(fmt.Sprintf("trunk_contexts[%d]", i), "is empty")
		}
	}
	for k, v := range c.EndpointExtensions {
		key := fmt.Sprintf("endpoint_extensions[%q]", k)
		switch kk := strings.TrimSpace(k); {
		case kk == "" || strings.ContainsAny(kk, " \t\r\n") || strings.Count(kk, "/") > 1 || strings.HasSuffix(kk, "/"):
			bad(key, "is not an endpoint name such as \"frontdesk\" or \"PJSIP/frontdesk\"")
		case strings.TrimSpace(v) == "":
			bad(key, "has no extension")
		case utf8.RuneCountInString(v) > event.MaxExtensionLength || strings.ContainsAny(v, " \t\r\n"):
			bad(key, "%q is not an extension (one word of at most %d characters)", v, event.MaxExtensionLength)
		}
	}
	if len(c.TrunkChannels) == 0 && len(c.TrunkContexts) == 0 {
		bad("trunk_channels", "set trunk_channels or trunk_contexts: without them no call is known to come from the carrier")
	}
	if c.PingInterval < 0 {
		bad("ping_interval", "must not be negative")
	}
	if c.CheckEvery > 0 && c.CheckEvery < Duration(10*time.Second) {
		bad("check_every", "must be at least 10s (or negative: never)")
	}
	if c.ReconnectMin <= 0 {
		bad("reconnect_min", "must be positive")
	}
	if c.ReconnectMax < c.ReconnectMin {
		bad("reconnect_max", "must be at least reconnect_min")
	}
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ReadSecret returns the manager secret from where the configuration says it is; getenv reads
// secret_env's variable.
func (c Config) ReadSecret(getenv func(string) string) (string, error) {
	return secret.Source{Key: "secret", Value: c.Secret, File: c.SecretFile, Env: c.SecretEnv}.Read(getenv)
}

// TLSConfig returns the TLS configuration to dial with, or nil without tls.
func (c Config) TLSConfig() (*tls.Config, error) {
	if !c.TLS {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if tc.ServerName == "" {
		tc.ServerName = c.Manager.Host
	}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("read tls_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls_ca_file %s holds no PEM certificate", c.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
