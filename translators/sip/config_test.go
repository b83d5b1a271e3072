package sip

import (
	"encoding/json"
	"errors"
	"net"
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
				`listen[0]: "sip://x:1": transport "sip" is not udp or tcp`,
				`listen[1]: "udp://h": "h" is a host name; listen takes an IP address of this machine`,
				"pbx: is required",
				`trunk: "sip:carrier" is a SIP URI`,
				`mode: "tap" is not a mode`,
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

// TestConfigAddresses: every form docs/sip-observer.md allows for listen, pbx and trunk is
// parsed once here, with the mode's default port, and what the proxy would refuse is refused
// here, naming the key.
func TestConfigAddresses(t *testing.T) {
	cases := []struct {
		name                     string
		mode, listen, pbx, trunk string // listen: a JSON list, or "" for the default
		want                     string // "listeners | pbx | trunk", or "error: " and a problem
	}{
		{"defaults, proxy", "proxy", "", "10.0.0.20", "203.0.113.5", "udp://0.0.0.0:5060 tcp://0.0.0.0:5060 | 10.0.0.20:5060 | 203.0.113.5:5060"},
		{"defaults, hep", "hep", "", "pbx.clinic.example", "", "udp://0.0.0.0:9060 tcp://0.0.0.0:9060 | pbx.clinic.example:5060 | "},
		{"ports given", "proxy", `["udp://10.0.0.5:5070","tcp://10.0.0.5:5071"]`, "10.0.0.20:5080", "sip.carrier.example:5062",
			"udp://10.0.0.5:5070 tcp://10.0.0.5:5071 | 10.0.0.20:5080 | sip.carrier.example:5062"},
		{"listen without port or transport", "hep", `["10.0.0.5","udp://[::1]"]`, "[2001:db8::20]", "2001:db8::5",
			"udp://10.0.0.5:9060 tcp://10.0.0.5:9060 udp://[::1]:9060 | [2001:db8::20]:5060 | [2001:db8::5]:5060"},
		{"listen host name", "proxy", `["udp://sbc.clinic.example:5060"]`, "10.0.0.20", "203.0.113.5", `error: listen[0]: "udp://sbc.clinic.example:5060": "sbc.clinic.example" is a host name`},
		{"listen clash", "proxy", `["0.0.0.0:5060","udp://10.0.0.5:5060"]`, "10.0.0.20", "203.0.113.5", "error: listen[1]: udp://10.0.0.5:5060 cannot listen beside udp://0.0.0.0:5060"},
		{"pbx URI", "proxy", "", "sip:10.0.0.20", "203.0.113.5", `error: pbx: "sip:10.0.0.20" is a SIP URI`},
		{"trunk port 0", "proxy", "", "10.0.0.20", "203.0.113.5:0", `error: trunk: "203.0.113.5:0": port 0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := map[string]any{"mode": tc.mode, "pbx": tc.pbx, "default_country": "US"}
			if tc.trunk != "" {
				raw["trunk"] = tc.trunk
			}
			if tc.listen != "" {
				raw["listen"] = json.RawMessage(tc.listen)
			}
			b, _ := json.Marshal(raw)
			c, err := ParseConfig(b)
			if w, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
				if err == nil || !strings.HasPrefix(err.Error(), w) {
					t.Fatalf("error %v, want one starting %q", err, w)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ls []string
			for _, l := range c.Listeners {
				ls = append(ls, l.String())
			}
			if got := strings.Join(ls, " ") + " | " + c.PBXAddr.String() + " | " + c.TrunkAddr.String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if err := c.Validate(); err != nil {
				t.Errorf("Validate of ParseConfig's result: %v", err)
			}
		})
	}
}

// TestCheckListeners: a listen address that is not this machine's is refused under its key;
// every interface and loopback always pass, and the machine's addresses are listed only when
// needed.
func TestCheckListeners(t *testing.T) {
	local := func() ([]net.Addr, error) {
		return []net.Addr{
			&net.IPNet{IP: net.ParseIP("10.0.0.5"), Mask: net.CIDRMask(24, 32)},
			&net.IPNet{IP: net.ParseIP("2001:db8::5"), Mask: net.CIDRMask(64, 128)},
		}, nil
	}
	cases := []struct {
		listen string
		want   string // the error, or "" for none
	}{
		{`["udp://0.0.0.0:5060","tcp://[::]:5060","udp://127.0.0.2:5062","tcp://[::1]:5061"]`, ""},
		{`["10.0.0.5:5060","udp://[2001:db8::5]:5060"]`, ""},
		{`["udp://10.0.0.5:5060","10.0.0.20:5062"]`,
			"listen[1]: 10.0.0.20 is not an address of this machine (it has 10.0.0.5, 2001:db8::5); listen on one of them, or on 0.0.0.0"},
	}
	for _, tc := range cases {
		c, err := ParseConfig(json.RawMessage(`{"mode":"hep","pbx":"10.0.0.20","default_country":"US","listen":` + tc.listen + `}`))
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := c.CheckListeners(local); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.listen, got, tc.want)
		}
	}
	c, _ := ParseConfig(json.RawMessage(`{"mode":"hep","pbx":"10.0.0.20","default_country":"US"}`))
	if err := c.CheckListeners(func() ([]net.Addr, error) { return nil, errors.New("not asked") }); err != nil {
		t.Errorf("the default listen needs no list of addresses: %v", err)
	}
}
