package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/callwire/callwire/internal/confload"
)

// EnvPrefix starts every environment variable the agent reads. The rest of the name is the key
// in upper case with each '.' written as '_': CALLWIRE_AGENT_CORE_URL sets core.url and
// CALLWIRE_AGENT_OUTBOX_MAX_EVENTS sets outbox.max_events. The translators list is set in the
// file only.
const EnvPrefix = "CALLWIRE_AGENT_"

// Config is the agent's whole configuration.
type Config struct {
	Core        Core         `koanf:"core"`
	Outbox      Outbox       `koanf:"outbox"`
	Delivery    Delivery     `koanf:"delivery"`
	Metrics     Metrics      `koanf:"metrics"`
	Log         Log          `koanf:"log"`
	Translators []Translator `koanf:"translators"`
}

// Core names the callwire server the agent reports to and the key it uses.
type Core struct {
	// URL is the server's base URL, such as https://calls.example.org. Required.
	URL string `koanf:"url"`
	// ClientID is the key's Client ID. Required unless Bearer.
	ClientID string `koanf:"client_id"`
	// Secret is the key's Client Secret. Exactly one of Secret and SecretFile is required.
	Secret string `koanf:"secret"`
	// SecretFile is a file holding the secret (surrounding white space is ignored); Load reads
	// it into Secret and clears SecretFile.
	SecretFile string `koanf:"secret_file"`
	// Bearer sends the secret as "Authorization: Bearer <secret>" instead of the Client-ID and
	// Client-Secret headers. Default false.
	Bearer bool `koanf:"bearer"`
}

// Outbox configures the durable queue of events waiting for the core.
type Outbox struct {
	// Path is the outbox's SQLite file. Default "data/agent-outbox.db".
	Path string `koanf:"path"`
	// MaxEvents bounds how many events the outbox holds. Default 100000.
	MaxEvents int `koanf:"max_events"`
	// MaxBytes bounds the bytes of event JSON it holds. Default 268435456 (256 MiB).
	MaxBytes int64 `koanf:"max_bytes"`
	// DeadLetter is the JSON Lines file events the core refused for good go to. Default
	// "data/agent-dead-letter.jsonl".
	DeadLetter string `koanf:"dead_letter"`
}

// Delivery tunes the sender.
type Delivery struct {
	// Workers is how many requests may be in flight at once. Default 2.
	Workers int `koanf:"workers"`
	// MinBackoff and MaxBackoff bound the pause after a failed request. Defaults 1s and 1m.
	MinBackoff time.Duration `koanf:"min_backoff"`
	MaxBackoff time.Duration `koanf:"max_backoff"`
	// RequestTimeout bounds one request. Default 30s.
	RequestTimeout time.Duration `koanf:"request_timeout"`
	// ShutdownTimeout is how long requests in flight at shutdown may still take. Default 10s.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
}

// Metrics configures the local status endpoint and the periodic status log line.
type Metrics struct {
	// Listen is where /metrics is served, host:port; empty turns it off. Default
	// "127.0.0.1:9464".
	Listen string `koanf:"listen"`
	// LogInterval is how often the counters are logged; 0 logs none. Default 1m.
	LogInterval time.Duration `koanf:"log_interval"`
}

// Log configures the agent's log, written to stderr.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `koanf:"level"`
	// Format is json, text, or auto (text on a terminal, json otherwise). Default auto.
	Format string `koanf:"format"`
}

// Translator is one translator the agent runs.
type Translator struct {
	// Name names the translator in logs, metrics and the outbox. Required, unique, made of
	// letters, digits, '.', '_' and '-'.
	Name string `koanf:"name"`
	// Builtin names a translator built into the callwire binary (for example "sip"). Exactly
	// one of Builtin and Path is required.
	Builtin string `koanf:"builtin"`
	// Path is a translator executable (by convention named callwire-translator-<name>).
	Path string `koanf:"path"`
	// Args are extra command-line arguments for the executable.
	Args []string `koanf:"args"`
	// Config is the translator's own configuration block, handed to it as JSON.
	Config map[string]any `koanf:"config"`
}

