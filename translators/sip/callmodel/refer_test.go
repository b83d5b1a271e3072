package callmodel

import (
	"strings"
	"testing"

	"github.com/emiago/sipgo/sip"
)

func refer(extra ...string) string {
	return "REFER sip:bob@192.0.2.4 SIP/2.0\n" +
		"Via: SIP/2.0/UDP 10.0.0.31:5060;branch=z9hG4bKnashds9\n" +
		"Max-Forwards: 70\n" +
		"From: <sip:201@pbx.example>;tag=1928301774\n" +
		"To: <sip:+15557654321@carrier.example>;tag=a6c85cf\n" +
		"Call-ID: a84b4c76e66710@10.0.0.31\n" +
		"CSeq: 93809823 REFER\n" +
		strings.Join(extra, "\n")
}

func TestReferTarget(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		want    referTarget
		wantErr string
	}{
		{
			name:    "RFC 3515 blind, addr-spec",
			headers: []string{"Refer-To: sip:dave@denver.example.org"},
			want:    referTarget{party: party{user: "dave", uri: "sip:dave@denver.example.org"}},
		},
		{
			name:    "blind, name-addr with display, compact",
			headers: []string{`r: "Nurse station" <sip:305@pbx.example;user=phone>`},
			want:    referTarget{party: party{display: "Nurse station", user: "305", uri: "sip:305@pbx.example;user=phone", phone: true}},
		},
		{
			name:    "blind to a tel URI",
			headers: []string{"Refer-To: <tel:+15559990000>"},
			want:    referTarget{party: party{user: "+15559990000", uri: "tel:+15559990000", phone: true}},
		},
		{
			// RFC 3891 section 6.1.
			name:    "attended, RFC 3891 example",
			headers: []string{"Refer-To: <sips:bob@phone2.biloxi.example?Replaces=12345%40192.168.118.3%3Bto-tag%3D12345%3Bfrom-tag%3D5FFE-3994>"},
			want: referTarget{
				party:    party{user: "bob", uri: "sips:bob@phone2.biloxi.example"},
				attended: true,
				replaces: replaces{callID: "12345@192.168.118.3", toTag: "12345", fromTag: "5FFE-3994"},
			},
		},
		{
			name:    "attended, Asterisk style with other headers, lower-case",
			headers: []string{"refer-to: <sip:202@pbx.example?Require=replaces&replaces=b2b-1%40pbx%3Bfrom-tag%3Dxyz%3Bto-tag%3Dabc%3Bearly-only>"},
			want: referTarget{
				party:    party{user: "202", uri: "sip:202@pbx.example"},
				attended: true,
				replaces: replaces{callID: "b2b-1@pbx", toTag: "abc", fromTag: "xyz", earlyOnly: true},
			},
		},
		{
			name:    "attended, unescaped Replaces inside brackets",
			headers: []string{"Refer-To: <sip:202@pbx.example?Replaces=abc@pbx;to-tag=1;from-tag=2>"},
			want: referTarget{
				party:    party{user: "202", uri: "sip:202@pbx.example"},
				attended: true,
				replaces: replaces{callID: "abc@pbx", toTag: "1", fromTag: "2"},
			},
		},
		{
			name:    "attended, empty Replaces",
			headers: []string{"Refer-To: <sip:202@pbx.example?Replaces=>"},
			want:    referTarget{party: party{user: "202", uri: "sip:202@pbx.example"}, attended: true},
		},
		{
			name:    "two Refer-To: first read, reported",
			headers: []string{"Refer-To: <sip:1@pbx.example>", "Refer-To: <sip:2@pbx.example>"},
			want:    referTarget{party: party{user: "1", uri: "sip:1@pbx.example"}},
			wantErr: "2 Refer-To values",
		},
		{name: "missing", wantErr: "no Refer-To"},
		{name: "malformed", headers: []string{"Refer-To: <sip:[::1>"}, wantErr: "refer-to"},
		{name: "malformed, compact", headers: []string{"r: <sip:[::1>"}, wantErr: "refer-to"},
		{
			name:    "full form with display name and parameters",
			headers: []string{`Refer-To: "Nurse station" <sip:305@pbx.example>;method=INVITE`},
			want:    referTarget{party: party{display: "Nurse station", user: "305", uri: "sip:305@pbx.example"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := referTargetOf(parseSIP(t, refer(tc.headers...), ""))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestNewParserKeepsReferTo shows why newParser exists: sipgo's default parser drops the
// Refer-To display name and refuses a message whose Refer-To does not parse.
func TestNewParserKeepsReferTo(t *testing.T) {
	text := strings.ReplaceAll(refer(`Refer-To: "Nurse station" <sip:305@pbx.example>`), "\n", "\r\n") + "\r\nContent-Length: 0\r\n\r\n"
	def, err := sip.ParseMessage([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := referTargetOf(def.(*sip.Request)); got.party.display != "" {
		t.Fatalf("sipgo's default parser kept the display name %q; newParser may no longer be needed", got.party.display)
	}
	own, err := newParser().ParseSIP([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := referTargetOf(own.(*sip.Request)); got.party.display != "Nurse station" {
		t.Errorf("display = %q, want %q", got.party.display, "Nurse station")
	}
	bad := strings.Replace(text, "<sip:305@pbx.example>", "<sip:[::1>", 1)
	if _, err := sip.ParseMessage([]byte(bad)); err == nil {
		t.Fatal("sipgo's default parser accepted a malformed Refer-To; newParser may no longer be needed")
	}
	if _, err := newParser().ParseSIP([]byte(bad)); err != nil {
		t.Errorf("newParser refused a message with a malformed Refer-To: %v", err)
	}
}
