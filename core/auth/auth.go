// Package auth issues API key secrets and authenticates requests with them. It knows nothing of
// HTTP frameworks: the HTTP layer hands it the raw values of the Client-ID, Client-Secret and
// Authorization headers and maps the returned *Error to a status by its Kind.
//
// A secret is SecretPrefix, 43 random base62 characters and a 6-character checksum (see
// CheckSecretFormat), so a leaked one is recognisable and a mistyped one is refused without a
// database read. The store keeps only its SHA-256 (HashSecret) and last eight characters.
// Revocation and expiry are checked against the store on every call; nothing is cached.
package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/callwire/callwire/core/store"
)

// maxClientIDLen bounds the Client-ID header value sent to the store. Generated IDs are far
// shorter.
const maxClientIDLen = 128

// KeyLookup finds keys. store.Store satisfies it. Both methods return revoked and expired keys as
// they are (the Authenticator refuses them), store.ErrNotFound when there is no such key, and an
// error wrapping store.ErrUnavailable on a transient failure.
type KeyLookup interface {
	// KeyByClientID returns the key with this client ID.
	KeyByClientID(ctx context.Context, clientID string) (store.Key, error)
	// KeyBySecretHash returns the key whose secret hashes to hash (see HashSecret).
	KeyBySecretHash(ctx context.Context, hash []byte) (store.Key, error)
}

// Credentials are the raw values of a request's credential headers, as received; an absent
// header is "". Leading and trailing spaces and tabs are ignored.
type Credentials struct {
	// ClientID is the Client-ID header.
	ClientID string
	// ClientSecret is the Client-Secret header.
	ClientSecret string
	// Authorization is the Authorization header, for example "Bearer cwsk_...".
	Authorization string
}

// Principal is who an authenticated request acts as.
type Principal struct {
	// ClientID names the key that authenticated.
	ClientID string
	// OrgID is the organization the key is federated to, or "" for an operator key.
	OrgID string
	// Scopes are the scopes the key holds. The slice is the Principal's own copy.
	Scopes []string
}

// Federated reports whether the key is locked to an organization (OrgID is set).
func (p Principal) Federated() bool { return p.OrgID != "" }

// Authenticator checks request credentials against a KeyLookup. It is safe for concurrent use
// and keeps no state between calls.
type Authenticator struct {
	lookup KeyLookup
	now    func() time.Time
	// facts caches the immutable facts of keys seen live (client ID, organization, scopes), by
	// secret hash, for Resolve.
	facts *lru.Cache[string, Principal]
}

// factsCacheSize bounds the cache of immutable key facts.
const factsCacheSize = 4096

// NewAuthenticator returns an Authenticator that finds keys with lookup and judges expiry by now.
// Both are required.
func NewAuthenticator(lookup KeyLookup, now func() time.Time) (*Authenticator, error) {
	var problems []error
	if lookup == nil {
		problems = append(problems, errors.New("key lookup is nil"))
	}
	if now == nil {
		problems = append(problems, errors.New("clock is nil"))
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("new authenticator: %w", err)
	}
	facts, err := lru.New[string, Principal](factsCacheSize)
	if err != nil {
		return nil, fmt.Errorf("new authenticator: %w", err)
	}
	return &Authenticator{lookup: lookup, now: now, facts: facts}, nil
}

// Authenticate returns the principal the credentials prove, reading the store on every call.
//
// Accepted forms: the Client-ID and Client-Secret headers; or "Authorization: Bearer <secret>"
// (scheme matched case-insensitively, one or more spaces before the token), where the secret
// alone identifies the key and a Client-ID header, if also sent, must name that same key. When
// both Client-Secret and a bearer token are sent they must be equal. An Authorization header with
// another scheme (Basic, for instance) is not a callwire credential and is ignored.
//
// Errors: a *Error of KindUnauthenticated when no live key matches (no or malformed credential,
// unknown key, wrong secret, a key with RevokedAt set, or expiry time reached: a key expiring at
// T is refused from T on); KindUnavailable when the lookup error wraps store.ErrUnavailable; any other lookup
// failure is returned wrapped and is not a *Error. A malformed secret, or a Client-ID that is not
// visible ASCII of at most 128 bytes, is refused without a lookup.
func (a *Authenticator) Authenticate(ctx context.Context, c Credentials) (Principal, error) {
	clientID, secret, err := parseCredentials(c)
	if err != nil {
		return Principal{}, err
	}
	hash := HashSecret(secret)
	p, err := a.authenticate(ctx, clientID, hash)
	if err == nil {
		a.remember(p, hash)
	}
	return p, err
}

