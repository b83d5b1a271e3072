package netaddr

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParseHostPort(t *testing.T) {
	cases := []struct {
		in   string
		want string // host:port, or the start of the error after "error: "
	}{
		{"10.0.0.20:5080", "10.0.0.20:5080"},
		{"10.0.0.20", "10.0.0.20:5060"},
		{" 10.0.0.20 ", "10.0.0.20:5060"},
		{"pbx.clinic.example", "pbx.clinic.example:5060"},
		{"PBX.Clinic.Example.:5062", "pbx.clinic.example:5062"},
		{"pbx", "pbx:5060"},
		{"localhost:5038", "localhost:5038"},
		{"[2001:db8::1]:5062", "[2001:db8::1]:5062"},
		{"[2001:db8::1]", "[2001:db8::1]:5060"},
		{"2001:db8::1", "[2001:db8::1]:5060"},
		{"[::ffff:192.0.2.1]:5060", "192.0.2.1:5060"},
		{"bücher.example", "xn--bcher-kva.example:5060"},
		{"", "error: is empty"},
		{"sip:pbx.example", "error: \"sip:pbx.example\" is a SIP URI"},
		{"SIPS:pbx.example:5061", "error: \"SIPS:pbx.example:5061\" is a SIP URI"},
		{"udp://pbx:5060", "error: \"udp://pbx:5060\" is a URL"},
		{"alice@pbx", "error: \"alice@pbx\" is not host:port"},
		{"pbx;transport=tcp", "error: \"pbx;transport=tcp\" is not host:port"},
		{"pbx:0", "error: \"pbx:0\": port 0"},
		{"pbx:99999", "error: \"pbx:99999\": port \"99999\""},
		{"pbx:+80", "error: \"pbx:+80\": port \"+80\""},
		{"pbx:", "error: \"pbx:\": port \"\""},
		{":5060", "error: \":5060\": has no host"},
		{"10.0.0.256", "error: \"10.0.0.256\": \"10.0.0.256\" is not a valid IP address"},
		{"[pbx]:5060", "error: \"[pbx]:5060\": \"pbx\" in brackets"},
		{"[pbx]", "error: \"[pbx]\": \"pbx\" in brackets"},
		{"[10.0.0.1]", "error: \"[10.0.0.1]\": \"10.0.0.1\" in brackets"},
		{"[10.0.0.1]:5060", "error: \"[10.0.0.1]:5060\": \"10.0.0.1\" in brackets"},
		{"[]", "error: \"[]\": \"\" in brackets"},
		{"[2001:db8::1", "error: \"[2001:db8::1\": is not [IPv6 address]:port"},
		{"2001:db8::1::5", "error: \"2001:db8::1::5\": is not an IPv6 address"},
		{"[fe80::1%eth0]:5060", "error: \"[fe80::1%eth0]:5060\": an IPv6 zone"},
		{"Asterisk_1:5038", "asterisk_1:5038"},
		{"bü_cher.example", "error: \"bü_cher.example\": \"bü_cher.example\" is neither"},
		{"pbx!.example", "error: \"pbx!.example\": \"pbx!.example\" is neither"},
		{"-pbx.example", "error: \"-pbx.example\": \"-pbx.example\" is neither"},
		{strings.Repeat("a", 64) + ".example", "error: "},
		{"a..b", "error: \"a..b\": \"a..b\" is neither"},
	}
	for _, tc := range cases {
		got, err := ParseHostPort(tc.in, 5060)
		if w, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
			if err == nil || !strings.HasPrefix(err.Error(), w) {
				t.Errorf("ParseHostPort(%q) = %v, %v; want an error starting %q", tc.in, got, err, w)
			}
			continue
		}
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseHostPort(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := ParseHostPort("pbx", 0); err == nil {
		t.Error("a default port of 0 was taken")
	}
}

func TestHostPortAddrPort(t *testing.T) {
	h, _ := ParseHostPort("[2001:db8::1]:5080", 5060)
	if ap, ok := h.AddrPort(); !ok || ap != netip.MustParseAddrPort("[2001:db8::1]:5080") {
		t.Errorf("AddrPort = %v, %v", ap, ok)
	}
	n, _ := ParseHostPort("pbx.example", 5060)
	if _, ok := n.AddrPort(); ok {
		t.Error("a name gave an address")
	}
	if !(HostPort{}).IsZero() || (HostPort{}).String() != "" || n.IsZero() {
		t.Error("IsZero or String of the zero value")
	}
}

func TestParseListen(t *testing.T) {
	cases := []struct {
		in   string
		want string // the listeners joined by spaces, or "error: " and the start of the error
	}{
		{"udp://0.0.0.0:5060", "udp://0.0.0.0:5060"},
		{"TCP://10.0.0.5:5070", "tcp://10.0.0.5:5070"},
		{"udp://10.0.0.5", "udp://10.0.0.5:9060"},
		{"udp://[::]:5060", "udp://[::]:5060"},
		{"tcp://[2001:db8::5]", "tcp://[2001:db8::5]:9060"},
		{"udp://:5060", "udp://0.0.0.0:5060"},
		{"udp://127.0.0.1:0", "udp://127.0.0.1:0"},
		{"0.0.0.0:5060", "udp://0.0.0.0:5060 tcp://0.0.0.0:5060"},
		{"10.0.0.5", "udp://10.0.0.5:9060 tcp://10.0.0.5:9060"},
		{"[::1]:5062", "udp://[::1]:5062 tcp://[::1]:5062"},
		{"[::1]", "udp://[::1]:9060 tcp://[::1]:9060"},
		{"", "error: is empty"},
		{"sctp://0.0.0.0:5060", "error: \"sctp://0.0.0.0:5060\": transport \"sctp\""},
		{"sip:0.0.0.0", "error: \"sip:0.0.0.0\": port \"0.0.0.0\""},
		{"udp://sbc.clinic.example:5060", "error: \"udp://sbc.clinic.example:5060\": \"sbc.clinic.example\" is a host name"},
		{"localhost", "error: \"localhost\": \"localhost\" is a host name"},
		{"udp://10.0.0.256:5060", "error: \"udp://10.0.0.256:5060\": \"10.0.0.256\" is not an IP address"},
		{"udp://::1:5060", "error: \"udp://::1:5060\": write an IPv6 address in brackets"},
		{"udp://[h]:5060", "error: \"udp://[h]:5060\": \"h\" in brackets"},
		{"udp://[10.0.0.1]:5060", "error: \"udp://[10.0.0.1]:5060\": \"10.0.0.1\" in brackets"},
		{"[10.0.0.1]", "error: \"[10.0.0.1]\": \"10.0.0.1\" in brackets"},
		{"udp://[]", "error: \"udp://[]\": \"\" in brackets"},
		{"udp://0.0.0.0:65536", "error: \"udp://0.0.0.0:65536\": port \"65536\""},
		{"udp://u@0.0.0.0:5060", "error: \"udp://u@0.0.0.0:5060\" is not a listen address"},
		{"udp://0.0.0.0:5060/x", "error: \"udp://0.0.0.0:5060/x\" is not a listen address"},
		{"udp://[fe80::1%eth0]:5060", "error: \"udp://[fe80::1%eth0]:5060\": an IPv6 zone"},
	}
	for _, tc := range cases {
		ls, err := ParseListen(tc.in, 9060)
		if w, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
			if err == nil || !strings.HasPrefix(err.Error(), w) {
				t.Errorf("ParseListen(%q) = %v, %v; want an error starting %q", tc.in, ls, err, w)
			}
			continue
		}
		var got []string
		for _, l := range ls {
			got = append(got, l.String())
		}
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("ParseListen(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestParseListens(t *testing.T) {
	cases := []struct {
		in   []string
		want []string // the lines of the error; none: valid
	}{
		{[]string{"udp://0.0.0.0:5060", "tcp://0.0.0.0:5060"}, nil},
		{[]string{"udp://10.0.0.5:5060", "udp://10.0.0.6:5060", "udp://127.0.0.1:0", "udp://127.0.0.1:0"}, nil},
		{[]string{"0.0.0.0:5060", "udp://[::]:5060", "tcp://10.0.0.5:5060", "udp://10.0.0.5:5062", "udp://10.0.0.5:5062", "x"},
			[]string{
				"listen[1]: udp://[::]:5060 cannot listen beside udp://0.0.0.0:5060 of listen[0]",
				"listen[2]: tcp://10.0.0.5:5060 cannot listen beside tcp://0.0.0.0:5060 of listen[0]",
				"listen[4]: udp://10.0.0.5:5062 cannot listen beside udp://10.0.0.5:5062 of listen[3]",
				`listen[5]: "x": "x" is a host name`,
			}},
	}
	for _, tc := range cases {
		_, err := ParseListens("listen", tc.in, 5060)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%q: %v", tc.in, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: no error", tc.in)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != len(tc.want) {
			t.Errorf("%q: got\n%v", tc.in, err)
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("%q: line %d = %q, want %q", tc.in, i, lines[i], w)
			}
		}
	}
}

// TestListenerValid: what ParseListen returns is valid; a Listener without a transport, without
// an address or with an IPv6 zone is not.
func TestListenerValid(t *testing.T) {
	ls, err := ParseListen("[::1]:5060", 5060)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if !l.Valid() {
			t.Errorf("%v from ParseListen is not valid", l)
		}
	}
	for _, l := range []Listener{
		{},
		{Transport: "sctp", Addr: netip.MustParseAddrPort("127.0.0.1:5060")},
		{Transport: UDP},
		{Transport: TCP, Addr: netip.MustParseAddrPort("[fe80::1%eth0]:5060")},
	} {
		if l.Valid() {
			t.Errorf("%#v is valid", l)
		}
	}
}
