package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/callwire/callwire/plugins/agent"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadLayers(t *testing.T) {
	secret := writeFile(t, "secret", "  cwsk_from_file\n")
	path := writeFile(t, "agent.yaml", `
core:
  url: https://calls.example.org
  client_id: cwid_1
  secret_file: `+secret+`
outbox:
  max_events: 500
metrics:
  listen: 127.0.0.1:9999
translators:
  - name: sip
    builtin: sip
    config:
      listen: udp://0.0.0.0:5060
      trunks: [a, b]
      nested: {depth: 2}
  - name: pbx
    path: /usr/local/bin/callwire-translator-pbx
    args: [--verbose]
`)
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	fs.String("metrics-listen", "", "")
	if err := fs.Parse([]string{"--metrics-listen", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	env := []string{"CALLWIRE_AGENT_OUTBOX_MAX_EVENTS=700", "CALLWIRE_AGENT_DELIVERY_MAX_BACKOFF=2m",
		"CALLWIRE_DATABASE_URL=ignored", "CALLWIRE_AGENT_NOSUCH=1"}
	c, unknown, err := agent.Load(path, env, fs, map[string]string{"metrics-listen": "metrics.listen"})
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != 1 || unknown[0].Name != "CALLWIRE_AGENT_NOSUCH" {
		t.Errorf("unknown variables %v, want CALLWIRE_AGENT_NOSUCH alone", unknown)
	}
	if c.Core.Secret != "cwsk_from_file" || c.Core.URL != "https://calls.example.org" || c.Core.ClientID != "cwid_1" {
		t.Errorf("core %+v", c.Core)
	}
	if err := c.Validate(); err != nil { // Run validates what Load returned once more
		t.Errorf("Load's result does not validate: %v", err)
	}
	if c.Outbox.MaxEvents != 700 || c.Outbox.Path != "data/agent-outbox.db" || c.Outbox.DeadLetter != "data/agent-dead-letter.jsonl" ||
		c.Outbox.MaxBytes != 256<<20 {
		t.Errorf("outbox %+v", c.Outbox)
	}
	if c.Delivery.MaxBackoff != 2*time.Minute || c.Delivery.MinBackoff != time.Second || c.Delivery.Workers != 2 {
		t.Errorf("delivery %+v", c.Delivery)
	}
	if c.Metrics.Listen != "127.0.0.1:0" {
		t.Errorf("metrics %+v", c.Metrics)
	}
	if len(c.Translators) != 2 || c.Translators[1].Path != "/usr/local/bin/callwire-translator-pbx" ||
		strings.Join(c.Translators[1].Args, " ") != "--verbose" {
		t.Fatalf("translators %+v", c.Translators)
	}
	raw, err := c.Translators[0].ConfigJSON()
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg["listen"] != "udp://0.0.0.0:5060" || len(cfg["trunks"].([]any)) != 2 {
		t.Errorf("config block %s %v", raw, err)
	}
	if raw, _ := c.Translators[1].ConfigJSON(); string(raw) != "{}" {
		t.Errorf("empty config block %s", raw)
	}
	specs, err := agent.Specs(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := specs[1].Command; strings.Join(got, " ") != "/usr/local/bin/callwire-translator-pbx --verbose" {
		t.Errorf("path command %v", got)
	}
	if got := specs[0].Command; len(got) != 3 || got[1] != "translator" || got[2] != "sip" {
		t.Errorf("builtin command %v", got)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	path := writeFile(t, "agent.yaml", `
core:
  url: ftp://x
  secret: a
  secret_file: /x
outbox:
  max_events: 0
  max_bytes: 10
delivery:
  workers: 0
  min_backoff: 0s
metrics:
  listen: nope
log:
  level: loud
translators:
  - name: ""
    builtin: sip
  - name: a b
  - name: x
    builtin: sip
    path: /bin/x
  - name: x
    builtin: sip
    args: [-v]
`)
	_, _, err := agent.Load(path, nil, nil, nil)
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{"core.url", "core.secret: set core.secret or core.secret_file, not both", "core.client_id",
		"outbox.max_events", "outbox.max_bytes", "delivery.workers", "delivery.min_backoff", "metrics.listen", "log.level",
		"translators[0].name: is required", "translators[1].name", "translators[1]: needs builtin", "translators[2]: set builtin or path",
		"translators[3].name: \"x\" is used", "translators[3].args"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, _, err := agent.Load("", nil, nil, nil); err == nil || !strings.Contains(err.Error(), "core.url: is required") {
		t.Errorf("no configuration: %v", err)
	}
	empty := writeFile(t, "empty", "\n")
	_, _, err = agent.Load("", []string{"CALLWIRE_AGENT_CORE_URL=http://x", "CALLWIRE_AGENT_CORE_BEARER=true",
		"CALLWIRE_AGENT_CORE_SECRET_FILE=" + empty}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty secret file: %v", err)
	}
}

func TestUnknownKeysAreErrors(t *testing.T) {
	const valid = "core:\n  url: https://calls.example.org\n  client_id: cwid_1\n  secret: cwsk_1\n"
	for _, tc := range []struct {
		name string
		yaml string
		want []string // each in the error; none: the file loads
	}{
		{name: "valid, with free-form translator config", yaml: valid + "translators:\n  - name: sip\n    builtin: sip\n" +
			"    config: {listen: udp://0.0.0.0:5060, nmae: anything, nested: {whatever: 1}}\n"},
		{name: "section typo", yaml: valid + "outbx:\n  path: /var/lib/outbox.db\n", want: []string{"outbx: unknown key; did you mean outbox?"}},
		{name: "nested typo", yaml: valid + "metrics:\n  listn: 127.0.0.1:1\n", want: []string{"metrics.listn: unknown key; did you mean metrics.listen?"}},
		{name: "translator entry typo", yaml: valid + "translators:\n  - name: a\n    builtin: sip\n  - name: b\n    pth: /bin/b\n    confg: {x: 1}\n",
			want: []string{"translators[1].pth: unknown key; did you mean translators[1].path?",
				"translators[1].confg: unknown key; did you mean translators[1].config?", "translators[1]: needs builtin"}},
		{name: "every unknown key, with the invalid values", yaml: "core:\n  url: https://x\n  secrt: s\ndelivery: {workrs: 2}\ncolour: blue\n",
			want: []string{"core.secrt: unknown key; did you mean core.secret?", "delivery.workrs: unknown key; did you mean delivery.workers?",
				"colour: unknown key", "core.secret: is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := agent.Load(writeFile(t, "agent.yaml", tc.yaml), nil, nil, nil)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded; want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestUnknownVariablesAreWarnings(t *testing.T) {
	base := []string{"CALLWIRE_AGENT_CORE_URL=https://x", "CALLWIRE_AGENT_CORE_CLIENT_ID=cwid_1", "CALLWIRE_AGENT_CORE_SECRET=cwsk_1"}
	for _, tc := range []struct {
		name    string
		environ []string
		want    []agent.UnknownVariable
	}{
		{name: "typo", environ: []string{"CALLWIRE_AGENT_OUTBOX_MAX_EVENT=5"},
			want: []agent.UnknownVariable{{Name: "CALLWIRE_AGENT_OUTBOX_MAX_EVENT", Suggestion: "CALLWIRE_AGENT_OUTBOX_MAX_EVENTS"}}},
		{name: "section typo", environ: []string{"CALLWIRE_AGENT_CORE_ULR=https://y"},
			want: []agent.UnknownVariable{{Name: "CALLWIRE_AGENT_CORE_ULR", Suggestion: "CALLWIRE_AGENT_CORE_URL"}}},
		{name: "the core's variables", environ: []string{"CALLWIRE_DATABASE_URL=postgres://x", "CALLWIRE_DATABSE_URL=postgres://x"}},
		{name: "the tests' variables", environ: []string{"CALLWIRE_AGENT_KILL_HELPER=1", "CALLWIRE_TEST_DATABASE_URL=x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := agent.Load("", append(base, tc.environ...), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Errorf("unknown variables %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVariablesAreDocumented keeps docs/agent.md's tables in step with the Config.
func TestVariablesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/agent.md")
	if err != nil {
		t.Fatal(err)
	}
	vars := agent.Variables()
	if len(vars) < 15 {
		t.Fatalf("variables %v", vars)
	}
	for _, v := range vars {
		if !strings.Contains(string(doc), "`"+v+"`") {
			t.Errorf("docs/agent.md does not mention %s", v)
		}
	}
}
