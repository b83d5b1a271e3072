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
	if c.Manager.String() != DefaultAddress || c.Provider != "asterisk" || c.Events != DefaultEvents ||
		time.Duration(c.PingInterval) != DefaultPingInterval || time.Duration(c.ReconnectMin) != time.Second ||
		time.Duration(c.ReconnectMax) != 30*time.Second || time.Duration(c.CheckEvery) != 5*time.Minute || strings.Join(c.TrunkContexts, ",") != "from-trunk,from-pstn" {
		t.Errorf("defaults: %+v", c)
	}
}

// TestParseConfigAddress: every form docs/asterisk.md allows for address is parsed once here,
// with port 5038 when it names none, and what the AMI client could not dial is refused here.
func TestParseConfigAddress(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "127.0.0.1:5038"},
		{"10.0.0.20", "10.0.0.20:5038"},
		{"10.0.0.20:5039", "10.0.0.20:5039"},
		{"pbx.clinic.example", "pbx.clinic.example:5038"},
		{"pbx.clinic.example:15038", "pbx.clinic.example:15038"},
		{"[2001:db8::20]", "[2001:db8::20]:5038"},
		{"[2001:db8::20]:5039", "[2001:db8::20]:5039"},
		{"2001:db8::20", "[2001:db8::20]:5038"},
		{"tcp://10.0.0.20:5038", `error: address: "tcp://10.0.0.20:5038" is a URL`},
		{"10.0.0.20:0", `error: address: "10.0.0.20:0": port 0`},
		{"10.0.0.20:ami", `error: address: "10.0.0.20:ami": port "ami"`},
		{"asterisk_1", "asterisk_1:5038"},
		{"pbx$1", `error: address: "pbx$1": "pbx$1" is neither an IP address nor a host name`},
	}
	for _, tc := range cases {
		raw, _ := json.Marshal(map[string]any{"address": tc.in, "username": "callwire", "secret": "s", "default_country": "US"})
		c, err := ParseConfig(raw)
		if w, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
			if err == nil || !strings.HasPrefix(err.Error(), w) {
				t.Errorf("%q: error %v, want one starting %q", tc.in, err, w)
			}
			continue
		}
		if err != nil || c.Manager.String() != tc.want {
			t.Errorf("%q: %v, %v; want %s", tc.in, c.Manager, err, tc.want)
		}
	}
	c, err := ParseConfig(json.RawMessage(`{"address": "pbx.clinic.example:5039", "tls": true, "username": "u", "secret": "s", "default_country": "US"}`))
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := c.TLSConfig(); err != nil || tc.ServerName != "pbx.clinic.example" {
		t.Errorf("TLS server name from the address: %v, %v", tc, err)
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
