// Package config loads callwire's configuration: built-in defaults, then a YAML file, then
// CALLWIRE_* environment variables, then command-line flags, each layer overriding the one
// before, into one typed Config. Nothing here is global; the loaded Config is passed down.
//
// The Config's koanf tags are the list of keys. A key in the file that the Config does not have
// is an error naming it and the nearest known key ("databse: unknown key; did you mean
// database?"); a CALLWIRE_ variable that sets nothing is returned by Load as a warning. The
// loading itself is shared with the agent (internal/confload).
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/callwire/callwire/internal/confload"
)

// EnvPrefix starts every environment variable callwire reads. The rest of the name is the key
// in upper case with each '.' written as '_': CALLWIRE_DATABASE_URL sets database.url,
// CALLWIRE_SERVER_BODY_LIMIT sets server.body_limit and CALLWIRE_BROKER_REDIS_URL sets
// broker.redis.url (also CALLWIRE_REDIS_URL). A list of URLs, such as broker.redis.cluster_urls,
// is written in its variable with commas between them.
const EnvPrefix = "CALLWIRE_"

// Config is the whole configuration.
type Config struct {
	Server    Server    `koanf:"server"`
	Database  Database  `koanf:"database"`
	Ingest    Ingest    `koanf:"ingest"`
	Lookup    Lookup    `koanf:"lookup"`
	Broker    Broker    `koanf:"broker"`
	Popups    Popups    `koanf:"popups"`
	Retention Retention `koanf:"retention"`
	Log       Log       `koanf:"log"`
}

// Lookup tunes the caller lookup asked of each organization's client system.
type Lookup struct {
	// Timeout bounds one lookup for an organization that set none of its own. Default 800ms: the
	// phone is ringing.
	Timeout time.Duration `koanf:"timeout"`
	// CacheTTL is how long a match is remembered per organization and number. Default 60s.
	CacheTTL time.Duration `koanf:"cache_ttl"`
	// MissTTL is how long "no match" is remembered. Default 15s.
	MissTTL time.Duration `koanf:"miss_ttl"`
	// CacheSize bounds the remembered answers across all organizations. Default 10000.
	CacheSize int `koanf:"cache_size"`
	// BreakerFailures is how many lookups in a row must fail for an organization's breaker to
	// open. Default 5.
	BreakerFailures int `koanf:"breaker_failures"`
	// BreakerOpen is how long an open breaker skips the lookup before trying again. Default 30s.
	BreakerOpen time.Duration `koanf:"breaker_open"`
}

// Broker chooses where popups travel.
type Broker struct {
	Redis Redis `koanf:"redis"`
}

// Redis is the popup broker shared by every replica.
type Redis struct {
	// URL is a redis:// or rediss:// URL; empty means the in-process broker, which reaches only
	// the workstations connected to this process. Also CALLWIRE_REDIS_URL.
	URL string `koanf:"url"`
	// ClusterURLs are seed nodes of a Redis Cluster (redis:// or rediss:// URLs, database 0, one
	// user and password for all): popups travel by sharded pub/sub on it. At least one must
	// answer at start; the client learns the other nodes from it. Set either URL or ClusterURLs,
	// not both. Also CALLWIRE_BROKER_REDIS_CLUSTER_URLS, the URLs separated by commas.
	ClusterURLs URLList `koanf:"cluster_urls"`
}

// URLList is a list of URLs: in the file, a YAML list (or one string); in a variable, the URLs
// separated by commas. Blanks around each are dropped.
type URLList []string

// UnmarshalText reads a comma-separated list; an empty text is an empty list.
func (l *URLList) UnmarshalText(text []byte) error {
	*l = nil
	for u := range strings.SplitSeq(string(text), ",") {
		if u = strings.TrimSpace(u); u != "" {
			*l = append(*l, u)
		}
	}
	return nil
}

// Popups tunes the workstations' event stream.
type Popups struct {
	// Heartbeat is how often an idle stream sends a comment line, so that proxies and browsers
	// keep it open. Default 15s.
	Heartbeat time.Duration `koanf:"heartbeat"`
}

