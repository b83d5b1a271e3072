package auth

import (
	"strings"
	"testing"
	"time"
)

// FuzzCheckSecretFormat: the checker never panics, and whatever it accepts has the documented
// shape, survives a round trip through the Authorization header, and authenticates against a key
// holding its hash.
func FuzzCheckSecretFormat(f *testing.F) {
	good := NewSecret()
	for _, s := range []string{"", SecretPrefix, good, knownSecret, good[:len(good)-1], good + "0",
		strings.ToUpper(good), ClientIDPrefix + good[len(SecretPrefix):], "cwsk_" + strings.Repeat("é", 24)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := CheckSecretFormat(s); err != nil {
			if len(s) > len(SecretPrefix) && strings.Contains(err.Error(), s) {
				t.Fatalf("error %q repeats the input", err)
			}
			return
		}
		if len(s) != SecretLen || !strings.HasPrefix(s, SecretPrefix) {
			t.Fatalf("accepted %q of the wrong shape", s)
		}
		body := s[:SecretLen-SecretChecksumLen]
		if body+checksum(body) != s {
			t.Fatalf("accepted %q whose checksum does not recompute", s)
		}
		if form, tok := parseAuthorization("Bearer " + s); form != authzBearer || tok != s {
			t.Fatalf("accepted secret %q does not survive the bearer header: %v %q", s, form, tok)
		}
		c := Credential{ClientID: "cwid_fuzz", Secret: s, SecretHash: HashSecret(s), SecretLast8: SecretLast8(s)}
		a, err := NewAuthenticator(newFakeLookup(keyFor(c, "org_1", ScopeCallsEvents)), fixedClock(t0))
		if err != nil {
			t.Fatal(err)
		}
		for _, creds := range []Credentials{
			{ClientID: c.ClientID, ClientSecret: s},
			{Authorization: "Bearer " + s},
		} {
			if p, err := a.Authenticate(t.Context(), creds); err != nil || p.ClientID != c.ClientID {
				t.Fatalf("accepted secret %q does not re-verify: %v", s, err)
			}
		}
	})
}

// FuzzParseAuthorization: the parser never panics; a token it returns is a well-formed b64token
// and parses back to itself whatever the case of the scheme.
func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{"", "Bearer", "Bearer ", "bearer x", "Bearer  " + NewSecret(), "Basic abc",
		"Bearer\tx", "Bearer a b", "Bearer ==", "Bearer a==", " BEARER x ", "Bearer x\x00", "Bearer é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		form, tok := parseAuthorization(h)
		switch form {
		case authzBearer:
			if tok == "" || !isB64Token(tok) || strings.ContainsAny(tok, " \t") {
				t.Fatalf("parseAuthorization(%q) returned bad token %q", h, tok)
			}
			for _, scheme := range []string{"Bearer ", "bearer ", "BEARER   "} {
				if f2, t2 := parseAuthorization(scheme + tok); f2 != authzBearer || t2 != tok {
					t.Fatalf("token %q does not round-trip with %q: %v %q", tok, scheme, f2, t2)
				}
			}
		case authzNone, authzOther, authzMalformed:
			if tok != "" {
				t.Fatalf("parseAuthorization(%q) = %v with token %q", h, form, tok)
			}
		default:
			t.Fatalf("parseAuthorization(%q) = unknown form %v", h, form)
		}
	})
}

// FuzzAuthenticate: arbitrary header values never panic and never authenticate unless they carry
// the one stored key's secret.
func FuzzAuthenticate(f *testing.F) {
	c := NewCredential()
	lookup := newFakeLookup(keyFor(c, "org_1", ScopeCallsEvents))
	a, err := NewAuthenticator(lookup, func() time.Time { return t0 })
	if err != nil {
		f.Fatal(err)
	}
	f.Add(c.ClientID, c.Secret, "")
	f.Add("", "", "Bearer "+c.Secret)
	f.Add(c.ClientID, "", "bearer  "+c.Secret)
	f.Add("", c.Secret, "Bearer "+NewSecret())
	f.Add("x", "y", "Basic z")
	f.Fuzz(func(t *testing.T, id, secret, authz string) {
		p, err := a.Authenticate(t.Context(), Credentials{ClientID: id, ClientSecret: secret, Authorization: authz})
		if err != nil {
			if KindOf(err) != KindUnauthenticated {
				t.Fatalf("error %v of kind %v", err, KindOf(err))
			}
			return
		}
		if p.ClientID != c.ClientID || !strings.Contains(secret+authz, c.Secret) {
			t.Fatalf("authenticated %+v from %q %q %q", p, id, secret, authz)
		}
	})
}
