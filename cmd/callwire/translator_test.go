package main_test

import (
	"strings"
	"testing"
)

// TestBuiltinTranslatorUnknown runs the hidden `callwire translator <name>` by hand with a name
// the binary does not have: it must fail at once, say which name and what is built in, and write
// nothing to stdout (which belongs to the plugin handshake). Without a name it lists what is
// built in.
func TestBuiltinTranslatorUnknown(t *testing.T) {
	c := newCLI(t)
	out, errOut, code := c.run("translator", "nosuch")
	if code != 1 || !strings.Contains(errOut, `no built-in translator "nosuch" (built in: asterisk, ringcentral, sip)`) {
		t.Errorf("callwire translator nosuch: exit %d, stderr %q", code, errOut)
	}
	if out != "" {
		t.Errorf("callwire translator nosuch wrote to stdout: %q", out)
	}
	if list, errOut, code := c.run("translator"); code != 0 || !strings.HasPrefix(list, "asterisk\t") || !strings.Contains(list, "\nringcentral\t") || !strings.Contains(list, "\nsip\t") {
		t.Errorf("callwire translator without a name must list the built-in translators: exit %d, stdout %q, stderr %q", code, list, errOut)
	}
	if help := c.ok("--help"); strings.Contains(help, "\n  translator ") {
		t.Errorf("the translator subcommand must be hidden from help:\n%s", help)
	}
}
