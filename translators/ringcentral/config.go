package ringcentral

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/callwire/callwire/internal/confload"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/numbering"
	"github.com/callwire/callwire/translators/secret"
)

// Defaults for keys left out of the configuration.
const (
	DefaultServer        = "https://platform.ringcentral.com"
	DefaultProvider      = "ringcentral"
	DefaultPollInterval  = 5 * time.Minute
	DefaultPollOverlap   = 10 * time.Minute
	DefaultMaxCallLength = 4 * time.Hour
)

// The environment variables a secret may be read from when neither the key nor its _file
// variant is set.
const (
	EnvClientSecret = "RINGCENTRAL_CLIENT_SECRET"
	EnvJWT          = "RINGCENTRAL_JWT"
)

// Config is the `config:` block of a `builtin: ringcentral` translator in the agent's
// configuration. docs/ringcentral.md describes every key.
type Config struct {
	// Server is the RingCentral platform's base URL. Default DefaultServer.
	Server string `json:"server,omitempty"`
	// ClientID is the RingCentral app's client id. Required.
	ClientID string `json:"client_id"`
	// ClientSecret is the app's client secret; ClientSecretFile names a file holding it instead.
	// With neither, the environment variable EnvClientSecret is read. Required one way or another.
	ClientSecret     string `json:"client_secret,omitempty"`
	ClientSecretFile string `json:"client_secret_file,omitempty"`
	// JWT is the user's JWT credential for the JWT grant; JWTFile names a file holding it
	// instead. With neither, the environment variable EnvJWT is read. Required one way or another.
	JWT     string `json:"jwt,omitempty"`
	JWTFile string `json:"jwt_file,omitempty"`
	// Provider is the events' provider. Default "ringcentral".
	Provider string `json:"provider,omitempty"`

	numbering.Config

	// PollInterval is how often the call log is polled. Default 5m; 0 is the default, and
	// "off" is not offered: the poll is what makes the translator lose nothing.
	PollInterval Duration `json:"poll_interval,omitempty"`
	// PollOverlap is how far before the cursor each poll reaches again, for records the call
	// log changed late. Default 10m.
	PollOverlap Duration `json:"poll_overlap,omitempty"`
	// MaxCallLength bounds how long a call may last: the call log is searched by start time, so
	// each poll reaches back this much further than the cursor to find long calls that ended
	// since. It also forgets a live call heard nothing of for this long. Default 4h.
	MaxCallLength Duration `json:"max_call_length,omitempty"`
	// CursorFile is where the call-log cursor is kept between runs. Required: without it a
	// restart would poll from now and miss what ended while the translator was down.
	CursorFile string `json:"cursor_file"`
	// Live turns the WebSocket subscription on. Default true.
	Live *bool `json:"live,omitempty"`
}

// Duration is a span of time in configuration: Go duration text ("90s") or a number of seconds.
type Duration = confload.Duration

// String prints the configuration without its secrets, so that it can be logged.
func (c Config) String() string {
	hide := func(s string) string {
		if s == "" {
			return ""
		}
		return "[hidden]"
	}
	c.ClientSecret, c.JWT = hide(c.ClientSecret), hide(c.JWT)
	type plain Config
	b, _ := json.Marshal(plain(c))
	return string(b)
}

// ParseConfig decodes a configuration block and reports every problem with it at once: unknown
// keys (with the nearest known one), values of the wrong type, and what Validate finds. The
// result has its defaults filled in; secrets given as files or environment variables are not
// read yet (Secrets does that).
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	decodeErr := confload.DecodeJSON(raw, &c)
	c.setDefaults()
	return c, errors.Join(decodeErr, c.Validate())
}

func (c *Config) setDefaults() {
	c.Server = strings.TrimRight(strings.TrimSpace(c.Server), "/")
	if c.Server == "" {
		c.Server = DefaultServer
	}
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
	if c.PollInterval == 0 {
		c.PollInterval = Duration(DefaultPollInterval)
	}
	if c.PollOverlap == 0 {
		c.PollOverlap = Duration(DefaultPollOverlap)
	}
	if c.MaxCallLength == 0 {
		c.MaxCallLength = Duration(DefaultMaxCallLength)
	}
	if c.Live == nil {
		c.Live = event.Ptr(true)
	}
}

// Validate reports every problem with c at once, each naming its key. It expects the defaults
// to be filled in, as ParseConfig does.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if u, err := url.Parse(c.Server); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		bad("server", "%q is not a base URL such as %s", c.Server, DefaultServer)
	}
	if strings.TrimSpace(c.ClientID) == "" {
		bad("client_id", "is required: the client id of the RingCentral app")
	}
	secret := func(key, val, file, env string) {
		switch {
		case val != "" && file != "":
			bad(key+"_file", "set %s or %s_file, not both", key, key)
		case val == "" && file == "" && os.Getenv(env) == "":
			bad(key, "is required: set %s, %s_file, or the environment variable %s", key, key, env)
		}
	}
	secret("client_secret", c.ClientSecret, c.ClientSecretFile, EnvClientSecret)
	secret("jwt", c.JWT, c.JWTFile, EnvJWT)
	if !validProvider(c.Provider) {
		bad("provider", "must be 1 to 64 characters of a-z, 0-9, '.', '_' or '-'")
	}
	if c.PollInterval < Duration(10*time.Second) {
		bad("poll_interval", "must be at least 10s: the call log is rate limited")
	}
	if c.PollOverlap < 0 {
		bad("poll_overlap", "must not be negative")
	}
	if c.MaxCallLength < Duration(time.Minute) || c.MaxCallLength > Duration(7*24*time.Hour) {
		bad("max_call_length", "must be between 1m and 168h")
	}
	if strings.TrimSpace(c.CursorFile) == "" {
		bad("cursor_file", "is required: a file the translator may write, where it keeps how far it has read the call log")
	}
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func validProvider(s string) bool {
	e := event.Event{Type: event.CallEnded, ProviderCallID: "x", OccurredAt: time.Unix(1, 0), Call: event.Call{Direction: event.Inbound}, Provider: s}
	if s == "" {
		return false
	}
	if err := e.Validate(); err != nil {
		if ve, ok := event.AsValidationError(err); ok {
			for _, p := range ve.Problems {
				if p.Field == "provider" {
					return false
				}
			}
		}
	}
	return true
}

// Secrets are the credentials the translator signs in with, read from the configuration, its
// files or the environment. They are never logged.
type Secrets struct {
	ClientSecret string
	JWT          string
}

// String hides the secrets.
func (Secrets) String() string { return "[hidden]" }

// LoadSecrets reads the credentials from where c says they are: the key, its _file, or the
// environment variable EnvClientSecret or EnvJWT. It reports every problem at once.
func (c Config) LoadSecrets() (Secrets, error) {
	var errs []error
	read := func(src secret.Source) string {
		v, err := src.Read(os.Getenv)
		if err == nil && strings.TrimSpace(v) == "" {
			err = fmt.Errorf("%s: is blank", src.Key)
		}
		errs = append(errs, err)
		return strings.TrimSpace(v) // client secrets and JWTs hold no spaces; a pasted one may
	}
	s := Secrets{
		ClientSecret: read(secret.Source{Key: "client_secret", Value: c.ClientSecret, File: c.ClientSecretFile, Env: EnvClientSecret}),
		JWT:          read(secret.Source{Key: "jwt", Value: c.JWT, File: c.JWTFile, Env: EnvJWT}),
	}
	return s, errors.Join(errs...)
}
