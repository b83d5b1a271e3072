package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestDefaultsAreValid(t *testing.T) {
	c, err := Load("", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c != Defaults() {
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
	c, err := Load(path, env, fs, map[string]string{"listen": "server.listen"})
	if err != nil {
		t.Fatal(err)
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
	c, err := Load("", []string{"CALLWIRE_SERVER_LISTEN=:7000"}, fs, map[string]string{"listen": "server.listen"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != ":7000" {
		t.Errorf("listen %s", c.Server.Listen)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	env := []string{"CALLWIRE_SERVER_LISTEN=nope", "CALLWIRE_DATABASE_URL=mysql://x", "CALLWIRE_LOG_LEVEL=loud", "CALLWIRE_INGEST_WRITE_TIMEOUT=-1s", "CALLWIRE_DATABASE_MAX_CONNS=0"}
	_, err := Load("", env, nil, nil)
	if err == nil {
		t.Fatal("want error")
	}
	for _, key := range []string{"server.listen", "database.url", "log.level", "ingest.write_timeout", "database.max_conns"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s: %v", key, err)
		}
	}
}

func TestBadInputs(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil, nil, nil); err == nil {
		t.Error("missing config file must be an error")
	}
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("server: [unclosed"), 0o600)
	if _, err := Load(path, nil, nil, nil); err == nil {
		t.Error("malformed yaml must be an error")
	}
	if _, err := Load("", []string{"CALLWIRE_SERVER_READ_TIMEOUT=soon"}, nil, nil); err == nil {
		t.Error("bad duration must be an error")
	}
}
