package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestDefaultsAreValid(t *testing.T) {
	c, _, err := Load("", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Defaults()) {
		t.Errorf("loaded %+v, want defaults %+v", c, Defaults())
	}
}

func TestLayers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "callwire.yaml")
	yaml := "server:\n  listen: 127.0.0.1:9000\n  retry_after: 5s\ndatabase:\n  path: /var/lib/callwire/db\n  max_conns: 4\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CALLWIRE_DATABASE_URL=postgres://u@h/db", "CALLWIRE_SERVER_RETRY_AFTER=3s", "CALLWIRE_LOOKUP_TIMEOUT=250ms", "CALLWIRE_REDIS_URL=redis://127.0.0.1:6379/0", "CALLWIRE_POPUPS_HEARTBEAT=5s", "OTHER=1", "CALLWIRE_NOPE=1"}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.String("listen", "", "")
	fs.String("unmapped", "", "")
	if err := fs.Parse([]string{"--listen", "127.0.0.1:9100", "--unmapped", "x"}); err != nil {
		t.Fatal(err)
	}
	c, unknown, err := Load(path, env, fs, map[string]string{"listen": "server.listen"})
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != 1 || unknown[0].Name != "CALLWIRE_NOPE" {
		t.Errorf("unknown variables %v, want CALLWIRE_NOPE alone", unknown)
	}
	if c.Server.Listen != "127.0.0.1:9100" {
		t.Errorf("flag must win: %s", c.Server.Listen)
	}
	if c.Server.RetryAfter != 3*time.Second || c.Lookup.Timeout != 250*time.Millisecond || c.Broker.Redis.URL != "redis://127.0.0.1:6379/0" || c.Popups.Heartbeat != 5*time.Second {
		t.Errorf("env must beat file: %v %v", c.Server.RetryAfter, c.Lookup.Timeout)
	}
	if c.Database.URL != "postgres://u@h/db" || c.Database.MaxConns != 4 || c.Database.Path != "/var/lib/callwire/db" {
		t.Errorf("database %+v", c.Database)
	}
	if c.Server.BodyLimit != Defaults().Server.BodyLimit {
		t.Errorf("unset keys keep defaults")
	}
}

func TestUnsetFlagDoesNotOverride(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.String("listen", ":1", "")
	c, _, err := Load("", []string{"CALLWIRE_SERVER_LISTEN=:7000"}, fs, map[string]string{"listen": "server.listen"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != ":7000" {
		t.Errorf("listen %s", c.Server.Listen)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	env := []string{"CALLWIRE_SERVER_LISTEN=nope", "CALLWIRE_DATABASE_URL=mysql://x", "CALLWIRE_LOG_LEVEL=loud", "CALLWIRE_INGEST_WRITE_TIMEOUT=-1s", "CALLWIRE_DATABASE_MAX_CONNS=0",
		"CALLWIRE_RETENTION_INTERVAL=0s", "CALLWIRE_RETENTION_BATCH_SIZE=10001", "CALLWIRE_RETENTION_BATCH_PAUSE=-1ms", "CALLWIRE_RETENTION_MAX_BATCHES=0"}
	_, _, err := Load("", env, nil, nil)
	if err == nil {
		t.Fatal("want error")
	}
	for _, key := range []string{"server.listen", "database.url", "log.level", "ingest.write_timeout", "database.max_conns",
		"retention.interval", "retention.batch_size", "retention.batch_pause", "retention.max_batches"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s: %v", key, err)
		}
	}
}

func TestBadInputs(t *testing.T) {
	if _, _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil, nil, nil); err == nil {
		t.Error("missing config file must be an error")
	}
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("server: [unclosed"), 0o600)
	if _, _, err := Load(path, nil, nil, nil); err == nil {
		t.Error("malformed yaml must be an error")
	}
	if _, _, err := Load("", []string{"CALLWIRE_SERVER_READ_TIMEOUT=soon"}, nil, nil); err == nil {
		t.Error("bad duration must be an error")
	}
}

func TestUnknownKeysAreErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string // each in the error; none: the file loads
	}{
		{name: "the sample file", yaml: "server:\n  listen: :9000\ndatabase:\n  url: postgres://u@h/db\nbroker:\n  redis:\n    url: redis://h:6379/0\nlog:\n  level: debug\n"},
		{name: "section typo", yaml: "databse:\n  url: postgres://u@h/db\n", want: []string{"databse: unknown key; did you mean database?"}},
		{name: "nested typo", yaml: "server:\n  listn: :9000\n", want: []string{"server.listn: unknown key; did you mean server.listen?"}},
		{name: "broker typo", yaml: "broker:\n  redis:\n    ulr: redis://h\n", want: []string{"broker.redis.ulr: unknown key; did you mean broker.redis.url?"}},
		{name: "memory limit too small", yaml: "server:\n  memory_limit: 1048576\n",
			want: []string{"server.memory_limit: must be 0 (no limit) or at least 8388608 bytes (8 MiB), got 1048576"}},
		{name: "no memory limit", yaml: "server:\n  memory_limit: 0\n"},
		{name: "every unknown key, with the invalid values", yaml: "databse: {url: x}\nserver: {listn: x, body_limit: 1}\nlookup: {cache_tll: 1m}\nnonsense: 1\n",
			want: []string{"databse: unknown key; did you mean database?", "server.listn: unknown key; did you mean server.listen?",
				"lookup.cache_tll: unknown key; did you mean lookup.cache_ttl?", "nonsense: unknown key", "server.body_limit: must be at least 4096"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "callwire.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := Load(path, nil, nil, nil)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestUnknownVariablesAreWarnings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		want    []UnknownVariable
	}{
		{name: "typo", environ: []string{"CALLWIRE_DATABSE_URL=postgres://u@h/db"},
			want: []UnknownVariable{{Name: "CALLWIRE_DATABSE_URL", Suggestion: "CALLWIRE_DATABASE_URL"}}},
		{name: "key typo", environ: []string{"CALLWIRE_SERVER_LISTN=:9000", "CALLWIRE_LOOKUP_CACHE_TLL=1m"},
			want: []UnknownVariable{{Name: "CALLWIRE_LOOKUP_CACHE_TLL", Suggestion: "CALLWIRE_LOOKUP_CACHE_TTL"},
				{Name: "CALLWIRE_SERVER_LISTN", Suggestion: "CALLWIRE_SERVER_LISTEN"}}},
		{name: "the agent's variables", environ: []string{"CALLWIRE_AGENT_CORE_URL=https://x", "CALLWIRE_AGENT_OUTBOX_PATH=/x"}},
		{name: "the tests' and tools' variables", environ: []string{"CALLWIRE_TEST_DATABASE_URL=postgres://x", "CALLWIRE_TEST_REDIS_URL=redis://x",
			"CALLWIRE_REQUIRE_SERVICES=1", "CALLWIRE_REQUIRE_BROWSER=1", "CALLWIRE_CHROMIUM=/usr/bin/chromium", "CALLWIRE_BROWSER_INSTALL=0",
			"CALLWIRE_ARTIFACTS_DIR=/tmp", "CALLWIRE_BENCH_DATABASE_URL=postgres://x", "CALLWIRE_TRANSLATOR=cookie"}},
		{name: "every key's variable, and the alias", environ: func() []string {
			var env []string
			for _, v := range Variables() {
				env = append(env, v+"=1") // invalid values: the variables are still known
			}
			return env
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got, _ := Load("", tc.environ, nil, nil)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("unknown variables %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVariablesAreDocumented keeps docs/configuration.md's tables in step with the Config.
func TestVariablesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	vars := Variables()
	if len(vars) < 20 {
		t.Fatalf("variables %v", vars)
	}
	for _, v := range vars {
		if !strings.Contains(string(doc), "`"+v+"`") {
			t.Errorf("docs/configuration.md does not mention %s", v)
		}
	}
}

// TestRedisClusterURLs reads broker.redis.cluster_urls from the file and from its variable, and
// refuses what cannot be a cluster's seed list, without repeating a URL (it may carry a
// password).
func TestRedisClusterURLs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		yaml    string
		environ []string
		want    []string // the URLs, when valid
		errs    []string // else the problems
	}{
		{name: "yaml list", yaml: "broker:\n  redis:\n    cluster_urls:\n      - redis://10.0.0.1:6379\n      - redis://10.0.0.2:6379/0\n",
			want: []string{"redis://10.0.0.1:6379", "redis://10.0.0.2:6379/0"}},
		{name: "variable", environ: []string{"CALLWIRE_BROKER_REDIS_CLUSTER_URLS=rediss://u:p@a:6379, rediss://u:p@b:6379,"},
			want: []string{"rediss://u:p@a:6379", "rediss://u:p@b:6379"}},
		{name: "the variable overrides the file", yaml: "broker:\n  redis:\n    cluster_urls: [redis://a:1]\n",
			environ: []string{"CALLWIRE_BROKER_REDIS_CLUSTER_URLS=redis://b:2"}, want: []string{"redis://b:2"}},
		{name: "with a server url", environ: []string{"CALLWIRE_REDIS_URL=redis://h:6379", "CALLWIRE_BROKER_REDIS_CLUSTER_URLS=redis://a:1"},
			errs: []string{"broker.redis.cluster_urls: set either broker.redis.url (one Redis server) or broker.redis.cluster_urls (a Redis Cluster), not both"}},
		{name: "bad entries", environ: []string{"CALLWIRE_BROKER_REDIS_CLUSTER_URLS=redis://u:secret@a:1,http://b:2,redis://c:3/2,redis://other:pw@d:4,redis://"},
			errs: []string{"entry 2 must be a redis:// or rediss:// URL with a host", "entry 3 names a database; a Redis Cluster has only database 0",
				"entry 4 must carry the same scheme, user and password as entry 1", "entry 5 must be a redis:// or rediss:// URL with a host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.yaml != "" {
				path = filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
				if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, _, err := Load(path, tc.environ, nil, nil)
			if tc.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual([]string(c.Broker.Redis.ClusterURLs), tc.want) {
					t.Errorf("cluster_urls %q, want %q", c.Broker.Redis.ClusterURLs, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q repeats a password", err)
			}
		})
	}
}

// TestReadURL reads database.read_url and refuses one that is not PostgreSQL's or has no primary;
// and database.read_max_lag, which may not be negative.
func TestReadURL(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		readURL string        // loaded, when it loads
		maxLag  time.Duration // loaded, when it loads: 0 means the default 30s, -1 means 0
		want    string        // in the error; "" means it loads
	}{
		{name: "a replica of the primary", environ: []string{"CALLWIRE_DATABASE_URL=postgres://u@primary/db",
			"CALLWIRE_DATABASE_READ_URL=postgres://u@replica/db"}, readURL: "postgres://u@replica/db"},
		{name: "unset", environ: []string{"CALLWIRE_DATABASE_URL=postgres://u@primary/db"}},
		{name: "not postgres", environ: []string{"CALLWIRE_DATABASE_URL=postgres://u@primary/db",
			"CALLWIRE_DATABASE_READ_URL=mysql://u@replica/db"}, want: "database.read_url: must be a postgres://"},
		{name: "without a primary", environ: []string{"CALLWIRE_DATABASE_READ_URL=postgres://u@replica/db"},
			want: "database.read_url: needs database.url"},
		{name: "a lag bound", environ: []string{"CALLWIRE_DATABASE_URL=postgres://u@primary/db",
			"CALLWIRE_DATABASE_READ_URL=postgres://u@replica/db", "CALLWIRE_DATABASE_READ_MAX_LAG=5s"},
			readURL: "postgres://u@replica/db", maxLag: 5 * time.Second},
		{name: "lag not measured", environ: []string{"CALLWIRE_DATABASE_URL=postgres://u@primary/db",
			"CALLWIRE_DATABASE_READ_URL=postgres://u@replica/db", "CALLWIRE_DATABASE_READ_MAX_LAG=0s"},
			readURL: "postgres://u@replica/db", maxLag: -1},
		{name: "a negative lag bound", environ: []string{"CALLWIRE_DATABASE_URL=postgres://u@primary/db",
			"CALLWIRE_DATABASE_READ_MAX_LAG=-1s"}, want: "database.read_max_lag: must be 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, unknown, err := Load("", tc.environ, nil, nil)
			if len(unknown) > 0 {
				t.Errorf("unknown variables %v", unknown)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Database.ReadURL != tc.readURL {
					t.Errorf("read url %q, want %q", c.Database.ReadURL, tc.readURL)
				}
				want := tc.maxLag
				switch want {
				case 0:
					want = 30 * time.Second
				case -1:
					want = 0
				}
				if c.Database.ReadMaxLag != want {
					t.Errorf("read max lag %v, want %v", c.Database.ReadMaxLag, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
