package callmodel

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseReasons(t *testing.T) {
	tests := []struct {
		name      string
		value     string
		want      []reason
		wantErr   bool
		elsewhere bool
	}{
		{
			name:      "RFC 3326 SIP cause 200",
			value:     `SIP ;cause=200 ;text="Call completed elsewhere"`,
			want:      []reason{{protocol: "SIP", cause: 200, text: "Call completed elsewhere"}},
			elsewhere: true,
		},
		{
			name:  "RFC 3326 Q.850",
			value: `Q.850 ;cause=16 ;text="Terminated"`,
			want:  []reason{{protocol: "Q.850", cause: 16, text: "Terminated"}},
		},
		{
			name:  "both, comma-separated, text with comma and escaped quote",
			value: `SIP;cause=480;text="Temporarily, \"away\"", Q.850;cause=18`,
			want:  []reason{{protocol: "SIP", cause: 480, text: `Temporarily, "away"`}, {protocol: "Q.850", cause: 18}},
		},
		{
			name:      "lower-case protocol and names",
			value:     `sip;CAUSE=200;Text="call completed elsewhere"`,
			want:      []reason{{protocol: "SIP", cause: 200, text: "call completed elsewhere"}},
			elsewhere: true,
		},
		{
			name:      "Q.850 26 non-selected user clearing",
			value:     `Q.850;cause=26`,
			want:      []reason{{protocol: "Q.850", cause: 26}},
			elsewhere: true,
		},
		{
			name:  "cause not a number",
			value: `SIP;cause=abc;text=unquoted`,
			want:  []reason{{protocol: "SIP", text: "unquoted"}},
		},
		{
			name:    "no protocol",
			value:   `;cause=200`,
			wantErr: true,
		},
		{
			name:    "unterminated quote",
			value:   `SIP;cause=487;text="Request Terminated`,
			want:    []reason{{protocol: "SIP", cause: 487, text: `"Request Terminated`}},
			wantErr: false,
		},
		{name: "empty", value: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseReasons(tc.value)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if e := answeredElsewhere(got); e != tc.elsewhere {
				t.Errorf("answeredElsewhere = %v, want %v", e, tc.elsewhere)
			}
		})
	}
}

func TestMessageReasons(t *testing.T) {
	bye := "BYE sip:alice@pc33.atlanta.example.com SIP/2.0\n" +
		"Via: SIP/2.0/UDP 10.0.0.31:5060;branch=z9hG4bKnashds10\n" +
		"From: <sip:201@pbx.example>;tag=1928301774\n" +
		"To: <sip:+15557654321@carrier.example>;tag=a6c85cf\n" +
		"Call-ID: a84b4c76e66710@10.0.0.31\n" +
		"CSeq: 231 BYE\n" +
		"Reason: Q.850;cause=16;text=\"Normal call clearing\"\n" +
		"reason: SIP;cause=486;text=\"Busy Here\""
	rs := messageReasons(parseSIP(t, bye, ""))
	if len(rs) != 2 {
		t.Fatalf("reasons = %+v", rs)
	}
	r, ok := sipCause(rs)
	if !ok || r.cause != 486 || r.text != "Busy Here" {
		t.Errorf("sipCause = %+v, %v", r, ok)
	}
	if _, ok := sipCause(rs[:1]); ok {
		t.Error("sipCause found a SIP cause among Q.850 reasons")
	}
	if _, ok := sipCause([]reason{{protocol: "SIP", cause: 99}}); ok {
		t.Error("sipCause accepted cause 99")
	}
	long, _ := parseReasons(`SIP;cause=500;text="` + strings.Repeat("é", 300) + `"`)
	if n := len([]rune(long[0].text)); n != maxReasonText {
		t.Errorf("text of %d characters kept, want %d", n, maxReasonText)
	}
}