// parseCredentials returns the client ID (or "") and the secret the credentials carry, checked
// for form without any lookup.
func parseCredentials(c Credentials) (clientID, secret string, err error) {
	clientID = trimOWS(c.ClientID)
	secret = trimOWS(c.ClientSecret)

	form, token := parseAuthorization(c.Authorization)
	switch form {
	case authzMalformed:
		return "", "", unauthenticated(ReasonMalformed,
			errors.New("authorization header: bearer scheme without a well-formed token"))
	case authzBearer:
		if secret != "" && secret != token {
			return "", "", unauthenticated(ReasonConflict, nil)
		}
		secret = token
	}
	if secret == "" {
		return "", "", unauthenticated(ReasonMissing, nil)
	}
	if err := CheckSecretFormat(secret); err != nil {
		return "", "", unauthenticated(ReasonMalformed, err)
	}
	if err := checkClientID(clientID); err != nil {
		return "", "", unauthenticated(ReasonMalformed, err)
	}
	return clientID, secret, nil
}

// authenticate reads the key from the store and proves it live for the secret's hash.
func (a *Authenticator) authenticate(ctx context.Context, clientID string, hash []byte) (Principal, error) {
	var (
		key store.Key
		err error
	)
	if clientID != "" {
		// The key is named: fetch it and prove the secret against its stored hash.
		key, err = a.lookup.KeyByClientID(ctx, clientID)
	} else {
		key, err = a.lookup.KeyBySecretHash(ctx, hash)
	}
	if err != nil {
		switch {
		case errors.Is(err, store.ErrUnavailable):
			return Principal{}, &Error{Kind: KindUnavailable, Message: msgUnavailable,
				Err: fmt.Errorf("look up key: %w", err)}
		case errors.Is(err, store.ErrNotFound):
			return Principal{}, unauthenticated(ReasonUnknownKey, err)
		}
		return Principal{}, fmt.Errorf("auth: look up key: %w", err)
	}
	// Constant time, so the comparison reveals nothing of the stored hash. On the hash lookup this
	// also guards against a store that returns the wrong key.
	if subtle.ConstantTimeCompare(key.SecretHash, hash) != 1 {
		return Principal{}, unauthenticated(ReasonWrongSecret, nil)
	}
	if clientID != "" && key.ClientID != clientID {
		return Principal{}, unauthenticated(ReasonWrongSecret,
			errors.New("store returned a key with another client id"))
	}
	now := a.now()
	if key.RevokedAt != nil {
		return Principal{}, unauthenticated(ReasonRevoked, nil)
	}
	if key.ExpiresAt != nil && !now.Before(*key.ExpiresAt) {
		return Principal{}, unauthenticated(ReasonExpired, nil)
	}
	return Principal{ClientID: key.ClientID, OrgID: key.OrgID, Scopes: slices.Clone(key.Scopes)}, nil
}

// authzForm is what an Authorization header value carries.
type authzForm int

const (
	// authzNone: the header is empty.
	authzNone authzForm = iota
	// authzOther: a scheme other than Bearer; not ours.
	authzOther
	// authzBearer: a bearer token.
	authzBearer
	// authzMalformed: the Bearer scheme without a single well-formed token.
	authzMalformed
)

// parseAuthorization reads an Authorization header value (RFC 9110 section 11.6.2, RFC 6750
// section 2.1): auth-scheme, one or more spaces, and a b64token. The scheme is case-insensitive;
// surrounding spaces and tabs are ignored. The token is returned only with authzBearer.
func parseAuthorization(h string) (authzForm, string) {
	h = trimOWS(h)
	if h == "" {
		return authzNone, ""
	}
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		// "Bearer\ttoken" is not valid syntax but is plainly meant as bearer.
		if s, _, ok := strings.Cut(scheme, "\t"); ok && strings.EqualFold(s, "Bearer") {
			return authzMalformed, ""
		}
		return authzOther, ""
	}
	token := strings.TrimLeft(rest, " ")
	if !isB64Token(token) {
		return authzMalformed, ""
	}
	return authzBearer, token
}

// isB64Token reports whether s matches b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" /
// "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !isBase62(c) && !strings.ContainsRune("-._~+/", rune(c)) {
			return false
		}
	}
	return true
}

// checkClientID refuses, before any lookup, a Client-ID value no key can have: one longer than
// maxClientIDLen or holding anything but visible ASCII (a NUL byte or invalid UTF-8 would
// otherwise reach the database as a permanent error instead of a 401).
func checkClientID(id string) error {
	if len(id) > maxClientIDLen {
		return fmt.Errorf("client id: longer than %d bytes", maxClientIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return fmt.Errorf("client id: byte %d is not visible ascii", i+1)
		}
	}
	return nil
}

// trimOWS drops leading and trailing spaces and tabs (optional whitespace around a field value).
func trimOWS(s string) string { return strings.Trim(s, " \t") }