// ConfigJSON returns t's configuration block as JSON: an empty object when none was given.
func (t Translator) ConfigJSON() (json.RawMessage, error) {
	if len(t.Config) == 0 {
		return json.RawMessage("{}"), nil
	}
	b, err := json.Marshal(t.Config)
	if err != nil {
		return nil, fmt.Errorf("translator %s: config: %w", t.Name, err)
	}
	return b, nil
}

// Defaults returns the configuration used when nothing is set.
func Defaults() Config {
	return Config{
		Outbox: Outbox{Path: "data/agent-outbox.db", MaxEvents: 100_000, MaxBytes: 256 << 20,
			DeadLetter: "data/agent-dead-letter.jsonl"},
		Delivery: Delivery{Workers: 2, MinBackoff: time.Second, MaxBackoff: time.Minute,
			RequestTimeout: 30 * time.Second, ShutdownTimeout: 10 * time.Second},
		Metrics: Metrics{Listen: "127.0.0.1:9464", LogInterval: time.Minute},
		Log:     Log{Level: "info", Format: "auto"},
	}
}

// UnknownVariable is a CALLWIRE_AGENT_ variable that sets nothing, most likely a misspelt one:
// Load returns them for the caller to log as warnings (UnknownVariable.Warn).
type UnknownVariable = confload.UnknownVariable

// UnknownKeyError is a key in the agent's configuration file that the Config does not have;
// Load's error wraps one for each.
type UnknownKeyError = confload.UnknownKeyError

// spec describes the Config to the loader shared with the core: the koanf tags of Config are the
// keys (a translator's config block is free-form, its own), and each key outside the translators
// list has a variable (outbox.max_events is CALLWIRE_AGENT_OUTBOX_MAX_EVENTS).
func spec() confload.Spec[Config] {
	return confload.Spec[Config]{
		Name:      "agent configuration",
		Defaults:  Defaults(),
		EnvPrefix: EnvPrefix,
		Problems:  Config.problems,
	}
}

// Variables returns, sorted, every environment variable that sets a key of the Config.
func Variables() []string {
	l, err := confload.New(spec())
	if err != nil {
		return nil
	}
	return l.Variables()
}

// Load builds the Config: defaults, then the YAML file at path (skipped when path is empty),
// then CALLWIRE_AGENT_* variables from environ (os.Environ() in production), then the flags of
// fs that were set on the command line (nil for none), each mapped to a key through flagKeys,
// for example "core-url" → "core.url". It reads core.secret_file into Core.Secret (clearing
// Core.SecretFile) and returns the result validated.
//
// The error lists every problem at once: each key of the file the Config does not have (with the
// nearest known key when one is close; the keys inside a translator's config block are the
// translator's own and never checked), and every invalid value (see Validate). The
// CALLWIRE_AGENT_* variables that set nothing are returned, even with an error, for the caller
// to log as warnings; the project's variables that are not configuration are never among them.
func Load(path string, environ []string, fs *pflag.FlagSet, flagKeys map[string]string) (Config, []UnknownVariable, error) {
	l, err := confload.New(spec())
	if err != nil {
		return Config{}, nil, err
	}
	c, unknown, err := l.Load(path, environ, fs, flagKeys)
	if err != nil {
		return Config{}, unknown, err
	}
	if c.Core.SecretFile != "" {
		b, err := os.ReadFile(c.Core.SecretFile)
		if err != nil {
			return Config{}, unknown, fmt.Errorf("invalid agent configuration: core.secret_file: %w", err)
		}
		c.Core.Secret = strings.TrimSpace(string(b))
		if c.Core.Secret == "" {
			return Config{}, unknown, fmt.Errorf("invalid agent configuration: core.secret_file: %s is empty", c.Core.SecretFile)
		}
		// The secret is resolved: the result validates again (as Run does) with Secret alone.
		c.Core.SecretFile = ""
	}
	return c, unknown, nil
}

