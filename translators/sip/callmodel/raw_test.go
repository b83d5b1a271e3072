package callmodel

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRenderRaw(t *testing.T) {
	at := time.Date(2026, 11, 25, 9, 30, 0, 123456789, time.FixedZone("x", 3600))
	src, dst := netip.MustParseAddrPort("203.0.113.5:5060"), netip.MustParseAddrPort("[2001:db8::20]:5060")
	long := strings.Repeat("x", maxRawSIP-1) + "é tail"
	for _, tc := range []struct {
		name string
		m    Message
		want map[string]any
	}{
		{"whole", Message{Data: []byte("BYE sip:a@b SIP/2.0\r\n\r\n"), Transport: "udp", Src: src, Dst: dst, At: at},
			map[string]any{"sip": "BYE sip:a@b SIP/2.0\r\n\r\n", "transport": "udp", "src": "203.0.113.5:5060", "dst": "[2001:db8::20]:5060", "seenAt": "2026-11-25T08:30:00.123456789Z"}},
		{"cut", Message{Data: []byte(long), At: at},
			map[string]any{"sip": strings.Repeat("x", maxRawSIP-1), "truncated": true, "sipBytes": float64(len(long)), "seenAt": "2026-11-25T08:30:00.123456789Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := renderRaw(&wire{m: tc.m})
			var got map[string]any
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("raw is not JSON: %v\n%s", err, raw)
			}
			if len(got) != len(tc.want) {
				t.Errorf("raw = %s, want the keys of %v", raw, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("raw %s = %v, want %v", k, got[k], v)
				}
			}
			if s, _ := got["sip"].(string); !utf8.ValidString(s) {
				t.Errorf("sip is not UTF-8")
			}
		})
	}
}

// TestRenderRawAllocates once: the raw is built in place, in the one buffer it returns.
func TestRenderRawAllocates(t *testing.T) {
	w := &wire{m: Message{Data: []byte("SIP/2.0 200 OK\r\nCall-ID: a\r\n\r\n"), Transport: "udp",
		Src: netip.MustParseAddrPort("10.0.0.20:5060"), Dst: netip.MustParseAddrPort("203.0.113.5:5060"), At: time.Unix(1, 0)}}
	if n := testing.AllocsPerRun(100, func() { renderRaw(w) }); n != 1 {
		t.Errorf("renderRaw allocates %v times, want 1", n)
	}
}
