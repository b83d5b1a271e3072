package callmodel

import (
	"reflect"
	"strings"
	"testing"

	"github.com/callwire/callwire/sdk/event"
)

func TestDiversions(t *testing.T) {
	one, two := 1, 2
	hop := func(user, uri, reason string, counter *int) diversion {
		return diversion{party: party{user: user, uri: uri}, reason: reason, counter: counter}
	}
	tests := []struct {
		name    string
		headers []string
		want    []diversion
		wantErr string
	}{
		{
			name:    "RFC 5806 single",
			headers: []string{`Diversion: <sip:+15551230100@pbx.example>;reason=unconditional;counter=1;privacy=off`},
			want:    []diversion{hop("+15551230100", "sip:+15551230100@pbx.example", "unconditional", &one)},
		},
		{
			name: "two headers, newest on top, returned outermost first",
			headers: []string{
				`Diversion: <sip:+15551230300@pbx.example>;reason=no-answer;counter=1`,
				`Diversion: "Main" <sip:+15551230100@carrier.example;user=phone>;reason=user-busy;counter=1`,
			},
			want: []diversion{
				{party: party{display: "Main", user: "+15551230100", uri: "sip:+15551230100@carrier.example;user=phone", phone: true}, reason: "user-busy", counter: &one},
				hop("+15551230300", "sip:+15551230300@pbx.example", "no-answer", &one),
			},
		},
		{
			name:    "comma-separated, quoted and upper-case values",
			headers: []string{`diversion: <sip:300@pbx.example>;Reason="No-Answer";COUNTER=2, <tel:+15551230100>;reason=unconditional`},
			want: []diversion{
				{party: party{user: "+15551230100", uri: "tel:+15551230100", phone: true}, reason: "unconditional"},
				hop("300", "sip:300@pbx.example", "no-answer", &two),
			},
		},
		{
			name:    "privacy=full hides the party",
			headers: []string{`Diversion: "Dr Who" <sip:+15551230100@carrier.example>;reason=deflection;privacy=full`},
			want:    []diversion{{anonymous: true, reason: "deflection"}},
		},
		{
			name:    "privacy=name hides the name",
			headers: []string{`Diversion: "Dr Who" <sip:+15551230100@carrier.example>;reason=deflection;privacy=name`},
			want:    []diversion{hop("+15551230100", "sip:+15551230100@carrier.example", "deflection", nil)},
		},
		{
			name:    "counter out of range or not a number",
			headers: []string{`Diversion: <sip:1@a.example>;counter=101, <sip:2@a.example>;counter=x`},
			want:    []diversion{hop("2", "sip:2@a.example", "", nil), hop("1", "sip:1@a.example", "", nil)},
		},
		{
			name:    "long reason bounded",
			headers: []string{`Diversion: <sip:1@a.example>;reason=` + strings.Repeat("x", 100)},
			want:    []diversion{hop("1", "sip:1@a.example", strings.Repeat("x", 64), nil)},
		},
		{
			name:    "malformed value skipped, reported",
			headers: []string{`Diversion: <sip:[::1>;reason=x, <sip:2@a.example>;reason=unknown`},
			want:    []diversion{hop("2", "sip:2@a.example", "unknown", nil)},
			wantErr: "diversion",
		},
		{
			name: "Diversion wins over History-Info",
			headers: []string{
				`History-Info: <sip:+15551230100@carrier.example>;index=1, <sip:300@pbx.example;cause=486>;index=1.1`,
				`Diversion: <sip:+15551230100@carrier.example>;reason=user-busy;counter=1`,
			},
			want: []diversion{hop("+15551230100", "sip:+15551230100@carrier.example", "user-busy", &one)},
		},
		{
			// RFC 7044 style: bob's AOR tried at a contact (rc) that answered 486, then retargeted
			// to carol (mp). The cause URI parameter (RFC 4458) gives the reason.
			name: "RFC 7044 rc and mp with cause",
			headers: []string{
				`History-Info: <sip:bob@example.com>;index=1, <sip:bob@192.0.2.4?Reason=SIP%3Bcause%3D486>;index=1.1;rc=1, <sip:carol@example.com;cause=486>;index=1.2;mp=1`,
			},
			want: []diversion{hop("bob", "sip:bob@example.com", "user-busy", nil)},
		},
		{
			name: "RFC 7044 reason from the rc contact",
			headers: []string{
				`History-Info: <sip:bob@example.com>;index=1`,
				`History-Info: <sip:bob@192.0.2.4?Reason=SIP%3Bcause%3D408%3Btext%3D%22Request%20Timeout%22>;index=1.1;rc=1`,
				`History-Info: <sip:carol@example.com>;index=1.2;mp=1`,
			},
			want: []diversion{hop("bob", "sip:bob@example.com", "no-answer", nil)},
		},
		{
			name: "two diversions, out of order on the wire",
			headers: []string{
				`History-Info: <sip:voicemail@pbx.example;cause=408>;index=1.1.1;mp=1.1, <sip:+15551230100@carrier.example?Reason=SIP%3Bcause%3D302>;index=1, <sip:300@pbx.example>;index=1.1;mp=1`,
			},
			want: []diversion{
				hop("+15551230100", "sip:+15551230100@carrier.example", "unconditional", nil),
				hop("300", "sip:300@pbx.example", "no-answer", nil),
			},
		},
		{
			name: "RFC 4244 style without mp or rc",
			headers: []string{
				`History-Info: <sip:+15551230100@carrier.example>;index=1, <sip:+15551230100@10.0.0.20>;index=1.1, <sip:+15559990000@pbx.example;cause=302>;index=1.2`,
			},
			want: []diversion{hop("+15551230100", "sip:+15551230100@carrier.example", "unconditional", nil)},
		},
		{
			name:    "Privacy=history hides the hop",
			headers: []string{`History-Info: <sip:+15551230100@carrier.example?Privacy=history>;index=1, <sip:300@pbx.example;cause=480>;index=1.1;mp=1`},
			want:    []diversion{{anonymous: true, reason: "deflection"}},
		},
		{
			name:    "unknown cause",
			headers: []string{`History-Info: <sip:a@x.example>;index=1, <sip:b@x.example;cause=500>;index=1.1;mp=1`},
			want:    []diversion{hop("a", "sip:a@x.example", "unknown", nil)},
		},
		{
			name:    "single entry is no diversion",
			headers: []string{`History-Info: <sip:+15551230100@carrier.example>;index=1`},
		},
		{
			name:    "bad index skipped, reported",
			headers: []string{`History-Info: <sip:a@x.example>;index=1, <sip:b@x.example>;index=one;mp=1`},
			wantErr: "no valid index",
		},
		{
			name:    "mp pointing nowhere",
			headers: []string{`History-Info: <sip:a@x.example>;index=1, <sip:b@x.example>;index=1.1;mp=7`},
		},
		{
			name: "none",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := diversions(parseSIP(t, invite(append([]string{`From: <sip:a@b.example>;tag=1`}, tc.headers...)...), ""))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Errorf("err = %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestDiversionMapsOntoEvent checks that a hop carries what event.Diversion holds: a reason
// within its limit and a counter it accepts, so the tracker copies fields across unchanged.
func TestDiversionMapsOntoEvent(t *testing.T) {
	ds, err := parseDiversion([]string{`<sip:1@a.example>;reason=user-busy;counter=3`})
	if err != nil || len(ds) != 1 {
		t.Fatalf("parseDiversion = %v, %v", ds, err)
	}
	d := ds[0]
	ev := event.Diversion{Party: event.Party{Kind: event.KindExtension, Extension: d.party.user}, Reason: d.reason, Counter: d.counter}
	if ev.Reason != "user-busy" || ev.Counter == nil || *ev.Counter != 3 || ev.Extension != "1" {
		t.Errorf("event.Diversion = %+v", ev)
	}
}

func TestDiversionLimits(t *testing.T) {
	var div, hi []string
	for i := range 150 {
		// Diversion: newest first, so value i is hop 150-i; the outermost hop is "149".
		div = append(div, "<sip:"+itoa(149-i)+"@a.example>;reason=unconditional")
		switch i {
		case 0:
			hi = append(hi, "<sip:0@a.example>;index=1")
		case 1:
			hi = append(hi, "<sip:1@a.example>;index=1.1;mp=1")
		default:
			hi = append(hi, "<sip:"+itoa(i)+"@a.example>;index=1."+itoa(i)+";mp=1."+itoa(i-1))
		}
	}
	for name, tc := range map[string]struct {
		got   []diversion
		first string
	}{
		"diversion":    {got: must(parseDiversion(div)), first: "0"},
		"history-info": {got: must(parseHistoryInfo(hi)), first: "0"},
	} {
		if len(tc.got) != event.MaxDiversions {
			t.Errorf("%s: %d hops, want %d", name, len(tc.got), event.MaxDiversions)
			continue
		}
		if tc.got[0].party.user != tc.first || tc.got[19].party.user != itoa(19) {
			t.Errorf("%s: hops %q..%q, want the outermost %q..%q", name, tc.got[0].party.user, tc.got[19].party.user, tc.first, "19")
		}
	}
}

func must(ds []diversion, err error) []diversion {
	if err != nil {
		panic(err)
	}
	return ds
}
