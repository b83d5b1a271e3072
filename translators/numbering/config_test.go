package numbering

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestValidateAccepts(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"issue example", Config{
			Numbers:        []string{"+15551230100"},
			DefaultCountry: "US",
			Locations:      map[string][]string{"+15551230100": {"main"}},
		}},
		{"country only", Config{DefaultCountry: "GB"}},
		{"lower-case country", Config{DefaultCountry: "de"}},
		{"every key", Config{
			Numbers:            []string{"+442071234567", "+49301234567"},
			DefaultCountry:     "GB",
			Locations:          map[string][]string{"+442071234567": {"london", "reception_2"}, "+49301234567": {"berlin"}},
			DialPrefixes:       []string{"9", "141"},
			ExtensionMaxDigits: 4,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if _, err := New(c.cfg); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestValidateEveryProblem: one configuration with a problem in every key reports them all, each
// naming its key.
func TestValidateEveryProblem(t *testing.T) {
	cfg := Config{
		Numbers:        []string{"+1 555 123 0100", "5551230100", "+1555", "+15551230200", "+15551230200"},
		DefaultCountry: "XX",
		Locations: map[string][]string{
			"+15551230200": {"Main", "east", "east"},
			"+15551239999": {"main"},
			"+15551230100": {},
			"+15551231111": nil,
		},
		DialPrefixes:       []string{"9", "", "9", "12345", "9a"},
		ExtensionMaxDigits: 12,
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`default_country: "XX" is not a region`,
		`numbers[0]: "+1 555 123 0100" must be written in E.164, as +15551230100`,
		`numbers[1]: "5551230100" must be an E.164 number`,
		`numbers[2]: +1555 is not a possible number`,
		`numbers[4]: +15551230200 is listed twice`,
		`locations["+15551230100"]: must name at least one location`,
		`locations["+15551230200"][0]: "Main" must be 1 to 64 characters`,
		`locations["+15551230200"][2]: "east" is listed twice`,
		`locations["+15551231111"]: must name at least one location`,
		`dial_prefixes[1]: "" must be 1 to 4 digits`,
		`dial_prefixes[2]: "9" is listed twice`,
		`dial_prefixes[3]: "12345" must be 1 to 4 digits`,
		`dial_prefixes[4]: "9a" must be 1 to 4 digits`,
		`extension_max_digits: must be 2 to 8, or 0 for 6; got 12`,
	}
	got := unjoin(err)
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), err)
	}
	for i := range min(len(got), len(want)) {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d:\n got  %s\n want %s…", i, got[i], want[i])
		}
	}
	if _, nerr := New(cfg); nerr == nil || !strings.Contains(nerr.Error(), err.Error()) {
		t.Errorf("New error = %v, want it to carry the problems", nerr)
	}
}

func TestValidateCountryRequired(t *testing.T) {
	err := Config{}.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "default_country: is required") {
		t.Fatalf("err = %v", err)
	}
}

// TestConfigJSON: the keys are the issue's, and a translator embedding Config gets them beside
// its own.
func TestConfigJSON(t *testing.T) {
	var tc struct {
		Mode string `json:"mode"`
		Config
	}
	doc := `{"mode":"proxy","numbers":["+15551230100"],"default_country":"US",
		"locations":{"+15551230100":["main"]},"dial_prefixes":["9"],"extension_max_digits":4}`
	if err := json.Unmarshal([]byte(doc), &tc); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Numbers: []string{"+15551230100"}, DefaultCountry: "US",
		Locations: map[string][]string{"+15551230100": {"main"}}, DialPrefixes: []string{"9"}, ExtensionMaxDigits: 4,
	}
	if tc.Mode != "proxy" || !slices.Equal(tc.Numbers, want.Numbers) || tc.DefaultCountry != want.DefaultCountry ||
		!slices.Equal(tc.Locations["+15551230100"], []string{"main"}) || !slices.Equal(tc.DialPrefixes, want.DialPrefixes) ||
		tc.ExtensionMaxDigits != 4 {
		t.Fatalf("decoded %#v", tc)
	}
}

func unjoin(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}
