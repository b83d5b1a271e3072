package confload

import (
	"encoding/json"
	"strings"
	"testing"
)

type jsonInner struct {
	Numbers []string `json:"numbers"`
}

type jsonConfig struct {
	jsonInner
	Mode   string            `json:"mode"`
	Listen []string          `json:"listen"`
	Tags   map[string]string `json:"tags"`
	Hold   struct {
		Window int `json:"window"`
	} `json:"hold"`
	Peers []struct {
		Addr string `json:"addr"`
	} `json:"peers"`
}

func TestDecodeJSON(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string // each a substring of one line of the error; none: no error
	}{
		{"empty", ``, nil},
		{"null", `null`, nil},
		{"valid", `{"mode":"proxy","numbers":["+1"],"tags":{"anything":"x"},"hold":{"window":3},"peers":[{"addr":"a"}]}`, nil},
		{"case of a key is ignored", `{"Mode":"proxy"}`, nil},
		{"every unknown key at once", `{"mdoe":"proxy","listn":[],"zzzzzz":1}`,
			[]string{"listn: unknown key; did you mean listen?", "mdoe: unknown key; did you mean mode?", "zzzzzz: unknown key"}},
		{"nested", `{"hold":{"windw":3},"peers":[{"adr":"a"}]}`,
			[]string{"hold.windw: unknown key; did you mean hold.window?", "peers[0].adr: unknown key; did you mean peers[0].addr?"}},
		{"type error beside an unknown key", `{"mode":3,"mdoe":1}`,
			[]string{"mdoe: unknown key", "mode: must be a string, not number"}},
		{"not an object", `[1]`, []string{"must be an object"}},
		{"not JSON", `{`, []string{"not valid JSON"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c jsonConfig
			err := DecodeJSON(json.RawMessage(tc.in), &c)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("error lines %q, want %d", lines, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d %q, want it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}
