package storetest

import (
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// lookupTests covers an organization's caller lookup: CreateOrg, GetOrg, ListOrgs and
// UpdateOrgLookup.
func lookupTests() []contractTest {
	full := store.Lookup{
		URL:     "https://crm.riverside.example/callwire/lookup?clinic=7&x=a%20b",
		Token:   "tok_Zürich-€-0123456789abcdefghijklmnopqrstuvwxyz",
		Timeout: 750*time.Millisecond + 123*time.Nanosecond,
	}
	getLookup := func(t *testing.T, s store.Store, id string) store.Lookup {
		t.Helper()
		o, err := s.GetOrg(t.Context(), id)
		if err != nil {
			t.Fatalf("GetOrg: %v", err)
		}
		return o.Lookup
	}
	return []contractTest{
		{"NoneByDefault", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			if l := getLookup(t, s, org); l != (store.Lookup{}) {
				t.Errorf("Lookup of a new organization = %+v, want the zero value", l)
			}
		}},
		{"CreateWithLookup", func(t *testing.T, s store.Store) {
			o := store.Org{ID: newID(), Name: "with lookup", CreatedAt: at(1), Lookup: full}
			if err := s.CreateOrg(t.Context(), o); err != nil {
				t.Fatalf("CreateOrg: %v", err)
			}
			if l := getLookup(t, s, o.ID); l != full {
				t.Errorf("Lookup = %+v, want %+v", l, full)
			}
		}},
		{"UpdateReplacesAndRemoves", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			other := newOrg(t, s)
			if err := s.UpdateOrgLookup(t.Context(), org, full); err != nil {
				t.Fatalf("UpdateOrgLookup: %v", err)
			}
			if l := getLookup(t, s, org); l != full {
				t.Errorf("after update, Lookup = %+v, want %+v", l, full)
			}
			if l := getLookup(t, s, other); l != (store.Lookup{}) {
				t.Errorf("another organization's Lookup = %+v, want it untouched", l)
			}
			// A URL alone: the token and timeout are replaced too, not kept.
			urlOnly := store.Lookup{URL: "http://10.0.0.5:8081/lookup"}
			if err := s.UpdateOrgLookup(t.Context(), org, urlOnly); err != nil {
				t.Fatalf("UpdateOrgLookup: %v", err)
			}
			if l := getLookup(t, s, org); l != urlOnly {
				t.Errorf("after second update, Lookup = %+v, want %+v", l, urlOnly)
			}
			if err := s.UpdateOrgLookup(t.Context(), org, store.Lookup{}); err != nil {
				t.Fatalf("UpdateOrgLookup (remove): %v", err)
			}
			if l := getLookup(t, s, org); l != (store.Lookup{}) {
				t.Errorf("after removal, Lookup = %+v, want the zero value", l)
			}
			o, err := s.GetOrg(t.Context(), org)
			if err != nil {
				t.Fatalf("GetOrg: %v", err)
			}
			if o.Name != "Clinic "+org {
				t.Errorf("Name = %q after lookup updates, want it untouched", o.Name)
			}
			sameTime(t, "CreatedAt", o.CreatedAt, at(0))
		}},
		{"UpdateMissing", func(t *testing.T, s store.Store) {
			err := s.UpdateOrgLookup(t.Context(), newID(), full)
			wantErr(t, "UpdateOrgLookup", err, store.ErrNotFound)
		}},
		{"ListIncludesLookup", func(t *testing.T, s store.Store) {
			a := newOrg(t, s)
			b := store.Org{ID: newID(), Name: "b", CreatedAt: at(5)}
			if err := s.CreateOrg(t.Context(), b); err != nil {
				t.Fatalf("CreateOrg: %v", err)
			}
			if err := s.UpdateOrgLookup(t.Context(), b.ID, full); err != nil {
				t.Fatalf("UpdateOrgLookup: %v", err)
			}
			orgs, err := s.ListOrgs(t.Context())
			if err != nil {
				t.Fatalf("ListOrgs: %v", err)
			}
			if len(orgs) != 2 || orgs[0].ID != a || orgs[1].ID != b.ID {
				t.Fatalf("ListOrgs = %+v, want [%s %s]", orgs, a, b.ID)
			}
			if orgs[0].Lookup != (store.Lookup{}) || orgs[1].Lookup != full {
				t.Errorf("ListOrgs lookups = %+v, %+v; want none, %+v", orgs[0].Lookup, orgs[1].Lookup, full)
			}
		}},
	}
}
