package auth

import (
	"bytes"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

func TestResolve(t *testing.T) {
	f := newFixture()
	now := t0
	a, err := NewAuthenticator(f.lookup, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	headers := Credentials{ClientID: f.live.ClientID, ClientSecret: f.live.Secret}
	bearer := Credentials{Authorization: "Bearer " + f.live.Secret}

	// First sight: read from the store, verified, and the check names the key and the secret.
	r, err := a.Resolve(t.Context(), headers)
	if err != nil || !r.Verified || r.Principal.OrgID != "org_1" || r.Check.ClientID != f.live.ClientID ||
		!bytes.Equal(r.Check.SecretHash, f.live.SecretHash) || !r.Check.At.Equal(now) {
		t.Fatalf("first resolve: %+v, %v", r, err)
	}
	before := f.lookup.calls.Load()
	// Seen before: no store read, not verified, both credential forms.
	for _, c := range []Credentials{headers, bearer} {
		r, err = a.Resolve(t.Context(), c)
		if err != nil || r.Verified || r.Principal.ClientID != f.live.ClientID || len(r.Principal.Scopes) != 1 {
			t.Fatalf("cached resolve: %+v, %v", r, err)
		}
	}
	if n := f.lookup.calls.Load() - before; n != 0 {
		t.Errorf("cached resolve read the store %d times", n)
	}
	// The cached principal is a copy: changing it does not change the cache.
	r.Principal.Scopes[0] = "tampered"
	if r, _ = a.Resolve(t.Context(), headers); r.Principal.Scopes[0] != ScopeCallsEvents {
		t.Error("cache shares its scopes slice")
	}
	// A Client-ID that does not match the cached key's is not a cache hit.
	if _, err := a.Resolve(t.Context(), Credentials{ClientID: f.other.ClientID, ClientSecret: f.live.Secret}); KindOf(err) != KindUnauthenticated {
		t.Errorf("mismatched client id: %v", err)
	}
	// Forget sends the next resolve back to the store.
	a.Forget(store.KeyCheck{ClientID: f.live.ClientID, SecretHash: f.live.SecretHash})
	before = f.lookup.calls.Load()
	if r, err = a.Resolve(t.Context(), headers); err != nil || !r.Verified || f.lookup.calls.Load() != before+1 {
		t.Errorf("after Forget: %+v, %v", r, err)
	}
	// Refusals are never cached, and malformed credentials never reach the store.
	before = f.lookup.calls.Load()
	for _, c := range []Credentials{{}, {ClientSecret: "cwsk_short"}, {Authorization: "Bearer"}} {
		if _, err := a.Resolve(t.Context(), c); KindOf(err) != KindUnauthenticated {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if f.lookup.calls.Load() != before {
		t.Error("a malformed credential reached the store")
	}
	for range 2 {
		if _, err := a.Resolve(t.Context(), Credentials{ClientID: f.revoked.ClientID, ClientSecret: f.revoked.Secret}); KindOf(err) != KindUnauthenticated {
			t.Errorf("revoked: %v", err)
		}
	}
	if f.lookup.calls.Load() != before+2 {
		t.Error("a refused key was cached")
	}
	if e := Rejected(store.ErrKeyRejected); e.Kind != KindUnauthenticated || e.Message != msgRejected {
		t.Errorf("Rejected: %+v", e)
	}
}
