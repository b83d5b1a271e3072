package secret

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withNewline := write("nl", "s3cret\r\n")
	inner := write("inner", " two words \n")
	empty := write("empty", "\n")
	env := map[string]string{"SET": "from-env", "EMPTY": ""}
	getenv := func(k string) string { return env[k] }

	tests := []struct {
		name    string
		src     Source
		want    string
		wantErr string // a part of the error; "" for none
	}{
		{"value", Source{Key: "secret", Value: "v", File: withNewline, Env: "SET"}, "v", ""},
		{"file, its line break dropped", Source{Key: "secret", File: withNewline, Env: "SET"}, "s3cret", ""},
		{"file, inner and leading spaces kept", Source{Key: "secret", File: inner}, " two words ", ""},
		{"environment", Source{Key: "secret", Env: "SET"}, "from-env", ""},
		{"missing file", Source{Key: "jwt", File: filepath.Join(dir, "absent")}, "", "jwt_file: open "},
		{"empty file", Source{Key: "jwt", File: empty}, "", "jwt_file: " + empty + " is empty"},
		{"empty variable", Source{Key: "jwt", Env: "EMPTY"}, "", "jwt: the environment variable EMPTY is empty or not set"},
		{"unset variable", Source{Key: "jwt", Env: "UNSET"}, "", "UNSET is empty or not set"},
		{"nothing", Source{Key: "jwt"}, "", "jwt: not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.src.Read(getenv)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Read = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Read = %q, %v; want an error containing %q", got, err, tt.wantErr)
			}
			if got != "" {
				t.Errorf("a secret %q returned with an error", got)
			}
		})
	}
	if _, err := (Source{Key: "k"}).Read(getenv); !errors.Is(err, ErrNotSet) {
		t.Errorf("nothing set: %v, want ErrNotSet", err)
	}
}
