package callmodel

import (
	"strings"
	"testing"
)

// sdpText joins lines with CRLF and a final CRLF, as a well-behaved UA writes them.
func sdpText(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n" }

// offer is the RFC 3264 section 10.1 style audio offer with the given extra lines at the session
// level (before m=) and media level (after m=).
func offer(version string, session, media []string) string {
	lines := []string{"v=0", "o=alice 2890844526 " + version + " IN IP4 host.atlanta.example.com", "s=-", "c=IN IP4 host.atlanta.example.com", "t=0 0"}
	lines = append(lines, session...)
	lines = append(lines, "m=audio 49170 RTP/AVP 0 8 97", "a=rtpmap:0 PCMU/8000")
	lines = append(lines, media...)
	return sdpText(lines...)
}

func TestReadSDPHold(t *testing.T) {
	tests := []struct {
		name string
		body string
		held bool
		dir  direction
		n    int
	}{
		{name: "sendrecv by default", body: offer("2890844526", nil, nil), dir: dirSendRecv, n: 1},
		{name: "a=sendrecv", body: offer("1", nil, []string{"a=sendrecv"}), dir: dirSendRecv, n: 1},
		{name: "RFC 3264 hold: a=sendonly", body: offer("2", nil, []string{"a=sendonly"}), held: true, dir: dirSendOnly, n: 1},
		{name: "a=inactive", body: offer("2", nil, []string{"a=inactive"}), held: true, dir: dirInactive, n: 1},
		{name: "answer to hold: recvonly is not held", body: offer("2", nil, []string{"a=recvonly"}), dir: dirRecvOnly, n: 1},
		{name: "session-level sendonly", body: offer("2", []string{"a=sendonly"}, nil), held: true, dir: dirSendOnly, n: 1},
		{name: "media level overrides session level", body: offer("2", []string{"a=sendonly"}, []string{"a=sendrecv"}), dir: dirSendRecv, n: 1},
		{name: "media level inactive over session sendrecv", body: offer("2", []string{"a=sendrecv"}, []string{"a=inactive"}), held: true, dir: dirInactive, n: 1},
		{name: "upper-case attribute", body: offer("2", nil, []string{"a=SendOnly"}), held: true, dir: dirSendOnly, n: 1},
		{
			name: "RFC 2543 hold: c=IN IP4 0.0.0.0 at session level",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "c=IN IP4 0.0.0.0", "t=0 0", "m=audio 4000 RTP/AVP 0"),
			held: true, dir: dirSendRecv, n: 1,
		},
		{
			name: "c=IN IP6 :: at media level",
			body: sdpText("v=0", "o=- 1 2 IN IP6 2001:db8::1", "s=-", "c=IN IP6 2001:db8::1", "t=0 0", "m=audio 4000 RTP/AVP 0", "c=IN IP6 ::"),
			held: true, dir: dirSendRecv, n: 1,
		},
		{
			name: "media c= overrides a zero session c=",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "c=IN IP4 0.0.0.0", "t=0 0", "m=audio 4000 RTP/AVP 0", "c=IN IP4 10.0.0.31"),
			dir:  dirSendRecv, n: 1,
		},
		{
			name: "multicast c= with TTL",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "c=IN IP4 224.2.1.1/127", "t=0 0", "m=audio 4000 RTP/AVP 0"),
			dir:  dirSendRecv, n: 1,
		},
		{
			name: "disabled audio stream ignored",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "c=IN IP4 10.0.0.31", "t=0 0",
				"m=audio 0 RTP/AVP 0", "m=audio 4002 RTP/AVP 0", "a=sendonly"),
			held: true, dir: dirSendOnly, n: 1,
		},
		{
			name: "audio held, video not: audio decides",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "c=IN IP4 10.0.0.31", "t=0 0",
				"m=audio 4000 RTP/AVP 0", "a=sendonly", "m=video 4002 RTP/AVP 96", "a=sendrecv"),
			held: true, dir: dirSendOnly, n: 1,
		},
		{
			name: "one of two audio streams held is not a hold",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "c=IN IP4 10.0.0.31", "t=0 0",
				"m=audio 4000 RTP/AVP 0", "a=sendonly", "m=audio 4002 RTP/AVP 0"),
			dir: dirSendRecv, n: 2,
		},
		{
			name: "no active audio: the other streams decide",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "c=IN IP4 10.0.0.31", "t=0 0",
				"m=audio 0 RTP/AVP 0", "m=image 4002 udptl t38", "a=inactive"),
			held: true, dir: dirInactive, n: 1,
		},
		{
			name: "every stream disabled is not a hold",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "t=0 0", "m=audio 0 RTP/AVP 0", "a=inactive"),
			dir:  dirSendRecv,
		},
		{
			name: "bundle-only port 0 is active",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "c=IN IP4 10.0.0.31", "t=0 0",
				"m=audio 0 UDP/TLS/RTP/SAVPF 111", "a=bundle-only", "a=sendonly"),
			held: true, dir: dirSendOnly, n: 1,
		},
		{
			name: "no s=, LF line ends, no final line end",
			body: "v=0\no=- 1 2 IN IP4 10.0.0.31\nc=IN IP4 10.0.0.31\nt=0 0\nm=audio 4000 RTP/AVP 0\na=sendonly",
			held: true, dir: dirSendOnly, n: 1,
		},
		{
			name: "stray spaces and junk lines",
			body: "v=0\r\n  o=- 1 2 IN IP4 10.0.0.31  \r\nnot a line\r\n\r\nm=audio 4000 RTP/AVP 0\r\na= inactive \r\nx\r\n",
			held: true, dir: dirInactive, n: 1,
		},
		{
			name: "no media",
			body: sdpText("v=0", "o=- 1 2 IN IP4 10.0.0.31", "s=-", "t=0 0"),
			dir:  dirSendRecv,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readSDP([]byte(tc.body))
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got.held != tc.held || got.dir != tc.dir || got.streams != tc.n {
				t.Errorf("got held=%v dir=%v streams=%d; want held=%v dir=%v streams=%d", got.held, got.dir, got.streams, tc.held, tc.dir, tc.n)
			}
		})
	}
}

