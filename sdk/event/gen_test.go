package event

import (
	"bytes"
	"os"
	"testing"

	"github.com/callwire/callwire/sdk/event/internal/schema"
)

// TestGeneratedUpToDate holds the generated files to what the schema generates now: a change to
// the schema must be followed by go generate.
func TestGeneratedUpToDate(t *testing.T) {
	files, err := schema.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%v: run go generate in sdk/event", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the schema generates: run go generate in sdk/event", name)
		}
	}
}
