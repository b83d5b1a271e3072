// Package secret reads a translator's credentials from where its configuration says they are:
// written in the configuration itself, in a file, or in an environment variable. Keeping a
// secret out of the configuration file (a file readable only by the agent's user, or the
// environment of its service unit) is what a clinic's IT person expects; every built-in
// translator reads its secrets through this package, so they behave alike.
package secret

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Source is where one secret is, as a translator's configuration says. Key names the
// configuration key in errors (the file key is Key + "_file"). The first of Value, File and Env
// that is set is used; Env is the name of an environment variable, not its value.
type Source struct {
	Key   string
	Value string
	File  string
	Env   string
}

// ErrNotSet is the error Read wraps when no place of the secret was configured.
var ErrNotSet = errors.New("not set")

// Read returns the secret, reading its file or its environment variable (through getenv) when
// that is where it is. A file's trailing line break is not part of the secret. An error names
// the key and the place, never the secret; a file that cannot be read, an empty file and an
// empty or unset variable are errors, as is a Source with nothing set (wrapping ErrNotSet).
func (s Source) Read(getenv func(string) string) (string, error) {
	switch {
	case s.Value != "":
		return s.Value, nil
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("%s_file: %w", s.Key, err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("%s_file: %s is empty", s.Key, s.File)
		}
		return v, nil
	case s.Env != "":
		v := getenv(s.Env)
		if v == "" {
			return "", fmt.Errorf("%s: the environment variable %s is empty or not set", s.Key, s.Env)
		}
		return v, nil
	}
	return "", fmt.Errorf("%s: %w", s.Key, ErrNotSet)
}
