package auth

import (
	"context"
	"slices"

	"github.com/callwire/callwire/core/store"
)

// KeyCheck is the proof of a live key that a Resolution carries to the store with the request's
// work. It is the store's own type, named here so that a layer which only passes it along (the
// HTTP API) need not import the store.
type KeyCheck = store.KeyCheck

// Resolution is who a request acts as, with the KeyCheck that proves its key live.
type Resolution struct {
	Principal Principal
	// Check must go to the store with the request's work (store.Write.Check, KnownEvents). The
	// store then refuses the work, with store.ErrKeyRejected, if the key was revoked, rotated or
	// expired, even a moment before.
	Check store.KeyCheck
	// Verified is true when this call read the key from the store and found it live. When false
	// the principal comes from the cache of immutable key facts, and only Check proves the key is
	// still live: before answering anything but success, call Authenticate to learn whether the
	// request is authenticated at all.
	Verified bool
}

// Resolve returns who the credentials act as, without a store read when the key's immutable
// facts (client ID, organization, scopes) are cached from an earlier request with the same
// secret. The key's mutable state (revocation, rotation, expiry) is then proved by the returned
// Check, which the caller hands to the store with its work, in the same transaction.
//
// A malformed credential is refused without a lookup, as by Authenticate; a cache miss is
// Authenticate itself.
func (a *Authenticator) Resolve(ctx context.Context, c Credentials) (Resolution, error) {
	clientID, secret, err := parseCredentials(c)
	if err != nil {
		return Resolution{}, err
	}
	hash := HashSecret(secret)
	now := a.now()
	if p, ok := a.facts.Get(string(hash)); ok && (clientID == "" || clientID == p.ClientID) {
		p.Scopes = slices.Clone(p.Scopes)
		return Resolution{Principal: p, Check: store.KeyCheck{ClientID: p.ClientID, SecretHash: hash, At: now}}, nil
	}
	p, err := a.authenticate(ctx, clientID, hash)
	if err != nil {
		return Resolution{}, err
	}
	a.remember(p, hash)
	return Resolution{Principal: p, Check: store.KeyCheck{ClientID: p.ClientID, SecretHash: hash, At: now}, Verified: true}, nil
}

// Forget drops the cached facts for the check's secret, after the store rejected it.
func (a *Authenticator) Forget(check store.KeyCheck) {
	a.facts.Remove(string(check.SecretHash))
}

// remember caches the immutable facts of a key just proved live with the secret's hash.
func (a *Authenticator) remember(p Principal, hash []byte) {
	p.Scopes = slices.Clone(p.Scopes)
	a.facts.Add(string(hash), p)
}
