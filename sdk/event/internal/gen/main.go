// Command gen writes the generated files of package event from the schema in
// sdk/event/internal/schema, into the directory it runs in (go generate runs it in sdk/event) or
// the one its -dir flag names.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/callwire/callwire/sdk/event/internal/schema"
)

func main() {
	dir := flag.String("dir", ".", "the directory of package event")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := schema.Generate()
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
