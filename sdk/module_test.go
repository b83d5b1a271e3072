package sdk_test

import (
	"os/exec"
	"strings"
	"testing"
)

// serverOnly are modules the callwire server depends on and a translator's author must never get
// through the SDK: the HTTP stack, the stores, the broker, the browser the tests drive, the
// migrations, the metrics and the command line. The SDK's own dependencies (go-plugin, gRPC, the
// retrying HTTP client, SQLite for the outbox) are the author's too.
var serverOnly = []string{
	"github.com/callwire/callwire", // the server's own module
	"github.com/gofiber/fiber",
	"github.com/valyala/fasthttp",
	"github.com/jackc/pgx",
	"github.com/redis/go-redis",
	"github.com/chromedp/",
	"github.com/pressly/goose",
	"github.com/prometheus/",
	"github.com/spf13/cobra",
	"github.com/knadh/koanf",
	"github.com/emiago/sipgo",
}

// TestModuleGraphHasNoServerDependency fails when the SDK module's graph gains a module of the
// server's: `go list -m all`, run in the SDK's module, lists every module a translator that
// requires the SDK may have to download.
func TestModuleGraphHasNoServerDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || lines[0] != "github.com/callwire/callwire/sdk" {
		t.Fatalf("go list -m all did not start with the SDK's module:\n%s", out)
	}
	for _, line := range lines[1:] {
		path := strings.Fields(line)[0]
		for _, bad := range serverOnly {
			if path == bad || strings.HasPrefix(path, strings.TrimSuffix(bad, "/")+"/") {
				t.Errorf("the SDK's module graph holds %s, a dependency of the server", line)
			}
		}
	}
}

// TestImportsNothingOfTheServer fails when a package of the SDK imports one of the server's
// packages, which a replace or a published server module could otherwise let through.
func TestImportsNothingOfTheServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for pkg := range strings.Lines(string(out)) {
		pkg = strings.TrimSpace(pkg)
		if strings.HasPrefix(pkg, "github.com/callwire/callwire/") && !strings.HasPrefix(pkg, "github.com/callwire/callwire/sdk") {
			t.Errorf("the SDK depends on %s, a package of the server", pkg)
		}
	}
}
