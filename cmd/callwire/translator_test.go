package main_test

import (
	"strings"
	"testing"
)

// TestBuiltinTranslatorUnknown runs the hidden `callwire translator <name>` by hand with a name
// the binary does not have: it must fail at once, say which name and what is built in, and write
// nothing to stdout (which belongs to the plugin handshake).
func TestBuiltinTranslatorUnknown(t *testing.T) {
	c := newCLI(t)
	out, errOut, code := c.run("translator", "nosuch")
	if code != 1 || !strings.Contains(errOut, `no built-in translator "nosuch" (built in: none)`) {
		t.Errorf("callwire translator nosuch: exit %d, stderr %q", code, errOut)
	}
	if out != "" {
		t.Errorf("callwire translator nosuch wrote to stdout: %q", out)
	}
	if _, errOut, code := c.run("translator"); code != 2 || !strings.Contains(errOut, "argument") {
		t.Errorf("callwire translator without a name: exit %d, stderr %q", code, errOut)
	}
	if help := c.ok("--help"); strings.Contains(help, "\n  translator ") {
		t.Errorf("the translator subcommand must be hidden from help:\n%s", help)
	}
}
