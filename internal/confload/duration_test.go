package confload

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{`"90s"`, 90 * time.Second, ""},
		{`"4h"`, 4 * time.Hour, ""},
		{`2.5`, 2500 * time.Millisecond, ""},
		{`"soon"`, 0, `"soon" is not a duration`},
		{`true`, 0, "true is not a duration"},
	} {
		var d Duration
		err := json.Unmarshal([]byte(tc.in), &d)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || time.Duration(d) != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.in, time.Duration(d), err, tc.want)
		}
		if b, _ := json.Marshal(d); string(b) != `"`+tc.want.String()+`"` {
			t.Errorf("%s: marshals as %s", tc.in, b)
		}
	}
}