func TestReadSDPNotSDP(t *testing.T) {
	for _, body := range []string{"", "hello", "<xml/>", "a=sendonly\r\nc=IN IP4 0.0.0.0\r\n"} {
		if _, err := readSDP([]byte(body)); err == nil {
			t.Errorf("readSDP(%q): no error", body)
		}
	}
}

func TestSDPFingerprint(t *testing.T) {
	fp := func(body string) uint64 {
		t.Helper()
		info, err := readSDP([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return info.fingerprint
	}
	base := offer("2890844526", nil, nil)
	tests := []struct {
		name string
		body string
		same bool
	}{
		// RFC 4028 session refresh: the same SDP, same o= version.
		{name: "refresh with unchanged SDP", body: base, same: true},
		{name: "same SDP with LF line ends and spacing", body: strings.ReplaceAll(strings.ReplaceAll(base, "\r\n", "\n"), "IN IP4", "IN  IP4"), same: true},
		{name: "attribute that does not matter", body: strings.Replace(base, "a=rtpmap:0 PCMU/8000", "a=rtpmap:0 PCMU/8000\r\na=ptime:20", 1), same: true},
		{name: "o= version bumped", body: offer("2890844527", nil, nil)},
		{name: "direction changed, version kept (a careless UA)", body: offer("2890844526", nil, []string{"a=sendonly"})},
		{name: "port changed", body: strings.Replace(base, "m=audio 49170", "m=audio 49172", 1)},
	}
	want := fp(base)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fp(tc.body); (got == want) != tc.same {
				t.Errorf("fingerprint equal = %v, want %v", got == want, tc.same)
			}
		})
	}
}

func TestMessageSDP(t *testing.T) {
	hold := sdpText("v=0", "o=- 1 3 IN IP4 10.0.0.31", "s=-", "c=IN IP4 10.0.0.31", "t=0 0", "m=audio 4000 RTP/AVP 0", "a=sendonly")
	isup := "\x01\x00\x49\x00\x00\x03\x02\x00\x07\x04\x10\x00\x33\x63\x21\x43\x00\x00\x03"
	multipart := "--unique-boundary-1\r\n" +
		"Content-Type: application/SDP; charset=ISO-10646\r\n\r\n" + hold +
		"\r\n--unique-boundary-1\r\n" +
		"Content-Type: application/ISUP; version=nxv3; base=etsi121\r\n" +
		"Content-Disposition: signal; handling=optional\r\n\r\n" + isup +
		"\r\n--unique-boundary-1--\r\n"
	tests := []struct {
		name    string
		headers []string
		body    string
		present bool
		held    bool
		wantErr bool
	}{
		{name: "application/sdp", headers: []string{"Content-Type: application/sdp"}, body: hold, present: true, held: true},
		{name: "compact content type", headers: []string{"c: Application/SDP"}, body: hold, present: true, held: true},
		{name: "no content type but SDP", body: hold, present: true, held: true},
		{name: "RFC 3204 multipart with ISUP", headers: []string{`Content-Type: multipart/mixed; boundary=unique-boundary-1`, "MIME-Version: 1.0"}, body: multipart, present: true, held: true},
		{name: "multipart with LF only", headers: []string{`Content-Type: multipart/mixed;boundary="unique-boundary-1"`}, body: strings.ReplaceAll(multipart, "\r\n", "\n"), present: true, held: true},
		{name: "multipart without SDP", headers: []string{`Content-Type: multipart/mixed;boundary=b`}, body: "--b\r\nContent-Type: application/isup\r\n\r\n" + isup + "\r\n--b--\r\n"},
		{name: "multipart without boundary", headers: []string{`Content-Type: multipart/mixed`}, body: "--b\r\n", wantErr: true},
		{name: "other body", headers: []string{"Content-Type: application/dtmf-relay"}, body: "Signal=1\r\nDuration=160\r\n"},
		{name: "no body", headers: []string{"Content-Type: application/sdp"}},
		{name: "SDP content type, not SDP", headers: []string{"Content-Type: application/sdp"}, body: "garbage\r\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := parseSIP(t, invite(append([]string{`From: <sip:a@b.example>;tag=1`}, tc.headers...)...), tc.body)
			info, present, err := messageSDP(msg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if present != tc.present || info.held != tc.held {
				t.Errorf("present=%v held=%v, want present=%v held=%v", present, info.held, tc.present, tc.held)
			}
		})
	}
}

// BenchmarkReadSDP reads a typical offer: one audio stream, three codecs, no direction.
func BenchmarkReadSDP(b *testing.B) {
	body := []byte(sdpText("v=0", "o=- 4711 1 IN IP4 198.51.100.7", "s=-", "c=IN IP4 198.51.100.7", "t=0 0",
		"m=audio 20000 RTP/AVP 0 8 101", "a=rtpmap:0 PCMU/8000", "a=rtpmap:8 PCMA/8000",
		"a=rtpmap:101 telephone-event/8000", "a=ptime:20", "a=sendrecv"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readSDP(body); err != nil {
			b.Fatal(err)
		}
	}
}
