package asterisk

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig(json.RawMessage(`{"username": "callwire", "secret_env": "AMI_SECRET", "default_country": "US"}`))
	if err != nil {
		t.Fatal(err)
	}
	hp, _ := c.HostPort()
	if hp != DefaultAddress || c.Provider != "asterisk" || c.Events != DefaultEvents ||
		time.Duration(c.PingInterval) != DefaultPingInterval || time.Duration(c.ReconnectMin) != time.Second ||
		time.Duration(c.ReconnectMax) != 30*time.Second || time.Duration(c.CheckEvery) != 5*time.Minute || strings.Join(c.TrunkContexts, ",") != "from-trunk,from-pstn" {
		t.Errorf("defaults: %+v", c)
	}
}

// TestParseConfigEveryProblem: one block with many mistakes reports each of them.
func TestParseConfigEveryProblem(t *testing.T) {
	_, err := ParseConfig(json.RawMessage(`{"adress": "x", "address": "pbx:99999", "secret": "a", "secret_file": "/f",
		"trunk_channels": ["carrier"], "trunk_contexts": [], "reconnect_min": "2s", "reconnect_max": "1s",
		"tls_ca_file": "/ca.pem"}`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		"adress: unknown key; did you mean address?",
		"address: \"pbx:99999\": port",
		"username: is required",
		"secret: set only one of",
		"trunk_channels[0]:",
		"reconnect_max: must be at least reconnect_min",
		"tls: tls_ca_file and tls_server_name need tls: true",
		"default_country",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

func TestParseConfigBadDuration(t *testing.T) {
	_, err := ParseConfig(json.RawMessage(`{"username": "u", "secret": "s", "default_country": "GB", "ping_interval": "soon"}`))
	if err == nil || !strings.Contains(err.Error(), `"soon" is not a duration`) {
		t.Errorf("got %v", err)
	}
}

func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "ami-secret")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string { return map[string]string{"AMI": "from-env"}[k] }
	tests := []struct {
		name    string
		cfg     Config
		want    string
		wantErr bool
	}{
		{"inline", Config{Secret: "inline"}, "inline", false},
		{"file", Config{SecretFile: file}, "from-file", false},
		{"env", Config{SecretEnv: "AMI"}, "from-env", false},
		{"env unset", Config{SecretEnv: "NOPE"}, "", true},
		{"missing file", Config{SecretFile: filepath.Join(dir, "nope")}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.ReadSecret(env)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("got %q, %v", got, err)
			}
		})
	}
}
