// Package core_test keeps the direction of imports true: the vocabulary imports only the standard
// library, core never imports plugins or translators, and translators and the SDK never import
// core.
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
	out, err := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"...").Output()
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
	rules := []struct {
		from   string
		banned func(dep string) bool
		why    string
	}{
		{module + "sdk/event", func(d string) bool {
			return !isStd[d] && !strings.HasPrefix(d, "internal/") && !strings.HasPrefix(d, "vendor/")
		},
			"the vocabulary imports only the standard library"},
		{module + "core/", func(d string) bool {
			return strings.HasPrefix(d, module+"plugins") || strings.HasPrefix(d, module+"translators")
		}, "core never imports plugins or translators"},
		{module + "translators/", func(d string) bool { return strings.HasPrefix(d, module+"core") }, "a translator never imports core"},
		{module + "sdk/", func(d string) bool { return strings.HasPrefix(d, module+"core") }, "the SDK never imports core"},
		{module + "internal/", func(d string) bool {
			return strings.HasPrefix(d, module) && !strings.HasPrefix(d, module+"internal/")
		}, "the module's internal packages serve both core and plugins, so they import neither (nor anything else of the module)"},
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	checked := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		pkg, deps := fields[0], fields[1:]
		for _, r := range rules {
			if pkg != r.from && !strings.HasPrefix(pkg, r.from) {
				continue
			}
			checked++
			for _, d := range deps {
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
