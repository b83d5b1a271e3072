package netaddr

import (
	"strings"
	"testing"
)

// FuzzParse: neither parser panics; what ParseHostPort accepts prints as host:port that parses
// back to itself, and what ParseListen accepts prints as transport://ip:port that parses back to
// itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"10.0.0.20:5060", "pbx.example", "[2001:db8::1]:5062", "2001:db8::1", "udp://0.0.0.0:5060",
		"tcp://[::]", "0.0.0.0", "sip:pbx", "udp://:0", "[::ffff:1.2.3.4]", "bücher.example:1", "a..b", "[", "]:", "%", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if h, err := ParseHostPort(s, 5060); err == nil {
			if h.IsZero() || h.Port == 0 || h.Host == "" {
				t.Fatalf("ParseHostPort(%q) = %#v", s, h)
			}
			again, err := ParseHostPort(h.String(), 1)
			if err != nil || again != h {
				t.Fatalf("ParseHostPort(%q) = %v, which parses as %v, %v", s, h, again, err)
			}
		}
		if ls, err := ParseListen(s, 5060); err == nil {
			if len(ls) == 0 || len(ls) > 2 {
				t.Fatalf("ParseListen(%q) = %v", s, ls)
			}
			for _, l := range ls {
				again, err := ParseListen(l.String(), 1)
				if err != nil || len(again) != 1 || again[0] != l || !strings.HasPrefix(l.String(), l.Transport+"://") {
					t.Fatalf("ParseListen(%q) gave %v, which parses as %v, %v", s, l, again, err)
				}
			}
		}
	})
}