// Server configures the HTTP listener.
type Server struct {
	// Listen is the address to serve on, host:port. Default ":8080".
	Listen string `koanf:"listen"`
	// BodyLimit is the largest request body accepted, in bytes; larger ones get 413. Default
	// 1 MiB: fifty events with sizeable raw SIP messages fit.
	BodyLimit int `koanf:"body_limit"`
	// ReadTimeout bounds reading a request; WriteTimeout writing a response; IdleTimeout a
	// kept-alive connection between requests.
	ReadTimeout  time.Duration `koanf:"read_timeout"`
	WriteTimeout time.Duration `koanf:"write_timeout"`
	IdleTimeout  time.Duration `koanf:"idle_timeout"`
	// ShutdownTimeout is how long in-flight requests get to finish on shutdown.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// RetryAfter is the pause a 503 asks reporters to take, rounded up to whole seconds.
	RetryAfter time.Duration `koanf:"retry_after"`
	// MemoryLimit is the soft limit, in bytes, on the memory the server manages: its runtime's
	// heap, stacks and buffers, and the embedded store's page caches (not the program's own
	// pages). Near it, garbage is collected sooner and freed memory is returned to the system.
	// 0 means no limit. The GOMEMLIMIT variable, when set, takes precedence. Default 32 MiB.
	MemoryLimit int64 `koanf:"memory_limit"`
}

// Database chooses and tunes the store.
type Database struct {
	// URL is a PostgreSQL connection URL (postgres://...). Empty means the embedded store.
	URL string `koanf:"url"`
	// ReadURL is a PostgreSQL URL of a streaming replica of URL's database. When set, the call
	// history, a call with its events, the CSV export and the to-call-back list are read there,
	// and may lag the writes; everything else stays on URL. Empty means every read goes to URL.
	// Requires URL.
	ReadURL string `koanf:"read_url"`
	// ReadMaxLag bounds how far behind the primary the replica of ReadURL may be and still serve
	// reads: while its replay lag is over it, those reads go to URL and /readyz names the replica
	// degraded. 0 does not measure the lag. Default 30s.
	ReadMaxLag time.Duration `koanf:"read_max_lag"`
	// Path is the embedded store's file, used when URL is empty. Default "data/callwire.db".
	Path string `koanf:"path"`
	// MaxConns is the PostgreSQL pool size. Default 16.
	MaxConns int `koanf:"max_conns"`
	// AcquireTimeout is how long a request waits for a pooled connection, or for a place to
	// write, before it is answered 503. Default 2s.
	AcquireTimeout time.Duration `koanf:"acquire_timeout"`
	// AutoMigrate applies pending migrations when a command opens the store. Default true.
	AutoMigrate bool `koanf:"auto_migrate"`
}

// Ingest tunes the write pipeline.
type Ingest struct {
	// PublishTimeout bounds publishing a popup. Default 500ms.
	PublishTimeout time.Duration `koanf:"publish_timeout"`
	// WriteTimeout bounds the store write; past it the request answers 503. Default 10s.
	WriteTimeout time.Duration `koanf:"write_timeout"`
}

// Retention tunes the sweeper that removes the calls of organizations with a retention
// (callwire orgs update --retention-days). One batch is one store transaction; on the embedded
// store it holds the single writer, so batch_size bounds how long a write can wait behind it.
type Retention struct {
	// Interval is the time from the end of one sweep to the start of the next. Default 10m.
	Interval time.Duration `koanf:"interval"`
	// BatchSize is the most calls (with their events) one batch removes, 1 to 10000. Default
	// 100.
	BatchSize int `koanf:"batch_size"`
	// BatchPause is the wait between two batches. Default 100ms.
	BatchPause time.Duration `koanf:"batch_pause"`
	// MaxBatches is the most batches one sweep runs, over all organizations; what is left waits
	// for the next sweep. Default 1000.
	MaxBatches int `koanf:"max_batches"`
}

// MaxRetentionBatchSize is the largest retention.batch_size accepted.
const MaxRetentionBatchSize = 10000

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `koanf:"level"`
	// Format is json, text, or auto (text on a terminal, json otherwise). Default auto.
	Format string `koanf:"format"`
}

// MinMemoryLimit is the smallest server.memory_limit accepted other than 0: below it the
// collector would run almost without pause.
const MinMemoryLimit = 8 << 20

