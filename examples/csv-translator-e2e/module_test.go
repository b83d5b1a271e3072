package csvtranslatore2e_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// modules lists the paths of the modules in the graph of the Go module in dir, `go list -m all`
// run there, without the main module itself.
func modules(t *testing.T, dir string) map[string]bool {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "all")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m all in %s: %v", dir, err)
	}
	got := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) == 0 {
			continue
		}
		got[f[0]] = true
	}
	return got
}

// TestExampleDependsOnTheSDKAlone holds the example translator to what it shows a translator's
// author: its module requires the SDK's and nothing else, so every module of its graph is in the
// SDK's graph, and its go.sum names none of the server's dependencies.
func TestExampleDependsOnTheSDKAlone(t *testing.T) {
	const example, sdk = "../csv-translator", "../../sdk"
	sdkGraph := modules(t, sdk)
	for path := range modules(t, example) {
		if path != "github.com/callwire/callwire/sdk" && !sdkGraph[path] {
			t.Errorf("the example's module graph holds %s, which the SDK's does not", path)
		}
	}
	sum, err := os.ReadFile(example + "/go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for _, server := range []string{"gofiber/fiber", "jackc/pgx", "redis/go-redis", "chromedp/", "pressly/goose", "github.com/callwire/callwire "} {
		if strings.Contains(string(sum), server) {
			t.Errorf("the example's go.sum names %s, a dependency of the server", server)
		}
	}
}