// validName reports whether s may name a translator: 1 to 64 letters, digits, '.', '_' and
// '-', starting with a letter or digit.
func validName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' || s[0] == '_' || s[0] == '-' {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	if errs := c.problems(); len(errs) > 0 {
		return fmt.Errorf("invalid agent configuration: %w", errors.Join(errs...))
	}
	return nil
}

// problems lists what is wrong with c, each naming its key.
func (c Config) problems() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if c.Core.URL == "" {
		bad("core.url", "is required: the callwire server's base URL, such as https://calls.example.org")
	} else if u, err := url.Parse(c.Core.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("core.url", "must be an absolute http or https URL, got %q", c.Core.URL)
	}
	switch {
	case c.Core.Secret != "" && c.Core.SecretFile != "":
		bad("core.secret", "set core.secret or core.secret_file, not both")
	case c.Core.Secret == "" && c.Core.SecretFile == "":
		bad("core.secret", "is required (or core.secret_file)")
	}
	if c.Core.ClientID == "" && !c.Core.Bearer {
		bad("core.client_id", "is required unless core.bearer is true")
	}
	if c.Outbox.Path == "" {
		bad("outbox.path", "must name a file")
	}
	if c.Outbox.DeadLetter == "" {
		bad("outbox.dead_letter", "must name a file")
	}
	if c.Outbox.MaxEvents < 1 {
		bad("outbox.max_events", "must be at least 1, got %d", c.Outbox.MaxEvents)
	}
	if c.Outbox.MaxBytes < 1<<20 {
		bad("outbox.max_bytes", "must be at least 1048576 (one largest event), got %d", c.Outbox.MaxBytes)
	}
	if c.Delivery.Workers < 1 || c.Delivery.Workers > 16 {
		bad("delivery.workers", "must be 1 to 16, got %d", c.Delivery.Workers)
	}
	positive := map[string]time.Duration{
		"delivery.min_backoff": c.Delivery.MinBackoff, "delivery.max_backoff": c.Delivery.MaxBackoff,
		"delivery.request_timeout": c.Delivery.RequestTimeout, "delivery.shutdown_timeout": c.Delivery.ShutdownTimeout,
	}
	if c.Metrics.LogInterval < 0 {
		bad("metrics.log_interval", "must be a duration such as 1m, or 0 for no status lines")
	}
	keys := make([]string, 0, len(positive))
	for k := range positive {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if positive[k] <= 0 {
			bad(k, "must be a positive duration such as 500ms or 2s")
		}
	}
	if c.Delivery.MaxBackoff > 0 && c.Delivery.MaxBackoff < c.Delivery.MinBackoff {
		bad("delivery.max_backoff", "must not be less than delivery.min_backoff")
	}
	if c.Metrics.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			bad("metrics.listen", "must be host:port or empty, got %q", c.Metrics.Listen)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "json", "text", "auto":
	default:
		bad("log.format", "must be json, text or auto, got %q", c.Log.Format)
	}
	seen := map[string]bool{}
	for i, t := range c.Translators {
		key := fmt.Sprintf("translators[%d]", i)
		switch {
		case t.Name == "":
			bad(key+".name", "is required")
		case !validName(t.Name):
			bad(key+".name", "must be letters, digits, '.', '_' or '-' (at most 64), got %q", t.Name)
		case seen[t.Name]:
			bad(key+".name", "%q is used by another translator", t.Name)
		}
		seen[t.Name] = true
		switch {
		case t.Builtin == "" && t.Path == "":
			bad(key, "needs builtin (a translator inside callwire) or path (an executable)")
		case t.Builtin != "" && t.Path != "":
			bad(key, "set builtin or path, not both")
		case t.Builtin != "" && len(t.Args) > 0:
			bad(key+".args", "apply to path translators only")
		}
		if _, err := json.Marshal(t.Config); err != nil {
			bad(key+".config", "cannot be written as JSON: %v", err)
		}
	}
	return errs
}
