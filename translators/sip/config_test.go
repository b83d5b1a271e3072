package sip

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []string // substrings, one per line of the error, in order; none: valid
	}{
		{"the issue's proxy example", `{"mode":"proxy","listen":["udp://0.0.0.0:5060","tcp://0.0.0.0:5060"],
			"pbx":"10.0.0.20:5060","trunk":"sip.carrier.example:5060","numbers":["+15551230100"],
			"default_country":"US","locations":{"+15551230100":["main"],"+15551230200":["branch-east"]},"provider":"sip"}`, nil},
		{"hep without a trunk", `{"mode":"hep","listen":["udp://0.0.0.0:9060"],"pbx":"10.0.0.20","default_country":"GB"}`, nil},
		{"durations as text and seconds", `{"mode":"hep","pbx":"10.0.0.20","default_country":"US","ring_timeout":"2m","call_timeout":7200,"reorder_window":"150ms"}`, nil},
		{"every problem at once", `{"mode":"tap","listen":["sip://x:1","udp://h"],"trunk":"sip:carrier","max_calls":-1,"queue_size":-5,"numbers":["5551230100"],"prvider":"x"}`,
			[]string{
				"prvider: unknown key; did you mean provider?",
				`mode: "tap" is not a mode`,
				`listen[0]: "sip://x:1": transport "sip" is not udp or tcp`,
				`listen[1]: "udp://h" needs a host and a port`,
				"pbx: is required",
				`trunk: "sip:carrier": port "carrier" is not a number`,
				"max_calls: must not be negative",
				"queue_size: must be between 1",
				"default_country: is required",
				"numbers[0]",
			}},
		{"proxy needs a trunk; hep keys refused", `{"mode":"proxy","pbx":"10.0.0.20","default_country":"US","hep_password":"s"}`,
			[]string{"trunk: is required in proxy mode", "mode: proxy mode takes no reorder_window"}},
		{"wrong type", `{"mode":"hep","pbx":"10.0.0.20","default_country":"US","listen":"udp://0.0.0.0:9060"}`,
			[]string{"listen: must be a list, not string"}},
		{"bad duration", `{"mode":"hep","pbx":"10.0.0.20","default_country":"US","grace":"soon"}`,
			[]string{`"soon" is not a duration`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(json.RawMessage(tc.in))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := ParseConfig(json.RawMessage(`{"mode":"HEP","pbx":"10.0.0.20","default_country":"US"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != ModeHEP || c.Provider != "sip" || c.QueueSize != DefaultQueueSize {
		t.Errorf("defaults: %+v", c)
	}
	if strings.Join(c.Listen, " ") != "udp://0.0.0.0:9060 tcp://0.0.0.0:9060" {
		t.Errorf("hep listen default %q", c.Listen)
	}
	c, _ = ParseConfig(json.RawMessage(`{"mode":"proxy","pbx":"10.0.0.20","trunk":"t","default_country":"US","call_timeout":"4h"}`))
	if strings.Join(c.Listen, " ") != "udp://0.0.0.0:5060 tcp://0.0.0.0:5060" || time.Duration(c.CallTimeout) != 4*time.Hour {
		t.Errorf("proxy defaults %+v", c)
	}
}

func TestSplitHostPort(t *testing.T) {
	cases := []struct {
		in   string
		host string
		port int
		ok   bool
	}{
		{"10.0.0.20:5080", "10.0.0.20", 5080, true},
		{"10.0.0.20", "10.0.0.20", 5060, true},
		{"pbx.clinic.example", "pbx.clinic.example", 5060, true},
		{"[2001:db8::1]:5062", "2001:db8::1", 5062, true},
		{"2001:db8::1", "2001:db8::1", 5060, true},
		{"sip:pbx", "", 0, false},
		{"udp://pbx:5060", "", 0, false},
		{"pbx:0", "", 0, false},
		{"pbx:99999", "", 0, false},
		{":5060", "", 0, false},
	}
	for _, tc := range cases {
		h, p, err := SplitHostPort(tc.in, 5060)
		if (err == nil) != tc.ok || h != tc.host || p != tc.port {
			t.Errorf("SplitHostPort(%q) = %q, %d, %v", tc.in, h, p, err)
		}
	}
}