// Defaults returns the configuration used when nothing is set.
func Defaults() Config {
	return Config{
		Server: Server{
			Listen:          ":8080",
			BodyLimit:       1 << 20,
			ReadTimeout:     10 * time.Second,
			WriteTimeout:    15 * time.Second,
			IdleTimeout:     2 * time.Minute,
			ShutdownTimeout: 15 * time.Second,
			RetryAfter:      2 * time.Second,
			MemoryLimit:     32 << 20,
		},
		Database: Database{
			Path:           "data/callwire.db",
			MaxConns:       16,
			AcquireTimeout: 2 * time.Second,
			ReadMaxLag:     30 * time.Second,
			AutoMigrate:    true,
		},
		Ingest: Ingest{
			PublishTimeout: 500 * time.Millisecond,
			WriteTimeout:   10 * time.Second,
		},
		Lookup: Lookup{
			Timeout:         800 * time.Millisecond,
			CacheTTL:        time.Minute,
			MissTTL:         15 * time.Second,
			CacheSize:       10000,
			BreakerFailures: 5,
			BreakerOpen:     30 * time.Second,
		},
		Popups: Popups{Heartbeat: 15 * time.Second},
		Retention: Retention{
			Interval:   10 * time.Minute,
			BatchSize:  100,
			BatchPause: 100 * time.Millisecond,
			MaxBatches: 1000,
		},
		Log: Log{Level: "info", Format: "auto"},
	}
}

// UnknownVariable is a CALLWIRE_ variable that sets nothing, most likely a misspelt one: Load
// returns them for the caller to log as warnings (UnknownVariable.Warn).
type UnknownVariable = confload.UnknownVariable

// UnknownKeyError is a key in the configuration file that the Config does not have; Load's error
// wraps one for each.
type UnknownKeyError = confload.UnknownKeyError

// spec describes the Config to the loader shared with the agent: the koanf tags of Config are
// the keys, and each key outside lists has a variable (server.body_limit is
// CALLWIRE_SERVER_BODY_LIMIT).
func spec() confload.Spec[Config] {
	return confload.Spec[Config]{
		Name:      "configuration",
		Defaults:  Defaults(),
		EnvPrefix: EnvPrefix,
		// The old spelling of broker.redis.url's variable, kept.
		EnvAliases: map[string]string{"CALLWIRE_REDIS_URL": "broker.redis.url"},
		// The agent's (plugins/agent) variables: the agent reads them, not the core.
		EnvElsewhere: []string{AgentEnvPrefix},
		Problems:     Config.problems,
	}
}

// AgentEnvPrefix starts the variables of `callwire agent`'s configuration, which Load neither
// reads nor reports.
const AgentEnvPrefix = "CALLWIRE_AGENT_"

// Load builds the Config: defaults, then the YAML file at path (skipped when path is empty),
// then CALLWIRE_* environment variables from environ (os.Environ() in production), then the
// flags of fs that were set on the command line (nil for none). A flag maps to a key through
// flagKeys, for example "listen" → "server.listen"; unmapped flags are ignored.
//
// The error lists every problem at once: each key of the file the Config does not have (with
// the nearest known key when one is close), and every invalid value (see Validate). The
// CALLWIRE_* variables that set nothing are returned, even with an error, for the caller to log
// as warnings; the agent's CALLWIRE_AGENT_* variables and the project's variables that are not
// configuration (such as CALLWIRE_TEST_DATABASE_URL) are never among them.
func Load(path string, environ []string, fs *pflag.FlagSet, flagKeys map[string]string) (Config, []UnknownVariable, error) {
	l, err := confload.New(spec())
	if err != nil {
		return Config{}, nil, err
	}
	return l.Load(path, environ, fs, flagKeys)
}

// Variables returns, sorted, every environment variable that sets a key of the Config.
func Variables() []string {
	l, err := confload.New(spec())
	if err != nil {
		return nil
	}
	return l.Variables()
}

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	if errs := c.problems(); len(errs) > 0 {
		return fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
	}
	return nil
}

