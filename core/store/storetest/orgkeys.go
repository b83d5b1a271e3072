package storetest

import (
	"crypto/sha256"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// orgTests covers CreateOrg, GetOrg and ListOrgs.
func orgTests() []contractTest {
	return []contractTest{
		{"CreateGet", func(t *testing.T, s store.Store) {
			o := store.Org{ID: newID(), Name: "Praxis Dr. Müller — Zürich", CreatedAt: at(1)}
			if err := s.CreateOrg(t.Context(), o); err != nil {
				t.Fatalf("CreateOrg: %v", err)
			}
			got, err := s.GetOrg(t.Context(), o.ID)
			if err != nil {
				t.Fatalf("GetOrg: %v", err)
			}
			if got.ID != o.ID || got.Name != o.Name {
				t.Errorf("GetOrg = %+v, want %+v", got, o)
			}
			sameTime(t, "CreatedAt", got.CreatedAt, o.CreatedAt)
		}},
		{"CreateConflict", func(t *testing.T, s store.Store) {
			o := store.Org{ID: newID(), Name: "first", CreatedAt: at(1)}
			if err := s.CreateOrg(t.Context(), o); err != nil {
				t.Fatalf("CreateOrg: %v", err)
			}
			err := s.CreateOrg(t.Context(), store.Org{ID: o.ID, Name: "second", CreatedAt: at(2)})
			wantErr(t, "second CreateOrg", err, store.ErrConflict)
			got, err := s.GetOrg(t.Context(), o.ID)
			if err != nil {
				t.Fatalf("GetOrg: %v", err)
			}
			if got.Name != "first" {
				t.Errorf("Name = %q after conflicting create, want %q", got.Name, "first")
			}
		}},
		{"GetMissing", func(t *testing.T, s store.Store) {
			_, err := s.GetOrg(t.Context(), newID())
			wantErr(t, "GetOrg", err, store.ErrNotFound)
		}},
		{"ListOldestFirst", func(t *testing.T, s store.Store) {
			orgs, err := s.ListOrgs(t.Context())
			if err != nil {
				t.Fatalf("ListOrgs: %v", err)
			}
			if len(orgs) != 0 {
				t.Fatalf("ListOrgs on an empty store = %d orgs, want 0", len(orgs))
			}
			// Inserted out of age order: the list follows CreatedAt, not insertion.
			want := []store.Org{
				{ID: newID(), Name: "b", CreatedAt: at(20)},
				{ID: newID(), Name: "c", CreatedAt: at(30)},
				{ID: newID(), Name: "a", CreatedAt: at(10)},
			}
			for _, o := range want {
				if err := s.CreateOrg(t.Context(), o); err != nil {
					t.Fatalf("CreateOrg: %v", err)
				}
			}
			orgs, err = s.ListOrgs(t.Context())
			if err != nil {
				t.Fatalf("ListOrgs: %v", err)
			}
			var names []string
			for _, o := range orgs {
				names = append(names, o.Name)
			}
			if !slices.Equal(names, []string{"a", "b", "c"}) {
				t.Errorf("ListOrgs names = %q, want [a b c]", names)
			}
		}},
	}
}

// hash returns the SHA-256 of secret.
func hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// newKey returns a key for orgID (or an operator key for "") with a fresh client ID and secret.
func newKey(orgID string, created time.Time) store.Key {
	secret := "cw_sk_" + newID()
	return store.Key{
		ClientID:    "cw_ci_" + newID(),
		OrgID:       orgID,
		Scopes:      []string{"org.calls.events", "org.calls.events.call_received"},
		SecretHash:  hash(secret),
		SecretLast8: secret[len(secret)-8:],
		CreatedAt:   created,
	}
}

// createKey stores k and fails the test on error.
func createKey(t *testing.T, s store.Store, k store.Key) {
	t.Helper()
	if err := s.CreateKey(t.Context(), k); err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
}

// keyByClientID reads a key and fails the test on error.
func keyByClientID(t *testing.T, s store.Store, clientID string) store.Key {
	t.Helper()
	k, err := s.KeyByClientID(t.Context(), clientID)
	if err != nil {
		t.Fatalf("KeyByClientID: %v", err)
	}
	return k
}

// checkKey asserts that got equals want field by field.
func checkKey(t *testing.T, got, want store.Key) {
	t.Helper()
	if got.ClientID != want.ClientID || got.OrgID != want.OrgID || got.SecretLast8 != want.SecretLast8 {
		t.Errorf("key = (%q, %q, %q), want (%q, %q, %q)",
			got.ClientID, got.OrgID, got.SecretLast8, want.ClientID, want.OrgID, want.SecretLast8)
	}
	if len(got.Scopes) != 0 || len(want.Scopes) != 0 {
		if !reflect.DeepEqual(got.Scopes, want.Scopes) {
			t.Errorf("Scopes = %q, want %q", got.Scopes, want.Scopes)
		}
	}
	if !slices.Equal(got.SecretHash, want.SecretHash) {
		t.Errorf("SecretHash = %x, want %x", got.SecretHash, want.SecretHash)
	}
	sameTime(t, "CreatedAt", got.CreatedAt, want.CreatedAt)
	sameTimePtr(t, "ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	sameTimePtr(t, "RevokedAt", got.RevokedAt, want.RevokedAt)
	sameTimePtr(t, "RotatedAt", got.RotatedAt, want.RotatedAt)
}

// ptr returns a pointer to a copy of tm.
func ptr(tm time.Time) *time.Time { return &tm }

// keyTests covers the key methods.
func keyTests() []contractTest {
	return []contractTest{
		{"CreateAndLookUp", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			plain := newKey(org, at(1))
			expiring := newKey(org, at(2))
			expiring.ExpiresAt = ptr(at(3600))
			noScopes := newKey(org, at(3))
			noScopes.Scopes = nil
			for _, k := range []store.Key{plain, expiring, noScopes} {
				createKey(t, s, k)
			}
			for _, want := range []store.Key{plain, expiring, noScopes} {
				checkKey(t, keyByClientID(t, s, want.ClientID), want)
				got, err := s.KeyBySecretHash(t.Context(), want.SecretHash)
				if err != nil {
					t.Fatalf("KeyBySecretHash: %v", err)
				}
				checkKey(t, got, want)
			}
		}},
		{"LookUpMissing", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			createKey(t, s, newKey(org, at(1)))
			_, err := s.KeyByClientID(t.Context(), "cw_ci_"+newID())
			wantErr(t, "KeyByClientID", err, store.ErrNotFound)
			_, err = s.KeyBySecretHash(t.Context(), hash("nobody's secret"))
			wantErr(t, "KeyBySecretHash", err, store.ErrNotFound)
		}},
		{"CreateErrors", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			first := newKey(org, at(1))
			createKey(t, s, first)
			sameClientID := newKey(org, at(2))
			sameClientID.ClientID = first.ClientID
			sameHash := newKey(org, at(3))
			sameHash.SecretHash = first.SecretHash
			sameHashOtherOrg := newKey(newOrg(t, s), at(4))
			sameHashOtherOrg.SecretHash = first.SecretHash
			sameClientIDOperator := newKey("", at(5))
			sameClientIDOperator.ClientID = first.ClientID
			tests := []struct {
				name string
				key  store.Key
				want error
			}{
				{"same client ID", sameClientID, store.ErrConflict},
				{"same secret hash", sameHash, store.ErrConflict},
				{"same secret hash, other org", sameHashOtherOrg, store.ErrConflict},
				{"same client ID, operator key", sameClientIDOperator, store.ErrConflict},
				{"unknown org", newKey(newID(), at(6)), store.ErrNotFound},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					wantErr(t, "CreateKey", s.CreateKey(t.Context(), tt.key), tt.want)
				})
			}
			checkKey(t, keyByClientID(t, s, first.ClientID), first)
			keys, err := s.ListKeys(t.Context(), org)
			if err != nil {
				t.Fatalf("ListKeys: %v", err)
			}
			if len(keys) != 1 {
				t.Errorf("ListKeys after refused creates = %d keys, want 1", len(keys))
			}
			op, err := s.ListKeys(t.Context(), "")
			if err != nil {
				t.Fatalf("ListKeys(\"\"): %v", err)
			}
			if len(op) != 0 {
				t.Errorf("ListKeys(\"\") after refused creates = %d keys, want 0", len(op))
			}
		}},
		{"RevokedAndExpiredStillFound", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			revoked := newKey(org, at(1))
			createKey(t, s, revoked)
			if err := s.RevokeKey(t.Context(), revoked.ClientID, at(10)); err != nil {
				t.Fatalf("RevokeKey: %v", err)
			}
			revoked.RevokedAt = ptr(at(10))
			expired := newKey(org, at(-7200))
			expired.ExpiresAt = ptr(at(-3600))
			createKey(t, s, expired)
			checkKey(t, keyByClientID(t, s, revoked.ClientID), revoked)
			checkKey(t, keyByClientID(t, s, expired.ClientID), expired)
		}},
		{"RevokeKeepsFirstTime", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			k := newKey(org, at(1))
			createKey(t, s, k)
			if err := s.RevokeKey(t.Context(), k.ClientID, at(100)); err != nil {
				t.Fatalf("first RevokeKey: %v", err)
			}
			for _, when := range []time.Time{at(200), at(50)} {
				if err := s.RevokeKey(t.Context(), k.ClientID, when); err != nil {
					t.Fatalf("RevokeKey again: %v", err)
				}
			}
			k.RevokedAt = ptr(at(100))
			checkKey(t, keyByClientID(t, s, k.ClientID), k)
		}},
		{"RevokeMissing", func(t *testing.T, s store.Store) {
			wantErr(t, "RevokeKey", s.RevokeKey(t.Context(), "cw_ci_"+newID(), at(1)), store.ErrNotFound)
		}},
		{"Rotate", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			k := newKey(org, at(1))
			k.ExpiresAt = ptr(at(86400))
			createKey(t, s, k)
			other := newKey(org, at(2))
			createKey(t, s, other)

			newHash := hash("cw_sk_rotated-secret-abcdefgh")
			if err := s.RotateKey(t.Context(), k.ClientID, newHash, "abcdefgh", at(50)); err != nil {
				t.Fatalf("RotateKey: %v", err)
			}
			_, err := s.KeyBySecretHash(t.Context(), k.SecretHash)
			wantErr(t, "KeyBySecretHash(old hash)", err, store.ErrNotFound)
			want := k
			want.SecretHash = newHash
			want.SecretLast8 = "abcdefgh"
			want.RotatedAt = ptr(at(50))
			got, err := s.KeyBySecretHash(t.Context(), newHash)
			if err != nil {
				t.Fatalf("KeyBySecretHash(new hash): %v", err)
			}
			checkKey(t, got, want)
			checkKey(t, keyByClientID(t, s, k.ClientID), want)

			// The old hash is free again; a hash another key holds is not.
			err = s.RotateKey(t.Context(), k.ClientID, other.SecretHash, "zzzzzzzz", at(60))
			wantErr(t, "RotateKey to a taken hash", err, store.ErrConflict)
			checkKey(t, keyByClientID(t, s, k.ClientID), want)
			checkKey(t, keyByClientID(t, s, other.ClientID), other)

			err = s.RotateKey(t.Context(), "cw_ci_"+newID(), hash("x"), "xxxxxxxx", at(70))
			wantErr(t, "RotateKey of a missing key", err, store.ErrNotFound)
		}},
		{"OperatorKeys", func(t *testing.T, s store.Store) {
			org := newOrg(t, s)
			op1 := newKey("", at(3))
			op2 := newKey("", at(1))
			fed := newKey(org, at(2))
			for _, k := range []store.Key{op1, op2, fed} {
				createKey(t, s, k)
			}
			checkKey(t, keyByClientID(t, s, op1.ClientID), op1)
			got, err := s.KeyBySecretHash(t.Context(), op2.SecretHash)
			if err != nil {
				t.Fatalf("KeyBySecretHash: %v", err)
			}
			checkKey(t, got, op2)

			keys, err := s.ListKeys(t.Context(), "")
			if err != nil {
				t.Fatalf("ListKeys(\"\"): %v", err)
			}
			if len(keys) != 2 {
				t.Fatalf("ListKeys(\"\") = %d keys, want 2", len(keys))
			}
			checkKey(t, keys[0], op2)
			checkKey(t, keys[1], op1)
		}},
		{"ListOldestFirstPerOrg", func(t *testing.T, s store.Store) {
			orgA, orgB, empty := newOrg(t, s), newOrg(t, s), newOrg(t, s)
			a2 := newKey(orgA, at(20))
			b1 := newKey(orgB, at(15))
			a1 := newKey(orgA, at(10))
			a3 := newKey(orgA, at(30))
			op := newKey("", at(5))
			for _, k := range []store.Key{a2, b1, a1, a3, op} {
				createKey(t, s, k)
			}
			if err := s.RevokeKey(t.Context(), a3.ClientID, at(40)); err != nil {
				t.Fatalf("RevokeKey: %v", err)
			}
			a3.RevokedAt = ptr(at(40))
			tests := []struct {
				org  string
				want []store.Key
			}{
				{orgA, []store.Key{a1, a2, a3}},
				{orgB, []store.Key{b1}},
				{empty, nil},
				{"", []store.Key{op}},
			}
			for _, tt := range tests {
				keys, err := s.ListKeys(t.Context(), tt.org)
				if err != nil {
					t.Fatalf("ListKeys(%q): %v", tt.org, err)
				}
				if len(keys) != len(tt.want) {
					t.Errorf("ListKeys(%q) = %d keys, want %d", tt.org, len(keys), len(tt.want))
					continue
				}
				for i := range keys {
					checkKey(t, keys[i], tt.want[i])
				}
			}
		}},
	}
}
