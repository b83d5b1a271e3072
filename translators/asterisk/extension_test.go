package asterisk

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/numbering"
)

// TestAnsweredByExtension checks how a phone's extension is found: endpoint_extensions when it
// lists the endpoint (with or without its technology, any letter case), else the endpoint's name,
// never the dialled channel's CallerIDNum (the ring group's 401 in the recording).
func TestAnsweredByExtension(t *testing.T) {
	msgs := load(t, "ami/testdata/ring-group.ami")
	for _, tc := range []struct {
		name string
		exts map[string]string
		want string
	}{
		{"no map: the endpoint name", nil, "150010002"},
		{"endpoint name", map[string]string{"150010002": "202"}, "202"},
		{"technology and name, other case", map[string]string{"sip/150010002": "202"}, "202"},
		{"technology and name win over name", map[string]string{"150010002": "999", "SIP/150010002": "202"}, "202"},
		{"another technology does not match", map[string]string{"PJSIP/150010002": "202"}, "150010002"},
		{"other phones only", map[string]string{"150010003": "203"}, "150010002"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := numbering.New(numbering.Config{DefaultCountry: "NL", Numbers: []string{"+31150010004"}})
			if err != nil {
				t.Fatal(err)
			}
			tr, err := NewTracker(TrackerConfig{Plan: plan, Provider: DefaultProvider,
				TrunkChannels: []string{"SIP/voipgrid-"}, EndpointExtensions: tc.exts})
			if err != nil {
				t.Fatal(err)
			}
			var by []string
			for _, e := range translate(tr, msgs) {
				if e.Type == event.CallAnswered {
					by = append(by, e.AnsweredBy)
				}
			}
			if len(by) != 1 || by[0] != tc.want {
				t.Errorf("answeredBy %q, want [%s]", by, tc.want)
			}
		})
	}
}

// TestEndpointExtensionsConfig checks that every bad endpoint_extensions entry is reported.
func TestEndpointExtensionsConfig(t *testing.T) {
	raw := `{"username": "u", "secret": "s", "endpoint_extensions": {"": "201", "a b": "202", "PJSIP/": "203", "frontdesk": "", "nurse": "2 04", "PJSIP/ok": "205"}}`
	_, err := ParseConfig(json.RawMessage(raw))
	if err == nil {
		t.Fatal("no error")
	}
	for _, key := range []string{`[""]`, `["a b"]`, `["PJSIP/"]`, `["frontdesk"]`, `["nurse"]`} {
		if !strings.Contains(err.Error(), "endpoint_extensions"+key) {
			t.Errorf("error does not name endpoint_extensions%s:\n%v", key, err)
		}
	}
	if strings.Contains(err.Error(), `"PJSIP/ok"`) {
		t.Errorf("a good entry was reported:\n%v", err)
	}
	if _, err := NewTracker(TrackerConfig{Plan: &numbering.Plan{}, Provider: "p", EndpointExtensions: map[string]string{"x": ""}}); err == nil {
		t.Error("NewTracker took an entry without an extension")
	}
}
