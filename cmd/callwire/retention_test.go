package main_test

import (
	"strings"
	"testing"

	"github.com/callwire/callwire/core/store/postgres/pgtest"
)

type retentionOut struct {
	ID            string `json:"id"`
	TimeZone      string `json:"timezone"`
	RetentionDays *int   `json:"retentionDays"`
}

// orgRetention exercises orgs update --retention-days against whatever store c's environment
// names.
func orgRetention(t *testing.T, c *cli) {
	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "Riverside Clinic"))
	if o := decode[[]retentionOut](t, c.ok("orgs", "list", "-o", "json")); len(o) != 1 || o[0].RetentionDays != nil {
		t.Fatalf("new organization: %+v, want its calls kept forever", o)
	}
	c.ok("orgs", "update", org, "--timezone", "Europe/London")
	o := decode[retentionOut](t, c.ok("orgs", "update", org, "--retention-days", "90", "-o", "json"))
	if o.RetentionDays == nil || *o.RetentionDays != 90 || o.TimeZone != "Europe/London" {
		t.Errorf("after --retention-days 90: %+v, want 90 and the time zone kept", o)
	}
	if text := c.ok("orgs", "list"); !strings.Contains(text, "RETENTION") || !strings.Contains(text, "90 days") {
		t.Errorf("orgs list text: %s", text)
	}
	if text := c.ok("orgs", "update", org, "--retention-days", "1"); !strings.Contains(text, "calls kept 1 day after their last activity") {
		t.Errorf("orgs update text: %s", text)
	}
	if text := c.ok("orgs", "update", org, "--retention-days", "forever"); !strings.Contains(text, "calls kept forever") {
		t.Errorf("orgs update text: %s", text)
	}
	if text := c.ok("orgs", "list"); !strings.Contains(text, "forever") {
		t.Errorf("orgs list text after clearing: %s", text)
	}
	c.ok("orgs", "update", org, "--retention-days", "30")
	if o := decode[retentionOut](t, c.ok("orgs", "update", org, "--retention-days", "", "-o", "json")); o.RetentionDays != nil {
		t.Errorf(`after --retention-days "": %+v, want forever`, o)
	}
}

func TestOrgRetentionEmbedded(t *testing.T) {
	orgRetention(t, newCLI(t))
}

func TestOrgRetentionPostgres(t *testing.T) {
	orgRetention(t, newCLI(t, "CALLWIRE_DATABASE_URL="+pgtest.URL(t)))
}

func TestOrgRetentionUsageErrors(t *testing.T) {
	c := newCLI(t)
	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "X"))
	c.ok("orgs", "update", org, "--retention-days", "14")
	for _, days := range []string{"0", "-3", "1.5", "36501", "2w", "never"} {
		_, errOut, code := c.run("orgs", "update", org, "--retention-days", days)
		if code != 2 || !strings.Contains(errOut, "--retention-days") {
			t.Errorf("--retention-days %s: exit %d, stderr %q; want exit 2 naming the flag", days, code, errOut)
		}
	}
	if l := decode[[]retentionOut](t, c.ok("orgs", "list", "-o", "json")); l[0].RetentionDays == nil || *l[0].RetentionDays != 14 {
		t.Errorf("a refused update changed the organization: %+v", l[0])
	}
	if _, errOut, code := c.run("orgs", "update", "no-such-org", "--retention-days", "7"); code != 1 || !strings.Contains(errOut, "no-such-org") {
		t.Errorf("unknown organization: exit %d, %s", code, errOut)
	}
}
