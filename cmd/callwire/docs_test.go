package main_test

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/callwire/callwire/translators/asterisk"
	"github.com/callwire/callwire/translators/ringcentral"
	"github.com/callwire/callwire/translators/sip"
)

// TestTranslatorDocsMatchTheCode reads each built-in translator's page in docs/: the example
// agent configuration it opens with must be accepted as written (a clinic copies it), and its
// table of keys must name exactly the keys the translator takes, no more and no fewer.
func TestTranslatorDocsMatchTheCode(t *testing.T) {
	for _, tc := range []struct {
		doc, builtin string
		config       any
		parse        func(json.RawMessage) error
	}{
		{"sip-observer.md", sip.Name, sip.Config{}, func(raw json.RawMessage) error { _, err := sip.ParseConfig(raw); return err }},
		{"asterisk.md", asterisk.Name, asterisk.Config{}, func(raw json.RawMessage) error { _, err := asterisk.ParseConfig(raw); return err }},
		{"ringcentral.md", ringcentral.Name, ringcentral.Config{}, func(raw json.RawMessage) error { _, err := ringcentral.ParseConfig(raw); return err }},
	} {
		t.Run(tc.builtin, func(t *testing.T) {
			b, err := os.ReadFile("../../docs/" + tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			doc := string(b)
			example, rest := firstExample(t, doc, tc.builtin)
			if err := tc.parse(example); err != nil {
				t.Errorf("the example configuration in docs/%s is refused:\n%v\n%s", tc.doc, err, example)
			}
			documented := tableKeys(rest)
			taken := jsonKeys(reflect.TypeOf(tc.config))
			for _, k := range taken {
				if !slices.Contains(documented, k) {
					t.Errorf("docs/%s: key %q is taken by the translator but not in the table of keys", tc.doc, k)
				}
			}
			for _, k := range documented {
				if !slices.Contains(taken, k) {
					t.Errorf("docs/%s: the table of keys names %q, which the translator does not take", tc.doc, k)
				}
			}
		})
	}
}

// firstExample returns the config block, as JSON, of the first YAML example in doc that
// configures the builtin, and the text after that example.
func firstExample(t *testing.T, doc, builtin string) (json.RawMessage, string) {
	t.Helper()
	for rest := doc; ; {
		i := strings.Index(rest, "```yaml\n")
		if i < 0 {
			t.Fatalf("no YAML example configures builtin: %s", builtin)
		}
		rest = rest[i+len("```yaml\n"):]
		j := strings.Index(rest, "```")
		if j < 0 {
			t.Fatal("an unclosed YAML example")
		}
		block := rest[:j]
		rest = rest[j+3:]
		var v struct {
			Translators []struct {
				Builtin string         `yaml:"builtin"`
				Config  map[string]any `yaml:"config"`
			} `yaml:"translators"`
		}
		if err := yaml.Unmarshal([]byte(block), &v); err != nil {
			t.Fatalf("a YAML example does not parse: %v\n%s", err, block)
		}
		if len(v.Translators) == 0 || v.Translators[0].Builtin != builtin {
			continue
		}
		raw, err := json.Marshal(v.Translators[0].Config)
		if err != nil {
			t.Fatal(err)
		}
		return raw, rest
	}
}

// tableKeys are the keys named in the first column of the first table in text: every
// backquoted name in it, so that a row may name several keys that go together.
func tableKeys(text string) []string {
	keyName := regexp.MustCompile("`([a-z][a-z0-9_]*)`")
	var keys []string
	inTable := false
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range keyName.FindAllStringSubmatch(first, -1) {
			keys = append(keys, m[1])
		}
	}
	return keys
}

// jsonKeys are the JSON names of a configuration struct's fields, its embedded structs' included.
func jsonKeys(typ reflect.Type) []string {
	var keys []string
	for f := range typ.Fields() {
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			keys = append(keys, jsonKeys(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" && f.IsExported() {
			keys = append(keys, name)
		}
	}
	return keys
}
