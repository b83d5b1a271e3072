package event

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
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
	old, err := filepath.Glob("*_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range old {
		if _, ok := files[name]; !ok {
			t.Errorf("%s is not generated from the schema any more: remove it", name)
		}
	}
}

// TestFieldsAgreeWithStructs checks that Fields lists, for each object, exactly the JSON names
// of its Go struct's fields, in the struct's order.
func TestFieldsAgreeWithStructs(t *testing.T) {
	byObject := map[string][]string{}
	seen := map[string]bool{}
	for _, f := range Fields() {
		if k := f.Object + "." + f.Key; !seen[k] {
			seen[k] = true
			byObject[f.Object] = append(byObject[f.Object], f.Key)
		}
	}
	for object, typ := range map[string]reflect.Type{
		"event":     reflect.TypeFor[Event](),
		"call":      reflect.TypeFor[Call](),
		"party":     reflect.TypeFor[Party](),
		"diversion": reflect.TypeFor[Diversion](),
	} {
		var want []string
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Anonymous {
				continue // a hop's party members are listed under "party"
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			want = append(want, name)
		}
		if got := byObject[object]; !slices.Equal(got, want) {
			t.Errorf("Fields lists %s members %v, its struct %v", object, got, want)
		}
	}
}

// TestSchemaTypesAgree checks that the schema's event types are the package's, in the same
// order: the generated validator names them in its problems.
func TestSchemaTypesAgree(t *testing.T) {
	var got []Type
	for _, ty := range schema.Types() {
		got = append(got, Type(ty.Wire))
	}
	if want := Types(); !slices.Equal(got, want) {
		t.Errorf("the schema's types are %v, the package's %v", got, want)
	}
}
