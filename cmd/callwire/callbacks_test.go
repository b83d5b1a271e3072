package main_test

import (
	"strings"
	"testing"
)

func TestOrgCallbackNeedsAnswer(t *testing.T) {
	c := newCLI(t)
	org := strings.TrimSpace(c.ok("orgs", "create", "--name", "Riverside Clinic"))
	type out struct {
		CallbackNeedsAnswer *bool `json:"callbackNeedsAnswer"`
	}
	if o := decode[out](t, c.ok("orgs", "update", org, "--callback-needs-answer", "-o", "json")); o.CallbackNeedsAnswer == nil || !*o.CallbackNeedsAnswer {
		t.Errorf("after --callback-needs-answer: %+v, want true", o)
	}
	if text := c.ok("orgs", "update", org, "--callback-needs-answer=false"); !strings.Contains(text, "settled by any call") {
		t.Errorf("orgs update text: %s", text)
	}
	if _, errOut, code := c.run("orgs", "update", "no-such-org", "--callback-needs-answer"); code != 1 || !strings.Contains(errOut, "no-such-org") {
		t.Errorf("unknown organization: exit %d, %s", code, errOut)
	}
}
