package storetest

import (
	"testing"

	"github.com/callwire/callwire/core/store"
)

// regionTests covers an organization's region: CreateOrg, GetOrg, ListOrgs and UpdateOrgRegion.
func regionTests() []contractTest {
	london := store.Region{TimeZone: "Europe/London", Country: "GB"}
	getRegion := func(t *testing.T, s store.Store, id string) store.Region {
		t.Helper()
		o, err := s.GetOrg(t.Context(), id)
		if err != nil {
			t.Fatalf("GetOrg: %v", err)
		}
		return o.Region
	}
	return []contractTest{
		{"UTCAndNoCountryByDefault", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			if r := getRegion(t, s, org); r != (store.Region{}) {
				t.Errorf("Region of a new organization = %+v, want the zero value", r)
			}
		}},
		{"CreateWithRegion", func(t *testing.T, s store.Store) {
			o := store.Org{ID: newID(), Name: "with region", CreatedAt: at(1), Region: london}
			if err := s.CreateOrg(t.Context(), o); err != nil {
				t.Fatalf("CreateOrg: %v", err)
			}
			if r := getRegion(t, s, o.ID); r != london {
				t.Errorf("Region = %+v, want %+v", r, london)
			}
		}},
		{"UpdateReplaces", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			other := newOrg(t, s)
			full := store.Lookup{URL: "https://crm.example/lookup", Token: "tok"}
			if err := s.UpdateOrgLookup(t.Context(), org, full); err != nil {
				t.Fatalf("UpdateOrgLookup: %v", err)
			}
			if err := s.UpdateOrgRegion(t.Context(), org, london); err != nil {
				t.Fatalf("UpdateOrgRegion: %v", err)
			}
			o, err := s.GetOrg(t.Context(), org)
			if err != nil {
				t.Fatalf("GetOrg: %v", err)
			}
			if o.Region != london || o.Lookup != full || o.Name != "Clinic "+org {
				t.Errorf("after update, org = %+v, want region %+v and the rest untouched", o, london)
			}
			if r := getRegion(t, s, other); r != (store.Region{}) {
				t.Errorf("another organization's Region = %+v, want it untouched", r)
			}
			zoneOnly := store.Region{TimeZone: "America/New_York"}
			if err := s.UpdateOrgRegion(t.Context(), org, zoneOnly); err != nil {
				t.Fatalf("UpdateOrgRegion: %v", err)
			}
			if r := getRegion(t, s, org); r != zoneOnly {
				t.Errorf("after second update, Region = %+v, want %+v", r, zoneOnly)
			}
		}},
		{"RefusesInvalid", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			if err := s.UpdateOrgRegion(t.Context(), org, london); err != nil {
				t.Fatalf("UpdateOrgRegion: %v", err)
			}
			for _, r := range []store.Region{
				{TimeZone: "Europe/Londres"},
				{TimeZone: "Local"},
				{TimeZone: "../etc/passwd"},
				{Country: "gb"},
				{Country: "GBR"},
				{Country: "XX"},
				{TimeZone: "Europe/London", Country: "UK"},
			} {
				err := s.UpdateOrgRegion(t.Context(), org, r)
				wantErr(t, "UpdateOrgRegion "+r.TimeZone+" "+r.Country, err, store.ErrInvalid)
				err = s.CreateOrg(t.Context(), store.Org{ID: newID(), Name: "bad", CreatedAt: at(1), Region: r})
				wantErr(t, "CreateOrg "+r.TimeZone+" "+r.Country, err, store.ErrInvalid)
			}
			if r := getRegion(t, s, org); r != london {
				t.Errorf("after refused updates, Region = %+v, want %+v", r, london)
			}
		}},
		{"UpdateMissing", func(t *testing.T, s store.Store) {
			err := s.UpdateOrgRegion(t.Context(), newID(), london)
			wantErr(t, "UpdateOrgRegion", err, store.ErrNotFound)
		}},
		{"ListIncludesRegion", func(t *testing.T, s store.Store) {
			a := newOrg(t, s)
			b := store.Org{ID: newID(), Name: "b", CreatedAt: at(5), Region: london}
			if err := s.CreateOrg(t.Context(), b); err != nil {
				t.Fatalf("CreateOrg: %v", err)
			}
			orgs, err := s.ListOrgs(t.Context())
			if err != nil {
				t.Fatalf("ListOrgs: %v", err)
			}
			if len(orgs) != 2 || orgs[0].ID != a || orgs[1].ID != b.ID {
				t.Fatalf("ListOrgs = %+v, want [%s %s]", orgs, a, b.ID)
			}
			if orgs[0].Region != (store.Region{}) || orgs[1].Region != london {
				t.Errorf("ListOrgs regions = %+v, %+v; want none, %+v", orgs[0].Region, orgs[1].Region, london)
			}
		}},
	}
}
