package plugins_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPluginsNeverImportCore keeps the protocol and host apart from the ingest engine: a
// translator links package plugins, and must not drag the core in with it.
func TestPluginsNeverImportCore(t *testing.T) {
	const module = "github.com/callwire/callwire/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"plugins/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if strings.HasPrefix(dep, module+"core") {
				t.Errorf("%s imports %s", fields[0], dep)
			}
		}
	}
}
