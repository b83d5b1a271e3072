package event

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// encodingJSON is what encoding/json writes for s, with HTML escaping on or off.
func encodingJSON(t testing.TB, s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

func TestAppendJSONString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"INVITE sip:100@pbx SIP/2.0\r\nTo: <sip:100@pbx>\r\n", `"INVITE sip:100@pbx SIP/2.0\r\nTo: <sip:100@pbx>\r\n"`},
		{`a "quoted" \ back`, `"a \"quoted\" \\ back"`},
		{"tab\tnul\x00bel\x07del\x7f\b\f", `"tab\tnul\u0000bel\u0007del` + "\x7f" + `\b\f"`},
		{"Zoë Ünal ☎", `"Zoë Ünal ☎"`},
		{"bad \xff byte", `"bad \ufffd byte"`},
		{"cut \xe2\x98", `"cut \ufffd\ufffd"`},
		{"line\u2028para\u2029", `"line\u2028para\u2029"`},
		{"eight ok then \"quote\" and 0123456789abcdef\x01", `"eight ok then \"quote\" and 0123456789abcdef\u0001"`},
	} {
		if got := string(AppendJSONString(nil, tc.in, false)); got != tc.want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if got := string(AppendJSONString(nil, []byte(tc.in), false)); got != tc.want {
			t.Errorf("AppendJSONString([]byte %q) = %s, want %s", tc.in, got, tc.want)
		}
		if want := encodingJSON(t, tc.in, false); tc.want != want {
			t.Errorf("case %q: want %s, but encoding/json writes %s", tc.in, tc.want, want)
		}
		if got, want := string(AppendJSONString(nil, tc.in, true)), encodingJSON(t, tc.in, true); got != want {
			t.Errorf("AppendJSONString(%q, escapeHTML) = %s, want %s", tc.in, got, want)
		}
	}
}

// TestAppendJSONStringRandom compares the escaping with encoding/json's on random text, valid UTF-8
// or not, long enough for the eight-byte runs.
func TestAppendJSONStringRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune{'a', 'b', ' ', '"', '\\', '\n', '\r', '<', '>', '&', 0, 0x1f, 0x7f, 'é', '\u2028', '\u2029', 0x1F4DE, utf8.RuneError}
	for i := range 3000 {
		var b []byte
		for range r.IntN(40) {
			if r.IntN(6) == 0 {
				b = append(b, byte(r.IntN(256))) // often invalid UTF-8
				continue
			}
			b = utf8.AppendRune(b, alphabet[r.IntN(len(alphabet))])
		}
		for _, html := range []bool{false, true} {
			want := encodingJSON(t, string(b), html)
			if got := AppendJSONString(nil, string(b), html); string(got) != want {
				t.Fatalf("case %d %q (escapeHTML %v): got %s, want %s", i, b, html, got, want)
			}
			if got := AppendJSONString(nil, b, html); string(got) != want {
				t.Fatalf("case %d []byte %q (escapeHTML %v): got %s, want %s", i, b, html, got, want)
			}
		}
	}
}

// FuzzAppendJSONString: for any bytes, exactly what encoding/json writes, with HTML escaping
// on and off.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a", `"\`, "\x00\x1f\x7f", "\u2028\u2029", "\xff", "caf\u00e9", "<&>",
		"SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK\r\n\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		for _, html := range []bool{false, true} {
			want := encodingJSON(t, string(s), html)
			if got := AppendJSONString(nil, s, html); string(got) != want {
				t.Fatalf("%q (escapeHTML %v): got %s, want %s", s, html, got, want)
			}
			if got := AppendJSONString(nil, string(s), html); string(got) != want {
				t.Fatalf("string %q (escapeHTML %v): got %s, want %s", s, html, got, want)
			}
		}
	})
}

// AppendJSONString into a buffer large enough allocates nothing.
func TestAppendJSONStringAllocates(t *testing.T) {
	s := "SIP/2.0 180 Ringing\r\nVia: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-1\r\nFrom: \"Zoë\" <sip:a@b>;tag=1\r\n\r\n"
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { AppendJSONString(buf, s, true); AppendJSONString(buf, []byte(s), false) }); n != 0 {
		t.Errorf("AppendJSONString allocates %v times, want 0", n)
	}
}

func BenchmarkAppendJSONString(b *testing.B) {
	msg := bytes.Repeat([]byte("Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-1;rport\r\n"), 16)
	buf := make([]byte, 0, 2*len(msg))
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		buf = AppendJSONString(buf[:0], msg, false)
	}
}

// BenchmarkAppendJSONStringInvite escapes an INVITE with its SDP, as the SIP observer does for the
// raw of every event: short lines, each ending in CRLF, with quotes in its name-addrs.
func BenchmarkAppendJSONStringInvite(b *testing.B) {
	msg := []byte("INVITE sip:+15551230100@10.0.0.20:5060 SIP/2.0\r\n" +
		"Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bK-524287-1---77ad4cc0a0e4ad2c;rport\r\n" +
		"Max-Forwards: 69\r\n" +
		"From: \"Zoë Ünal\" <sip:+15557654321@203.0.113.5>;tag=8c2a1b\r\n" +
		"To: <sip:+15551230100@10.0.0.20>\r\n" +
		"Call-ID: 1-4242@203.0.113.5\r\n" +
		"CSeq: 1 INVITE\r\n" +
		"Contact: <sip:+15557654321@203.0.113.5:5060>\r\n" +
		"P-Asserted-Identity: \"Zoe Unal\" <sip:+15557654321@carrier.example>\r\n" +
		"Allow: INVITE, ACK, CANCEL, OPTIONS, BYE, REFER, NOTIFY, UPDATE\r\n" +
		"Content-Type: application/sdp\r\n" +
		"Content-Length: 152\r\n\r\n" +
		"v=0\r\no=- 4242 4242 IN IP4 203.0.113.5\r\ns=-\r\nc=IN IP4 203.0.113.5\r\nt=0 0\r\n" +
		"m=audio 6000 RTP/AVP 0 8 101\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:101 telephone-event/8000\r\na=sendrecv\r\n")
	buf := make([]byte, 0, 2*len(msg))
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		buf = AppendJSONString(buf[:0], msg, false)
	}
}
