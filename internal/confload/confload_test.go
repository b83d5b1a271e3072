package confload

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

type testConfig struct {
	Server   testServer   `koanf:"server"`
	Database testDatabase `koanf:"database"`
	Broker   testBroker   `koanf:"broker"`
	Plugins  []testPlugin `koanf:"plugins"`
}

type testServer struct {
	Listen  string        `koanf:"listen"`
	Timeout time.Duration `koanf:"timeout"`
	Verbose bool          `koanf:"verbose"`
}

type testDatabase struct {
	URL      string `koanf:"url"`
	Path     string `koanf:"path"`
	MaxConns int    `koanf:"max_conns"`
}

type testBroker struct {
	Redis struct {
		URL string `koanf:"url"`
	} `koanf:"redis"`
}

type testPlugin struct {
	Name   string         `koanf:"name"`
	Args   []string       `koanf:"args"`
	Config map[string]any `koanf:"config"`
}

func testDefaults() testConfig {
	return testConfig{
		Server:   testServer{Listen: ":8080", Timeout: 2 * time.Second},
		Database: testDatabase{Path: "data/db", MaxConns: 16},
	}
}

func testSpec() Spec[testConfig] {
	return Spec[testConfig]{
		Name:         "configuration",
		Defaults:     testDefaults(),
		EnvPrefix:    "CALLWIRE_",
		EnvAliases:   map[string]string{"CALLWIRE_REDIS_URL": "broker.redis.url"},
		EnvElsewhere: []string{"CALLWIRE_AGENT_"},
		Problems: func(c testConfig) []error {
			if c.Database.MaxConns < 1 {
				return []error{errors.New("database.max_conns: must be at least 1")}
			}
			return nil
		},
	}
}

func newTestLoader(t *testing.T) *Loader[testConfig] {
	t.Helper()
	l, err := New(testSpec())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUnknownKeysInTheFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string // each must appear in the error; none means the file loads
		not  []string // none of these may appear
	}{
		{name: "valid", yaml: "server:\n  listen: :9000\n  timeout: 5s\ndatabase:\n  url: postgres://h/db\nbroker:\n  redis:\n    url: redis://h\n" +
			"plugins:\n  - name: a\n    args: [-v]\n    config: {anything: {goes: [1, 2]}, here: true}\n"},
		{name: "empty file", yaml: "\n"},
		{name: "empty section", yaml: "server:\n"},
		{name: "top-level typo", yaml: "databse:\n  url: postgres://h/db\n",
			want: []string{"databse: unknown key; did you mean database?"}},
		{name: "nested typo", yaml: "server:\n  listn: :9000\n",
			want: []string{"server.listn: unknown key; did you mean server.listen?"}},
		{name: "deeper typo", yaml: "broker:\n  redis:\n    ulr: redis://h\n",
			want: []string{"broker.redis.ulr: unknown key; did you mean broker.redis.url?"}},
		{name: "case", yaml: "Database:\n  url: x\n", want: []string{"Database: unknown key; did you mean database?"}},
		{name: "nothing close", yaml: "colour: blue\n", want: []string{"colour: unknown key"}, not: []string{"did you mean"}},
		{name: "list entry", yaml: "plugins:\n  - name: a\n  - nmae: b\n    config: {nmae: free}\n",
			want: []string{"plugins[1].nmae: unknown key; did you mean plugins[1].name?"}, not: []string{"config.nmae"}},
		{name: "dotted", yaml: "database.url: postgres://h/db\n", want: []string{"database.url: unknown key; in the file, write each part"}},
		{name: "every one at once, with the other problems", yaml: "databse: {url: x}\nserver: {listn: x, verbos: true}\ncolour: blue\ndatabase: {max_conns: 0}\n",
			want: []string{"databse: unknown key", "server.listn: unknown key", "server.verbos: unknown key; did you mean server.verbose?",
				"colour: unknown key", "database.max_conns: must be at least 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := newTestLoader(t).Load(writeFile(t, tc.yaml), nil, nil, nil)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want it to load: %v", err)
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
			for _, w := range tc.not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error has %q:\n%v", w, err)
				}
			}
			var uk *UnknownKeyError
			if !errors.As(err, &uk) && strings.Contains(tc.want[0], "unknown key") {
				t.Errorf("no *UnknownKeyError in %v", err)
			}
		})
	}
}

