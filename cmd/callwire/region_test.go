package main_test

import (
	"strings"
	"testing"

	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

type regionOut struct {
	ID       string `json:"id"`
	TimeZone string `json:"timezone"`
	Country  string `json:"country"`
	Lookup   *struct {
		URL string `json:"url"`
	} `json:"lookup"`
}

// orgRegion exercises orgs update --timezone and --country against whatever store c's
// environment names.
func orgRegion(t *testing.T, c *cli) {
	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "Riverside Clinic"))
	if o := decode[[]regionOut](t, c.ok("orgs", "list", "-o", "json")); len(o) != 1 || o[0].TimeZone != "UTC" || o[0].Country != "" {
		t.Fatalf("new organization: %+v, want UTC and no country", o)
	}
	c.ok("orgs", "update", org, "--lookup-url", "https://crm.example/lookup")

	o := decode[regionOut](t, c.ok("orgs", "update", org, "--timezone", "Europe/London", "--country", "gb", "-o", "json"))
	if o.TimeZone != "Europe/London" || o.Country != "GB" || o.Lookup == nil {
		t.Errorf("after --timezone and --country: %+v, want Europe/London, GB and the lookup kept", o)
	}
	// A setting left out is kept.
	o = decode[regionOut](t, c.ok("orgs", "update", org, "--timezone", "America/Chicago", "-o", "json"))
	if o.TimeZone != "America/Chicago" || o.Country != "GB" {
		t.Errorf("after --timezone alone: %+v, want America/Chicago and GB", o)
	}
	text := c.ok("orgs", "update", org, "--country", "")
	if !strings.Contains(text, "America/Chicago") || !strings.Contains(text, "country none") {
		t.Errorf("orgs update text: %s", text)
	}
	o = decode[regionOut](t, c.ok("orgs", "update", org, "--timezone", "", "-o", "json"))
	if o.TimeZone != "UTC" || o.Country != "" || o.Lookup == nil {
		t.Errorf("after clearing both: %+v, want UTC, no country, the lookup kept", o)
	}
	c.ok("orgs", "update", org, "--timezone", "Asia/Tokyo", "--country", "JP")
	if text := c.ok("orgs", "list"); !strings.Contains(text, "TIMEZONE") || !strings.Contains(text, "Asia/Tokyo") || !strings.Contains(text, "JP") {
		t.Errorf("orgs list text: %s", text)
	}
	if _, errOut, code := c.run("orgs", "update", "no-such-org", "--timezone", "Europe/London"); code != 1 || !strings.Contains(errOut, "no-such-org") {
		t.Errorf("unknown organization: exit %d, %s", code, errOut)
	}
}

func TestOrgRegionEmbedded(t *testing.T) {
	orgRegion(t, newCLI(t))
}

func TestOrgRegionPostgres(t *testing.T) {
	orgRegion(t, newCLI(t, "CALLWIRE_DATABASE_URL="+pgtest.URL(t)))
}

func TestOrgRegionUsageErrors(t *testing.T) {
	c := newCLI(t)
	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "X"))
	c.ok("orgs", "update", org, "--timezone", "Europe/Berlin", "--country", "DE")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"orgs", "update", org, "--timezone", "Europe/Londres"}, "--timezone"},
		{[]string{"orgs", "update", org, "--timezone", "Local"}, "--timezone"},
		{[]string{"orgs", "update", org, "--timezone", "+01:00"}, "--timezone"},
		{[]string{"orgs", "update", org, "--country", "UK"}, "--country"},
		{[]string{"orgs", "update", org, "--country", "GBR"}, "--country"},
		{[]string{"orgs", "update", org, "--timezone", "Mars/Olympus", "--country", "ZZ"}, "--country"},
		{[]string{"orgs", "update", org, "--timezone", "Europe/London", "--lookup-token", "abc"}, "--lookup-url"},
	} {
		_, errOut, code := c.run(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("callwire %s: exit %d, stderr %q; want exit 2 mentioning %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
	if l := decode[[]regionOut](t, c.ok("orgs", "list", "-o", "json")); l[0].TimeZone != "Europe/Berlin" || l[0].Country != "DE" {
		t.Errorf("a refused update changed the organization: %+v", l[0])
	}
}
