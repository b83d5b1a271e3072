package callmodel

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets feed free text to each reader: none may panic, and what they return must
// keep the limits the tracker relies on.

func FuzzReadSDP(f *testing.F) {
	f.Add([]byte(offer("1", nil, []string{"a=sendonly"})))
	f.Add([]byte("v=0\no=- 1 2 IN IP6 ::1\nc=IN IP6 ::\nm=audio 0 RTP/AVP 0\na=bundle-only\nm=video 5/2 RTP/AVP 96\na=inactive"))
	f.Add([]byte("m=\nc=\na=\no=\nv="))
	f.Fuzz(func(t *testing.T, body []byte) {
		info, err := readSDP(body)
		if err != nil {
			return
		}
		if info.held && info.streams == 0 {
			t.Errorf("held with no streams: %+v", info)
		}
		again, _ := readSDP(body)
		if again != info {
			t.Errorf("not deterministic: %+v then %+v", info, again)
		}
	})
}

func FuzzSDPBody(f *testing.F) {
	f.Add("multipart/mixed; boundary=b", []byte("--b\r\nContent-Type: application/sdp\r\n\r\nv=0\r\nm=audio 1 RTP/AVP 0\r\n--b--\r\n"))
	f.Add("multipart/mixed; boundary=b", []byte("--b\r\nContent-Type: multipart/mixed; boundary=c\r\n\r\n--c\r\nContent-Type: application/sdp\r\n\r\nv=0\r\n--c--\r\n--b--"))
	f.Add("application/sdp", []byte("v=0"))
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		sdp, ok, err := sdpBody(ct, body, 0)
		if err != nil && ok {
			t.Errorf("ok with error %v", err)
		}
		if len(sdp) > len(body) {
			t.Errorf("found %d bytes of SDP in a body of %d", len(sdp), len(body))
		}
	})
}

func FuzzReferTo(f *testing.F) {
	f.Add(`<sips:bob@phone2.biloxi.example?Replaces=12345%40192.168.118.3%3Bto-tag%3D12345%3Bfrom-tag%3D5FFE-3994>`)
	f.Add(`"Nurse" <sip:305@pbx.example;user=phone>;method=INVITE`)
	f.Add(`<tel:+15559990000>`)
	f.Add(`sip:a@b?Replaces=%ZZ;to-tag`)
	f.Fuzz(func(t *testing.T, v string) {
		rt, err := parseReferTo(v)
		if err != nil && rt != (referTarget{}) {
			t.Errorf("error %v with a target %+v", err, rt)
		}
		if !rt.attended && rt.replaces != (replaces{}) {
			t.Errorf("replaces without attended: %+v", rt)
		}
	})
}

func FuzzDiversion(f *testing.F) {
	f.Add(`<sip:+15551230100@pbx.example>;reason=unconditional;counter=1;privacy=off, "A" <tel:+1>;reason="x"`)
	f.Add(`<sip:1@a>;counter=99999999999999999999`)
	f.Fuzz(func(t *testing.T, v string) {
		ds, _ := parseDiversion(splitList(v))
		checkHops(t, ds)
	})
}

func FuzzHistoryInfo(f *testing.F) {
	f.Add(`<sip:bob@example.com>;index=1, <sip:bob@192.0.2.4?Reason=SIP%3Bcause%3D486>;index=1.1;rc=1, <sip:carol@example.com;cause=486>;index=1.2;mp=1`)
	f.Add(`<sip:a@x>;index=1.1;mp=1.1, <sip:b@x>;index=1;mp=1.1.1, <sip:c@x>;index=1.1.1;mp=1`)
	f.Add(`<sip:a@x>;index=1, <sip:b@x>;index=1.99999999999999999999`)
	f.Fuzz(func(t *testing.T, v string) {
		ds, _ := parseHistoryInfo(splitList(v))
		checkHops(t, ds)
	})
}

func checkHops(t *testing.T, ds []diversion) {
	t.Helper()
	for _, d := range ds {
		if utf8.RuneCountInString(d.reason) > maxReasonLen || d.reason != strings.ToLower(d.reason) {
			t.Errorf("reason %q: not lower case within %d characters", d.reason, maxReasonLen)
		}
		if d.counter != nil && (*d.counter < 0 || *d.counter > 100) {
			t.Errorf("counter %d out of 0 to 100", *d.counter)
		}
		if d.anonymous && d.party != (party{}) {
			t.Errorf("anonymous hop with a party: %+v", d)
		}
	}
}

func FuzzReasons(f *testing.F) {
	f.Add(`SIP ;cause=200 ;text="Call completed elsewhere", Q.850;cause=16`)
	f.Add(`SIP;cause=480;text="a\"b,c"`)
	f.Add(`;;;,,"`)
	f.Fuzz(func(t *testing.T, v string) {
		rs, _ := parseReasons(v)
		for _, r := range rs {
			if r.protocol == "" || r.cause < 0 || utf8.RuneCountInString(r.text) > maxReasonText {
				t.Errorf("reason %+v breaks the limits", r)
			}
		}
	})
}

func FuzzCallerIdentity(f *testing.F) {
	f.Add(`"Anonymous" <sip:anonymous@anonymous.invalid>;tag=1`, `"C J" <sip:fluffy@cisco.com>, tel:+14085264000`, `"A" <sip:1@b>;party=calling;privacy=name`, "id;critical")
	f.Fuzz(func(t *testing.T, from, pai, rpid, privacy string) {
		for _, s := range []string{from, pai, rpid, privacy} {
			if strings.ContainsAny(s, "\r\n") {
				return
			}
		}
		msg, err := newParser().ParseSIP([]byte(strings.ReplaceAll(invite(
			"From: "+from, "P-Asserted-Identity: "+pai, "Remote-Party-ID: "+rpid, "Privacy: "+privacy,
		), "\n", "\r\n") + "\r\nContent-Length: 0\r\n\r\n"))
		if err != nil {
			return
		}
		h, ok := msg.(headerer)
		if !ok {
			return
		}
		id, err := callerIdentity(h)
		if err == nil && id.anonymous && id.party != (party{}) {
			t.Errorf("anonymous identity with a party: %+v", id)
		}
	})
}