func TestUnknownVariables(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		want    []UnknownVariable
	}{
		{name: "typo", environ: []string{"CALLWIRE_DATABSE_URL=postgres://h/db"},
			want: []UnknownVariable{{"CALLWIRE_DATABSE_URL", "CALLWIRE_DATABASE_URL"}}},
		{name: "nested key typo", environ: []string{"CALLWIRE_SERVER_LISTN=:1"},
			want: []UnknownVariable{{"CALLWIRE_SERVER_LISTN", "CALLWIRE_SERVER_LISTEN"}}},
		{name: "nothing close", environ: []string{"CALLWIRE_COLOUR=blue"}, want: []UnknownVariable{{"CALLWIRE_COLOUR", ""}}},
		{name: "lists are file only", environ: []string{"CALLWIRE_PLUGINS=x"}, want: []UnknownVariable{{"CALLWIRE_PLUGINS", ""}}},
		{name: "known ones", environ: []string{"CALLWIRE_DATABASE_URL=postgres://h/db", "CALLWIRE_BROKER_REDIS_URL=redis://h", "CALLWIRE_REDIS_URL=redis://h"}},
		{name: "another program's", environ: []string{"CALLWIRE_AGENT_CORE_URL=http://x", "CALLWIRE_AGENT_NOSUCH=1"}},
		{name: "the project's, not configuration", environ: []string{"CALLWIRE_TEST_DATABASE_URL=x", "CALLWIRE_TEST_ANYTHING=x",
			"CALLWIRE_REQUIRE_SERVICES=1", "CALLWIRE_REQUIRE_BROWSER=1", "CALLWIRE_REQUIRE_SIP=1", "CALLWIRE_REQUIRE_HAPROXY=1", "CALLWIRE_CHROMIUM=/bin/c", "CALLWIRE_BROWSER_INSTALL=0",
			"CALLWIRE_BENCH_DATABASE_URL=x", "CALLWIRE_TRANSLATOR=cookie"}},
		{name: "other names", environ: []string{"PATH=/bin", "CALLWIRE=1", "XCALLWIRE_DATABSE_URL=1", "malformed"}},
		{name: "several, sorted, once each", environ: []string{"CALLWIRE_ZZZ=1", "CALLWIRE_LOG=1", "CALLWIRE_ZZZ=2"},
			want: []UnknownVariable{{"CALLWIRE_LOG", ""}, {"CALLWIRE_ZZZ", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := newTestLoader(t).Load("", tc.environ, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("unknown variables %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUnknownVariablesComeWithTheError(t *testing.T) {
	_, got, err := newTestLoader(t).Load("", []string{"CALLWIRE_DATABSE_URL=x", "CALLWIRE_DATABASE_MAX_CONNS=0"}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "max_conns") {
		t.Errorf("error %v", err)
	}
	if len(got) != 1 || got[0].Name != "CALLWIRE_DATABSE_URL" {
		t.Errorf("unknown variables %v", got)
	}
}

func TestLayers(t *testing.T) {
	path := writeFile(t, "server:\n  listen: 127.0.0.1:9000\n  timeout: 5s\ndatabase:\n  path: /var/db\n  max_conns: 4\n"+
		"plugins:\n  - name: a\n    args: [-v]\n    config: {depth: {n: 2}}\n")
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.String("listen", "", "")
	fs.Int("conns", 0, "")
	fs.String("unmapped", "", "")
	if err := fs.Parse([]string{"--listen", "127.0.0.1:9100", "--unmapped", "x"}); err != nil {
		t.Fatal(err)
	}
	env := []string{"CALLWIRE_SERVER_TIMEOUT=3s", "CALLWIRE_DATABASE_URL=postgres://h/db", "CALLWIRE_REDIS_URL=redis://h", "CALLWIRE_SERVER_VERBOSE=true"}
	c, unknown, err := newTestLoader(t).Load(path, env, fs, map[string]string{"listen": "server.listen", "conns": "database.max_conns"})
	if err != nil || len(unknown) != 0 {
		t.Fatal(err, unknown)
	}
	want := testConfig{
		Server:   testServer{Listen: "127.0.0.1:9100", Timeout: 3 * time.Second, Verbose: true},
		Database: testDatabase{URL: "postgres://h/db", Path: "/var/db", MaxConns: 4},
		Plugins:  []testPlugin{{Name: "a", Args: []string{"-v"}, Config: map[string]any{"depth": map[string]any{"n": 2}}}},
	}
	want.Broker.Redis.URL = "redis://h"
	if !reflect.DeepEqual(c, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", c, want)
	}
	d, _, err := newTestLoader(t).Load("", nil, nil, nil)
	if err != nil || !reflect.DeepEqual(d, testDefaults()) {
		t.Errorf("nothing set: %+v %v", d, err)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		path     string
		environ  []string
		flagKeys map[string]string
		want     string
	}{
		{name: "missing file", path: filepath.Join(t.TempDir(), "missing.yaml"), want: "missing.yaml"},
		{name: "malformed file", path: writeFile(t, "server: [unclosed"), want: "configuration: read"},
		{name: "bad value", environ: []string{"CALLWIRE_SERVER_TIMEOUT=soon"}, want: "invalid configuration"},
		{name: "flag to no key", flagKeys: map[string]string{"listen": "server.lisen"}, want: "flag --listen maps to no key: server.lisen"},
		{name: "flag to a section", flagKeys: map[string]string{"db": "database"}, want: "flag --db maps to no key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := newTestLoader(t).Load(tc.path, tc.environ, nil, tc.flagKeys)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

func TestNewRefusesInconsistentSpecs(t *testing.T) {
	type untagged struct {
		Server testServer
	}
	type twice struct {
		A string `koanf:"a"`
		B string `koanf:"a"`
	}
	type clash struct {
		A struct {
			B string `koanf:"b"`
		} `koanf:"a"`
		AB string `koanf:"a_b"`
	}
	spec := testSpec()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"untagged", newErr(Spec[untagged]{Name: "c", EnvPrefix: "X_"}), "has no koanf tag"},
		{"tagged twice", newErr(Spec[twice]{Name: "c", EnvPrefix: "X_"}), "tagged twice"},
		{"one variable for two keys", newErr(Spec[clash]{Name: "c", EnvPrefix: "X_"}), "would set both"},
		{"not a struct", newErr(Spec[int]{Name: "c", EnvPrefix: "X_"}), "must be a struct"},
		{"no prefix", newErr(Spec[testConfig]{Name: "c"}), "needs a name"},
		{"alias to no key", newErr(func() Spec[testConfig] {
			s := spec
			s.EnvAliases = map[string]string{"CALLWIRE_DB": "database.uri"}
			return s
		}()), "alias CALLWIRE_DB names no key"},
		{"alias under another program's prefix", newErr(func() Spec[testConfig] {
			s := spec
			s.EnvAliases = map[string]string{"CALLWIRE_AGENT_DB": "database.url"}
			return s
		}()), "not under"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, tc.err, tc.want)
		}
	}
}

func newErr[T any](s Spec[T]) error {
	_, err := New(s)
	return err
}

func TestVariables(t *testing.T) {
	got := newTestLoader(t).Variables()
	want := []string{"CALLWIRE_BROKER_REDIS_URL", "CALLWIRE_DATABASE_MAX_CONNS", "CALLWIRE_DATABASE_PATH", "CALLWIRE_DATABASE_URL",
		"CALLWIRE_REDIS_URL", "CALLWIRE_SERVER_LISTEN", "CALLWIRE_SERVER_TIMEOUT", "CALLWIRE_SERVER_VERBOSE"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("variables %v, want %v", got, want)
	}
}

func TestNearest(t *testing.T) {
	keys := []string{"server", "database", "log", "lookup", "listen", "url", "path", "max_conns", "body_limit"}
	for _, tc := range []struct{ name, want string }{
		{"databse", "database"},
		{"dtabase", "database"},
		{"sevrer", "server"}, // a swap is one edit
		{"listn", "listen"},
		{"uri", "url"},
		{"URL", "url"},
		{"max_con", "max_conns"},
		{"bodylimit", "body_limit"},
		{"lgo", "log"},
		{"x", ""},
		{"port", ""},
		{"colour", ""},
		{"db", ""},
		{"body", ""},
	} {
		if got := nearest(tc.name, keys); got != tc.want {
			t.Errorf("nearest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestUnknownVariableWarn(t *testing.T) {
	for _, tc := range []struct {
		u    UnknownVariable
		want []string
		not  string
	}{
		{UnknownVariable{"CALLWIRE_DATABSE_URL", "CALLWIRE_DATABASE_URL"},
			[]string{`"level":"WARN"`, `"variable":"CALLWIRE_DATABSE_URL"`, `"did_you_mean":"CALLWIRE_DATABASE_URL"`}, ""},
		{UnknownVariable{"CALLWIRE_COLOUR", ""}, []string{`"variable":"CALLWIRE_COLOUR"`}, "did_you_mean"},
	} {
		var b bytes.Buffer
		tc.u.Warn(slog.New(slog.NewJSONHandler(&b, nil)))
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("log line lacks %s: %s", w, b.String())
			}
		}
		if tc.not != "" && strings.Contains(b.String(), tc.not) {
			t.Errorf("log line has %s: %s", tc.not, b.String())
		}
	}
	if s := (UnknownVariable{"CALLWIRE_DATABSE_URL", "CALLWIRE_DATABASE_URL"}).String(); s !=
		"unknown environment variable CALLWIRE_DATABSE_URL ignored; did you mean CALLWIRE_DATABASE_URL?" {
		t.Errorf("String: %s", s)
	}
}