// problems lists what is wrong with c, each naming its key.
func (c Config) problems() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		bad("server.listen", "must be host:port, got %q", c.Server.Listen)
	}
	if c.Server.BodyLimit < 4096 {
		bad("server.body_limit", "must be at least 4096 bytes, got %d", c.Server.BodyLimit)
	}
	if l := c.Server.MemoryLimit; l != 0 && l < MinMemoryLimit {
		bad("server.memory_limit", "must be 0 (no limit) or at least %d bytes (8 MiB), got %d", MinMemoryLimit, l)
	}
	positive := map[string]time.Duration{
		"server.read_timeout": c.Server.ReadTimeout, "server.write_timeout": c.Server.WriteTimeout,
		"server.idle_timeout": c.Server.IdleTimeout, "server.shutdown_timeout": c.Server.ShutdownTimeout,
		"server.retry_after": c.Server.RetryAfter, "database.acquire_timeout": c.Database.AcquireTimeout,
		"ingest.publish_timeout": c.Ingest.PublishTimeout, "ingest.write_timeout": c.Ingest.WriteTimeout,
		"lookup.timeout": c.Lookup.Timeout, "lookup.cache_ttl": c.Lookup.CacheTTL, "lookup.miss_ttl": c.Lookup.MissTTL,
		"lookup.breaker_open": c.Lookup.BreakerOpen, "popups.heartbeat": c.Popups.Heartbeat,
		"retention.interval": c.Retention.Interval, "retention.batch_pause": c.Retention.BatchPause,
	}
	for _, key := range sortedKeys(positive) {
		if positive[key] <= 0 {
			bad(key, "must be a positive duration such as 500ms or 2s")
		}
	}
	if c.Database.URL != "" {
		u, err := url.Parse(c.Database.URL)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			bad("database.url", "must be a postgres:// or postgresql:// URL")
		}
	} else if c.Database.Path == "" {
		bad("database.path", "must name a file when database.url is empty")
	}
	if c.Database.ReadMaxLag < 0 {
		bad("database.read_max_lag", "must be 0 (not measured) or a positive duration such as 30s")
	}
	if c.Database.ReadURL != "" {
		u, err := url.Parse(c.Database.ReadURL)
		switch {
		case err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql"):
			bad("database.read_url", "must be a postgres:// or postgresql:// URL")
		case c.Database.URL == "":
			bad("database.read_url", "needs database.url: it names a replica of that database")
		}
	}
	if c.Broker.Redis.URL != "" {
		u, err := url.Parse(c.Broker.Redis.URL)
		if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			bad("broker.redis.url", "must be a redis:// or rediss:// URL")
		}
		if len(c.Broker.Redis.ClusterURLs) > 0 {
			bad("broker.redis.cluster_urls", "set either broker.redis.url (one Redis server) or broker.redis.cluster_urls (a Redis Cluster), not both")
		}
	}
	for i, raw := range c.Broker.Redis.ClusterURLs {
		// The URL itself is not repeated: it may carry a password.
		u, err := url.Parse(strings.TrimSpace(raw))
		switch {
		case err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "":
			bad("broker.redis.cluster_urls", "entry %d must be a redis:// or rediss:// URL with a host", i+1)
		case u.Path != "" && u.Path != "/" && u.Path != "/0":
			bad("broker.redis.cluster_urls", "entry %d names a database; a Redis Cluster has only database 0", i+1)
		case i > 0:
			first, _ := url.Parse(strings.TrimSpace(c.Broker.Redis.ClusterURLs[0]))
			if first != nil && (first.Scheme != u.Scheme || first.User.String() != u.User.String()) {
				bad("broker.redis.cluster_urls", "entry %d must carry the same scheme, user and password as entry 1", i+1)
			}
		}
	}
	if c.Lookup.Timeout > 10*time.Second {
		bad("lookup.timeout", "must be at most 10s: the phone is ringing")
	}
	if c.Lookup.CacheSize < 1 {
		bad("lookup.cache_size", "must be at least 1, got %d", c.Lookup.CacheSize)
	}
	if c.Lookup.BreakerFailures < 1 {
		bad("lookup.breaker_failures", "must be at least 1, got %d", c.Lookup.BreakerFailures)
	}
	if n := c.Retention.BatchSize; n < 1 || n > MaxRetentionBatchSize {
		bad("retention.batch_size", "must be from 1 to %d, got %d", MaxRetentionBatchSize, n)
	}
	if c.Retention.MaxBatches < 1 {
		bad("retention.max_batches", "must be at least 1, got %d", c.Retention.MaxBatches)
	}
	if c.Database.MaxConns < 1 {
		bad("database.max_conns", "must be at least 1, got %d", c.Database.MaxConns)
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
	return errs
}

func sortedKeys(m map[string]time.Duration) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
