package plugins_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPluginsNeverImportCore keeps the agent's side of the translator protocol (the host and the
// agent) apart from the ingest engine: the agent runs on a clinic's machine beside its
// translators and needs nothing of the core, which core/importrules_test.go keeps apart from
// plugins from the other side.
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
