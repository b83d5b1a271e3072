package ringcentral

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsFromTheEnvironment: with neither a key nor its _file, the credentials come from
// RINGCENTRAL_CLIENT_SECRET and RINGCENTRAL_JWT (as a service unit's environment sets them);
// when one of those is empty, the configuration is refused naming the variable, and a blank
// secret file is refused naming the file.
func TestSecretsFromTheEnvironment(t *testing.T) {
	const base = `"client_id":"id","cursor_file":"c","default_country":"US"`
	t.Run("set", func(t *testing.T) {
		t.Setenv(EnvClientSecret, "env-client-secret")
		t.Setenv(EnvJWT, " env.jwt.value\n")
		c, err := ParseConfig(json.RawMessage(`{` + base + `}`))
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.LoadSecrets()
		if err != nil || s.ClientSecret != "env-client-secret" || s.JWT != "env.jwt.value" {
			t.Fatalf("LoadSecrets = %q, %q, %v", s.ClientSecret, s.JWT, err)
		}
	})
	t.Run("unset", func(t *testing.T) {
		t.Setenv(EnvClientSecret, "")
		t.Setenv(EnvJWT, "")
		_, err := ParseConfig(json.RawMessage(`{` + base + `}`))
		for _, want := range []string{"client_secret: is required: set client_secret, client_secret_file, or the environment variable " + EnvClientSecret,
			"jwt: is required: set jwt, jwt_file, or the environment variable " + EnvJWT} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v lacks %q", err, want)
			}
		}
	})
	t.Run("blank file", func(t *testing.T) {
		t.Setenv(EnvClientSecret, "")
		t.Setenv(EnvJWT, "")
		blank := filepath.Join(t.TempDir(), "jwt")
		if err := os.WriteFile(blank, []byte("  \n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := ParseConfig(json.RawMessage(`{` + base + `,"client_secret":"s","jwt_file":"` + blank + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.LoadSecrets(); err == nil || !strings.Contains(err.Error(), "jwt: is blank") {
			t.Errorf("LoadSecrets: %v, want the blank jwt_file refused", err)
		}
	})
}
