package callmodel

import (
	"strings"
	"testing"
)

func TestCallerIdentity(t *testing.T) {
	anon := func(src identitySource) identity { return identity{source: src, anonymous: true} }
	tests := []struct {
		name    string
		headers []string
		want    identity
		wantErr string
	}{
		{
			name:    "From only",
			headers: []string{`From: "Alice" <sip:+15557654321@carrier.example>;tag=1928301774`},
			want:    identity{party: party{display: "Alice", user: "+15557654321", uri: "sip:+15557654321@carrier.example"}, source: sourceFrom},
		},
		{
			name:    "compact From",
			headers: []string{`f: Bob <sip:bob@biloxi.example.com>;tag=1`},
			want:    identity{party: party{display: "Bob", user: "bob", uri: "sip:bob@biloxi.example.com"}, source: sourceFrom},
		},
		{
			name:    "From addr-spec with escaped user",
			headers: []string{`From: sip:%2B15557654321@carrier.example;tag=1`},
			want:    identity{party: party{user: "+15557654321", uri: "sip:%2B15557654321@carrier.example"}, source: sourceFrom},
		},
		{
			// RFC 3325 section 10, from a trusted carrier: sip and tel values, tel preferred,
			// the display name taken from the sip value.
			name: "RFC 3325 PAI sip and tel",
			headers: []string{
				`From: "Anonymous" <sip:anonymous@anonymous.invalid>;tag=9802748`,
				`P-Asserted-Identity: "Cullen Jennings" <sip:fluffy@cisco.com>`,
				`P-Asserted-Identity: tel:+14085264000`,
			},
			// The From is anonymous: the caller asked for privacy.
			want: anon(sourcePAI),
		},
		{
			name: "PAI tel preferred, display from sip value",
			headers: []string{
				`From: <sip:+14085264000@carrier.example>;tag=1`,
				`P-Asserted-Identity: "Cullen Jennings" <sip:fluffy@cisco.com>, <tel:+14085264000>`,
			},
			want: identity{party: party{display: "Cullen Jennings", user: "+14085264000", uri: "tel:+14085264000", phone: true}, source: sourcePAI},
		},
		{
			name: "PAI user=phone preferred over plain sip",
			headers: []string{
				`From: <sip:100@pbx.example>;tag=1`,
				`P-Asserted-Identity: <sip:100@pbx.example>`,
				`p-asserted-identity: <sip:+15551230100@pbx.example;user=phone>`,
			},
			want: identity{party: party{user: "+15551230100", uri: "sip:+15551230100@pbx.example;user=phone", phone: true}, source: sourcePAI},
		},
		{
			name: "PAI over RPID over From",
			headers: []string{
				`From: "Front desk" <sip:200@pbx.example>;tag=1`,
				`Remote-Party-ID: "Clinic" <sip:+15551230199@pbx.example>;party=calling;screen=yes;privacy=off`,
				`P-Asserted-Identity: "Clinic main" <sip:+15551230100@pbx.example>`,
			},
			want: identity{party: party{display: "Clinic main", user: "+15551230100", uri: "sip:+15551230100@pbx.example"}, source: sourcePAI},
		},
		{
			name: "Asterisk RPID over From",
			headers: []string{
				`From: "200" <sip:200@pbx.example>;tag=1`,
				`Remote-Party-ID: "Clinic" <sip:+15551230199@pbx.example>;party=calling;screen=no;privacy=off`,
			},
			want: identity{party: party{display: "Clinic", user: "+15551230199", uri: "sip:+15551230199@pbx.example"}, source: sourceRPID},
		},
		{
			name: "RPID called party is not the caller",
			headers: []string{
				`From: <sip:+15557654321@carrier.example>;tag=1`,
				`Remote-Party-ID: <sip:+15551230100@pbx.example>;party=called`,
			},
			want: identity{party: party{user: "+15557654321", uri: "sip:+15557654321@carrier.example"}, source: sourceFrom},
		},
		{
			name: "RPID privacy=full",
			headers: []string{
				`From: <sip:+15557654321@carrier.example>;tag=1`,
				`Remote-Party-ID: "Pat" <sip:+15557654321@carrier.example>;party=calling;privacy=full;screen=yes`,
			},
			want: anon(sourceRPID),
		},
		{
			name: "RPID privacy=name hides the name only",
			headers: []string{
				`From: "Pat" <sip:+15557654321@carrier.example>;tag=1`,
				`Remote-Party-ID: "Pat" <sip:+15557654321@carrier.example>;Party=Calling;Privacy=Name`,
			},
			want: identity{party: party{user: "+15557654321", uri: "sip:+15557654321@carrier.example"}, source: sourceRPID},
		},
		{
			name: "Privacy: id hides PAI",
			headers: []string{
				`From: <sip:+15557654321@carrier.example>;tag=1`,
				`P-Asserted-Identity: <sip:+15557654321@carrier.example>`,
				`Privacy: id`,
			},
			want: anon(sourcePAI),
		},
		{
			name:    "Privacy: user;critical",
			headers: []string{`From: <sip:+15557654321@carrier.example>;tag=1`, `privacy: User; Critical`},
			want:    anon(sourceFrom),
		},
		{
			name:    "Privacy: header",
			headers: []string{`From: <sip:+15557654321@carrier.example>;tag=1`, `Privacy: header`},
			want:    anon(sourceFrom),
		},
		{
			name:    "Privacy: none shows",
			headers: []string{`From: <sip:+15557654321@carrier.example>;tag=1`, `Privacy: none`},
			want:    identity{party: party{user: "+15557654321", uri: "sip:+15557654321@carrier.example"}, source: sourceFrom},
		},
		{
			name:    "Privacy: session shows",
			headers: []string{`From: <sip:+15557654321@carrier.example>;tag=1`, `Privacy: session`},
			want:    identity{party: party{user: "+15557654321", uri: "sip:+15557654321@carrier.example"}, source: sourceFrom},
		},
		{
			name:    "RFC 3323 anonymous From",
			headers: []string{`From: "Anonymous" <sip:anonymous@anonymous.invalid>;tag=1928301774`},
			want:    anon(sourceFrom),
		},
		{
			name:    "anonymous user, other host",
			headers: []string{`From: <sip:Anonymous@198.51.100.1>;tag=1`},
			want:    anon(sourceFrom),
		},
		{
			name:    "restricted",
			headers: []string{`From: <sip:restricted@carrier.example>;tag=1`},
			want:    anon(sourceFrom),
		},
		{
			name:    "anonymous.invalid host with a number",
			headers: []string{`From: <sip:+15557654321@Anonymous.Invalid>;tag=1`},
			want:    anon(sourceFrom),
		},
		{
			name:    "display Anonymous with a number",
			headers: []string{`From: "anonymous" <sip:+15557654321@carrier.example>;tag=1`},
			want:    anon(sourceFrom),
		},
		{
			name: "anonymous PAI",
			headers: []string{
				`From: <sip:+15557654321@carrier.example>;tag=1`,
				`P-Asserted-Identity: <sip:anonymous@anonymous.invalid>`,
			},
			want: anon(sourcePAI),
		},
		{
			name: "malformed PAI falls back",
			headers: []string{
				`From: <sip:+15557654321@carrier.example>;tag=1`,
				`P-Asserted-Identity: <sip:[::1>`,
			},
			want: identity{party: party{user: "+15557654321", uri: "sip:+15557654321@carrier.example"}, source: sourceFrom},
		},
		{
			name:    "tel PAI with phone-context",
			headers: []string{`From: <sip:7654321@carrier.example>;tag=1`, `P-Asserted-Identity: <tel:7654321;phone-context=+1555>`},
			want:    identity{party: party{user: "7654321", uri: "tel:7654321;phone-context=+1555", phone: true}, source: sourcePAI},
		},
		{
			name:    "quoted display with escapes",
			headers: []string{`From: "Dr. \"Bob\" Smith" <sip:300@pbx.example>;tag=1`},
			want:    identity{party: party{display: `Dr. "Bob" Smith`, user: "300", uri: "sip:300@pbx.example"}, source: sourceFrom},
		},
		{
			name:    "nothing readable",
			headers: []string{`Remote-Party-ID: garbage`},
			wantErr: "no readable identity header",
		},
		{
			name:    "no identity headers",
			headers: nil,
			wantErr: "no From",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := parseSIP(t, invite(tc.headers...), "")
			got, err := callerIdentity(msg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestAnsweringParty(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		want    identity
		ok      bool
	}{
		{
			name:    "PAI",
			headers: []string{`P-Asserted-Identity: "Reception" <sip:201@pbx.example>`, `Contact: <sip:201-abc@10.0.0.31:5060>`},
			want:    identity{party: party{display: "Reception", user: "201", uri: "sip:201@pbx.example"}, source: sourcePAI},
			ok:      true,
		},
		{
			name:    "RPID party=called",
			headers: []string{`Remote-Party-ID: "Reception" <sip:201@pbx.example>;party=called;screen=no;privacy=off`, `Contact: <sip:s@10.0.0.20>`},
			want:    identity{party: party{display: "Reception", user: "201", uri: "sip:201@pbx.example"}, source: sourceRPID},
			ok:      true,
		},
		{
			name:    "Contact, compact",
			headers: []string{`m: <sip:202@10.0.0.32:5060;transport=udp>;expires=3600`},
			want:    identity{party: party{user: "202", uri: "sip:202@10.0.0.32:5060;transport=udp"}, source: sourceContact},
			ok:      true,
		},
		{
			name:    "anonymous PAI skipped for Contact",
			headers: []string{`P-Asserted-Identity: <sip:anonymous@anonymous.invalid>`, `Contact: <sip:203@10.0.0.33>`},
			want:    identity{party: party{user: "203", uri: "sip:203@10.0.0.33"}, source: sourceContact},
			ok:      true,
		},
		{
			name:    "Contact without user",
			headers: []string{`Contact: <sip:10.0.0.20:5060>`},
		},
		{
			name: "nothing",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := answeringParty(parseSIP(t, ok200(tc.headers...), ""))
			if ok != tc.ok || got != tc.want {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
