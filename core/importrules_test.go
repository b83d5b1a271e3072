// Package core_test keeps the direction of imports true: the vocabulary imports only the standard
// library and its own packages, core never imports plugins or translators, and translators and
// the SDK never import core. Inside core, the caller lookup does not depend on the pipeline that
// consumes it, and the HTTP layer does not reach past the pipeline and the authenticator into the
// store.
package core_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/callwire/callwire/"

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	std, err := exec.Command("go", "list", "std").Output()
	if err != nil {
		t.Fatalf("go list std: %v", err)
	}
	isStd := map[string]bool{}
	for _, p := range strings.Fields(string(std)) {
		isStd[p] = true
	}
	// A rule bans, for every package under from, each of its dependencies (direct or not), or
	// with direct set each of its own imports only.
	rules := []struct {
		from   string
		direct bool
		banned func(dep string) bool
		why    string
	}{
		{module + "sdk/event", false, func(d string) bool {
			own := strings.HasPrefix(d, module+"sdk/event/") // the schema it is generated from
			return !isStd[d] && !own && !strings.HasPrefix(d, "internal/") && !strings.HasPrefix(d, "vendor/")
		},
			"the vocabulary imports only the standard library and its own packages"},
		{module + "core/", false, func(d string) bool {
			return strings.HasPrefix(d, module+"plugins") || strings.HasPrefix(d, module+"translators")
		}, "core never imports plugins or translators"},
		{module + "translators/", false, func(d string) bool { return strings.HasPrefix(d, module+"core") }, "a translator never imports core"},
		{module + "sdk/", false, func(d string) bool { return strings.HasPrefix(d, module+"core") }, "the SDK never imports core"},
		{module + "internal/", false, func(d string) bool {
			return strings.HasPrefix(d, module) && !strings.HasPrefix(d, module+"internal/")
		}, "the module's internal packages serve both core and plugins, so they import neither (nor anything else of the module)"},
		{module + "core/lookup", false, func(d string) bool { return d == module+"core/ingest" },
			"the caller lookup does not depend on its consumer: core/ingest defines the CallerLookup it needs"},
		{module + "core/httpapi", true, func(d string) bool { return strings.HasPrefix(d, module+"core/store") },
			"the HTTP layer branches on core/ingest's and core/auth's errors, not the store's"},
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	checked := 0
	for sc.Scan() {
		pkg, rest, ok := strings.Cut(sc.Text(), "|")
		if !ok {
			continue
		}
		imports, deps, _ := strings.Cut(rest, "|")
		for _, r := range rules {
			if pkg != r.from && !strings.HasPrefix(pkg, r.from) {
				continue
			}
			checked++
			list := deps
			if r.direct {
				list = imports
			}
			for _, d := range strings.Fields(list) {
				if r.banned(d) {
					t.Errorf("%s imports %s: %s", pkg, d, r.why)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package was checked; is the module path right?")
	}
}
