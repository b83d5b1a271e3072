package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

// fakeLookup is an in-memory KeyLookup. err, when set, is returned by every lookup.
type fakeLookup struct {
	byID   map[string]store.Key
	byHash map[string]store.Key
	err    error
	calls  atomic.Int64
}

func newFakeLookup(keys ...store.Key) *fakeLookup {
	f := &fakeLookup{byID: map[string]store.Key{}, byHash: map[string]store.Key{}}
	for _, k := range keys {
		f.byID[k.ClientID] = k
		f.byHash[string(k.SecretHash)] = k
	}
	return f
}

func (f *fakeLookup) KeyByClientID(_ context.Context, id string) (store.Key, error) {
	f.calls.Add(1)
	if f.err != nil {
		return store.Key{}, f.err
	}
	k, ok := f.byID[id]
	if !ok {
		return store.Key{}, fmt.Errorf("key %q: %w", id, store.ErrNotFound)
	}
	return k, nil
}

func (f *fakeLookup) KeyBySecretHash(_ context.Context, hash []byte) (store.Key, error) {
	f.calls.Add(1)
	if f.err != nil {
		return store.Key{}, f.err
	}
	k, ok := f.byHash[string(hash)]
	if !ok {
		return store.Key{}, fmt.Errorf("key by hash: %w", store.ErrNotFound)
	}
	return k, nil
}

var _ KeyLookup = store.Store(nil) // store.Store satisfies KeyLookup.

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

func keyFor(c Credential, orgID string, scopes ...string) store.Key {
	return store.Key{ClientID: c.ClientID, OrgID: orgID, Scopes: scopes, SecretHash: c.SecretHash,
		SecretLast8: c.SecretLast8, CreatedAt: t0.Add(-time.Hour)}
}

func TestNewAuthenticatorValidates(t *testing.T) {
	if _, err := NewAuthenticator(nil, time.Now); err == nil || !strings.Contains(err.Error(), "lookup") {
		t.Errorf("nil lookup: err = %v", err)
	}
	if _, err := NewAuthenticator(newFakeLookup(), nil); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Errorf("nil clock: err = %v", err)
	}
	if err := func() error { _, err := NewAuthenticator(nil, nil); return err }(); err == nil ||
		!strings.Contains(err.Error(), "lookup") || !strings.Contains(err.Error(), "clock") {
		t.Errorf("both nil: err = %v, want both problems", err)
	}
	if a, err := NewAuthenticator(newFakeLookup(), time.Now); err != nil || a == nil {
		t.Errorf("valid arguments: %v", err)
	}
}

// fixture is a lookup holding a live federated key, a revoked key, an expiring key and an
// operator key.
type fixture struct {
	live, other, revoked, expiring, operator Credential
	expiresAt                                time.Time
	lookup                                   *fakeLookup
}

func newFixture() *fixture {
	f := &fixture{live: NewCredential(), other: NewCredential(), revoked: NewCredential(),
		expiring: NewCredential(), operator: NewCredential(), expiresAt: t0.Add(time.Minute)}
	revokedAt := t0.Add(-time.Minute)
	rk := keyFor(f.revoked, "org_1", ScopeCallsEvents)
	rk.RevokedAt = &revokedAt
	ek := keyFor(f.expiring, "org_1", ScopeCallsEvents)
	ek.ExpiresAt = &f.expiresAt
	f.lookup = newFakeLookup(
		keyFor(f.live, "org_1", ScopeCallsEvents),
		keyFor(f.other, "org_2", EventScope("call_ended")),
		rk, ek,
		keyFor(f.operator, "", ScopeCallsEvents),
	)
	return f
}

func TestAuthenticate(t *testing.T) {
	f := newFixture()
	live := f.live
	malformed := live.Secret[:len(live.Secret)-1] + flip(live.Secret[len(live.Secret)-1])
	unknown := NewCredential()

	tests := []struct {
		name       string
		creds      Credentials
		at         time.Time
		wantClient string
		wantReason Reason // "" when the call succeeds
		noLookup   bool   // refused without reading the store
	}{
		// Accepted forms.
		{name: "pair", creds: Credentials{ClientID: live.ClientID, ClientSecret: live.Secret},
			wantClient: live.ClientID},
		{name: "pair with surrounding spaces",
			creds:      Credentials{ClientID: " " + live.ClientID + "\t", ClientSecret: "\t" + live.Secret + " "},
			wantClient: live.ClientID},
		{name: "bearer", creds: Credentials{Authorization: "Bearer " + live.Secret}, wantClient: live.ClientID},
		{name: "bearer lowercase", creds: Credentials{Authorization: "bearer " + live.Secret},
			wantClient: live.ClientID},
		{name: "bearer mixed case", creds: Credentials{Authorization: "BeArEr " + live.Secret},
			wantClient: live.ClientID},
		{name: "bearer extra spaces", creds: Credentials{Authorization: "  Bearer    " + live.Secret + "  "},
			wantClient: live.ClientID},
		{name: "bearer with matching client id",
			creds:      Credentials{ClientID: live.ClientID, Authorization: "Bearer " + live.Secret},
			wantClient: live.ClientID},
		{name: "bearer and equal client secret",
			creds:      Credentials{ClientSecret: live.Secret, Authorization: "Bearer " + live.Secret},
			wantClient: live.ClientID},
		{name: "pair with basic authorization ignored",
			creds: Credentials{ClientID: live.ClientID, ClientSecret: live.Secret,
				Authorization: "Basic dXNlcjpwYXNz"},
			wantClient: live.ClientID},
		{name: "secret alone in Client-Secret", creds: Credentials{ClientSecret: live.Secret},
			wantClient: live.ClientID},
		{name: "expiring key a nanosecond before expiry",
			creds: Credentials{ClientID: f.expiring.ClientID, ClientSecret: f.expiring.Secret},
			at:    f.expiresAt.Add(-time.Nanosecond), wantClient: f.expiring.ClientID},
		{name: "operator key authenticates", creds: Credentials{Authorization: "Bearer " + f.operator.Secret},
			wantClient: f.operator.ClientID},

		// Refusals.
		{name: "no headers", creds: Credentials{}, wantReason: ReasonMissing, noLookup: true},
		{name: "blank headers", creds: Credentials{ClientID: " ", ClientSecret: "\t", Authorization: "  "},
			wantReason: ReasonMissing, noLookup: true},
		{name: "client id only", creds: Credentials{ClientID: live.ClientID}, wantReason: ReasonMissing,
			noLookup: true},
		{name: "basic only", creds: Credentials{Authorization: "Basic dXNlcjpwYXNz"},
			wantReason: ReasonMissing, noLookup: true},
		{name: "bearer without token", creds: Credentials{Authorization: "Bearer"},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "bearer with spaces only", creds: Credentials{Authorization: "Bearer    "},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "bearer without token beside a valid pair",
			creds:      Credentials{ClientID: live.ClientID, ClientSecret: live.Secret, Authorization: "Bearer"},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "bearer with two tokens", creds: Credentials{Authorization: "Bearer " + live.Secret + " x"},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "bearer with tab separator", creds: Credentials{Authorization: "Bearer\t" + live.Secret},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "bearer with auth params", creds: Credentials{Authorization: `Bearer realm="x"`},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "bearer malformed secret", creds: Credentials{Authorization: "Bearer " + malformed},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "pair malformed secret", creds: Credentials{ClientID: live.ClientID, ClientSecret: malformed},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "pair secret not ours", creds: Credentials{ClientID: live.ClientID, ClientSecret: "hunter2"},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "overlong client id",
			creds:      Credentials{ClientID: strings.Repeat("x", 129), ClientSecret: live.Secret},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "client id with a NUL byte", creds: Credentials{ClientID: "cwid_\x00", ClientSecret: live.Secret},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "client id with inner space", creds: Credentials{ClientID: "cwid a", ClientSecret: live.Secret},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "client id not ASCII", creds: Credentials{ClientID: "cwid_é", ClientSecret: live.Secret},
			wantReason: ReasonMalformed, noLookup: true},
		{name: "client secret and bearer differ",
			creds:      Credentials{ClientSecret: live.Secret, Authorization: "Bearer " + f.other.Secret},
			wantReason: ReasonConflict, noLookup: true},
		{name: "unknown client id",
			creds:      Credentials{ClientID: unknown.ClientID, ClientSecret: live.Secret},
			wantReason: ReasonUnknownKey},
		{name: "unknown secret by bearer", creds: Credentials{Authorization: "Bearer " + unknown.Secret},
			wantReason: ReasonUnknownKey},
		{name: "wrong secret for client id (constant-time compare)",
			creds:      Credentials{ClientID: live.ClientID, ClientSecret: f.other.Secret},
			wantReason: ReasonWrongSecret},
		{name: "unknown well-formed secret for client id",
			creds:      Credentials{ClientID: live.ClientID, ClientSecret: unknown.Secret},
			wantReason: ReasonWrongSecret},
		{name: "bearer with mismatched client id",
			creds:      Credentials{ClientID: f.other.ClientID, Authorization: "Bearer " + live.Secret},
			wantReason: ReasonWrongSecret},
		{name: "bearer with unknown client id",
			creds:      Credentials{ClientID: unknown.ClientID, Authorization: "Bearer " + live.Secret},
			wantReason: ReasonUnknownKey},
		{name: "revoked by pair",
			creds:      Credentials{ClientID: f.revoked.ClientID, ClientSecret: f.revoked.Secret},
			wantReason: ReasonRevoked},
		{name: "revoked by bearer", creds: Credentials{Authorization: "Bearer " + f.revoked.Secret},
			wantReason: ReasonRevoked},
		{name: "expired exactly at the boundary",
			creds: Credentials{ClientID: f.expiring.ClientID, ClientSecret: f.expiring.Secret},
			at:    f.expiresAt, wantReason: ReasonExpired},
		{name: "expired after the boundary", creds: Credentials{Authorization: "Bearer " + f.expiring.Secret},
			at: f.expiresAt.Add(time.Hour), wantReason: ReasonExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := tt.at
			if at.IsZero() {
				at = t0
			}
			a, err := NewAuthenticator(f.lookup, fixedClock(at))
			if err != nil {
				t.Fatal(err)
			}
			before := f.lookup.calls.Load()
			p, err := a.Authenticate(t.Context(), tt.creds)
			lookups := f.lookup.calls.Load() - before
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("refused: %v (%v)", err, slog.AnyValue(err))
				}
				if p.ClientID != tt.wantClient {
					t.Fatalf("principal %q, want %q", p.ClientID, tt.wantClient)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted as %+v", p)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if e.Kind != KindUnauthenticated || KindOf(err) != KindUnauthenticated {
				t.Errorf("kind %v, want unauthenticated", e.Kind)
			}
			if e.Reason != tt.wantReason {
				t.Errorf("reason %q, want %q (cause: %v)", e.Reason, tt.wantReason, e.Err)
			}
			if tt.noLookup && lookups != 0 {
				t.Errorf("%d store lookups, want none", lookups)
			}
			if !isZeroPrincipal(p) {
				t.Errorf("refusal returned principal %+v", p)
			}
			for _, c := range []Credential{live, f.other, f.revoked, f.expiring, unknown} {
				if strings.Contains(err.Error(), c.Secret[len(SecretPrefix):]) ||
					strings.Contains(fmt.Sprint(slog.AnyValue(err)), c.Secret[len(SecretPrefix):]) {
					t.Errorf("error or its log value contains a secret")
				}
			}
		})
	}
}

func isZeroPrincipal(p Principal) bool { return p.ClientID == "" && p.OrgID == "" && p.Scopes == nil }

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

// TestRefusalMessagesDoNotLeak checks that unknown, wrong, revoked and expired keys are
// indistinguishable to the client: one message, one kind.
func TestRefusalMessagesDoNotLeak(t *testing.T) {
	f := newFixture()
	a, err := NewAuthenticator(f.lookup, fixedClock(f.expiresAt))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]Credentials{
		"unknown":  {Authorization: "Bearer " + NewSecret()},
		"wrong":    {ClientID: f.live.ClientID, ClientSecret: f.other.Secret},
		"revoked":  {ClientID: f.revoked.ClientID, ClientSecret: f.revoked.Secret},
		"expired":  {ClientID: f.expiring.ClientID, ClientSecret: f.expiring.Secret},
		"mismatch": {ClientID: f.other.ClientID, Authorization: "Bearer " + f.live.Secret},
	}
	msgs := map[string]bool{}
	for name, c := range cases {
		_, err := a.Authenticate(t.Context(), c)
		if KindOf(err) != KindUnauthenticated {
			t.Fatalf("%s: %v", name, err)
		}
		msgs[err.Error()] = true
	}
	if len(msgs) != 1 {
		t.Errorf("refusals are told apart by their messages: %v", slices.Collect(maps.Keys(msgs)))
	}
}

func TestAuthenticatePrincipal(t *testing.T) {
	c := NewCredential()
	k := keyFor(c, "org_9", ScopeCallsEvents, ScopePopupsRead)
	lookup := newFakeLookup(k)
	a, _ := NewAuthenticator(lookup, fixedClock(t0))
	p, err := a.Authenticate(t.Context(), Credentials{ClientID: c.ClientID, ClientSecret: c.Secret})
	if err != nil {
		t.Fatal(err)
	}
	if p.ClientID != c.ClientID || p.OrgID != "org_9" ||
		!slices.Equal(p.Scopes, []string{ScopeCallsEvents, ScopePopupsRead}) {
		t.Fatalf("principal %+v", p)
	}
	p.Scopes[0] = "tampered"
	if lookup.byID[c.ClientID].Scopes[0] != ScopeCallsEvents {
		t.Error("principal shares its scopes slice with the stored key")
	}
}

// TestAuthenticateNoCache revokes a key between two calls on the same Authenticator.
func TestAuthenticateNoCache(t *testing.T) {
	c := NewCredential()
	lookup := newFakeLookup(keyFor(c, "org_1", ScopeCallsEvents))
	now := t0
	a, _ := NewAuthenticator(lookup, func() time.Time { return now })
	creds := Credentials{Authorization: "Bearer " + c.Secret}
	if _, err := a.Authenticate(t.Context(), creds); err != nil {
		t.Fatal(err)
	}
	k := lookup.byID[c.ClientID]
	k.RevokedAt = &now
	lookup.byID[c.ClientID], lookup.byHash[string(k.SecretHash)] = k, k
	if _, err := a.Authenticate(t.Context(), creds); KindOf(err) != KindUnauthenticated {
		t.Fatalf("revoked key: err = %v", err)
	}
}

func TestAuthenticateStoreErrors(t *testing.T) {
	c := NewCredential()
	permanent := errors.New("disk on fire")
	tests := []struct {
		name     string
		err      error
		wantKind Kind
	}{
		{"unavailable", fmt.Errorf("pool exhausted: %w", store.ErrUnavailable), KindUnavailable},
		{"not found", store.ErrNotFound, KindUnauthenticated},
		{"permanent", permanent, 0},
		{"canceled", context.Canceled, 0},
	}
	for _, tt := range tests {
		for _, creds := range []Credentials{
			{ClientID: c.ClientID, ClientSecret: c.Secret},
			{Authorization: "Bearer " + c.Secret},
		} {
			t.Run(tt.name, func(t *testing.T) {
				lookup := newFakeLookup(keyFor(c, "org_1", ScopeCallsEvents))
				lookup.err = tt.err
				a, _ := NewAuthenticator(lookup, fixedClock(t0))
				_, err := a.Authenticate(t.Context(), creds)
				if err == nil {
					t.Fatal("accepted")
				}
				if got := KindOf(err); got != tt.wantKind {
					t.Fatalf("kind %v, want %v (%v)", got, tt.wantKind, err)
				}
				if !errors.Is(err, tt.err) {
					t.Errorf("error %v does not wrap %v", err, tt.err)
				}
				if tt.wantKind == KindUnavailable && strings.Contains(err.Error(), "pool") {
					t.Errorf("client message %q exposes the store error", err)
				}
			})
		}
	}
}

// TestAuthenticateCorruptStoredHash covers the constant-time comparison against a stored hash
// of the wrong length, and a hash lookup that returns a key for another hash.
func TestAuthenticateCorruptStoredHash(t *testing.T) {
	c := NewCredential()
	k := keyFor(c, "org_1", ScopeCallsEvents)
	k.SecretHash = k.SecretHash[:16]
	lookup := newFakeLookup(k)
	lookup.byHash[string(c.SecretHash)] = k
	a, _ := NewAuthenticator(lookup, fixedClock(t0))
	for _, creds := range []Credentials{
		{ClientID: c.ClientID, ClientSecret: c.Secret},
		{Authorization: "Bearer " + c.Secret},
	} {
		_, err := a.Authenticate(t.Context(), creds)
		var e *Error
		if !errors.As(err, &e) || e.Reason != ReasonWrongSecret {
			t.Errorf("%+v: err = %v, want wrong secret", creds, err)
		}
	}
}

func TestParseAuthorization(t *testing.T) {
	tok := NewSecret()
	tests := []struct {
		in        string
		wantForm  authzForm
		wantToken string
	}{
		{"", authzNone, ""},
		{"   ", authzNone, ""},
		{"Bearer " + tok, authzBearer, tok},
		{"bearer " + tok, authzBearer, tok},
		{"BEARER " + tok, authzBearer, tok},
		{"Bearer   " + tok, authzBearer, tok},
		{"\t Bearer " + tok + " \t", authzBearer, tok},
		{"Bearer abc-._~+/==", authzBearer, "abc-._~+/=="},
		{"Bearer", authzMalformed, ""},
		{"Bearer ", authzMalformed, ""},
		{"bearer    ", authzMalformed, ""},
		{"Bearer =", authzMalformed, ""},
		{"Bearer a=b", authzMalformed, ""},
		{"Bearer a b", authzMalformed, ""},
		{"Bearer\t" + tok, authzMalformed, ""},
		{"Bearer " + tok + "\x00", authzMalformed, ""},
		{"Bearer tok,realm=x", authzMalformed, ""},
		{"Basic dXNlcjpwYXNz", authzOther, ""},
		{"Basic", authzOther, ""},
		{"Bearerx " + tok, authzOther, ""},
		{"Token " + tok, authzOther, ""},
		{tok, authzOther, ""},
	}
	for _, tt := range tests {
		form, token := parseAuthorization(tt.in)
		if form != tt.wantForm || token != tt.wantToken {
			t.Errorf("parseAuthorization(%q) = %v, %q; want %v, %q", tt.in, form, token, tt.wantForm, tt.wantToken)
		}
	}
}

func TestErrorLogValue(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	err := error(&Error{Kind: KindUnauthenticated, Reason: ReasonRevoked, Message: msgRejected,
		Err: errors.New("cause")})
	log.Info("refused", "err", err)
	for _, want := range []string{"err.kind=unauthenticated", "err.reason=revoked", "err.cause=cause"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}
	if KindOf(nil) != 0 || KindOf(errors.New("x")) != 0 {
		t.Error("KindOf of a non-refusal is not 0")
	}
	if KindOf(fmt.Errorf("wrapped: %w", err)) != KindUnauthenticated {
		t.Error("KindOf does not see through wrapping")
	}
	for k, want := range map[Kind]string{0: "none", KindUnauthenticated: "unauthenticated",
		KindForbidden: "forbidden", KindNotFederated: "not_federated", KindUnavailable: "unavailable"} {
		if k.String() != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, k, want)
		}
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	var keys []store.Key
	var creds []Credential
	for i := range 1000 {
		c := NewCredential()
		creds = append(creds, c)
		keys = append(keys, keyFor(c, fmt.Sprintf("org_%d", i%10), ScopeCallsEvents))
	}
	lookup := newFakeLookup(keys...)
	a, err := NewAuthenticator(lookup, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	for _, form := range []struct {
		name  string
		creds func(Credential) Credentials
	}{
		{"pair", func(c Credential) Credentials { return Credentials{ClientID: c.ClientID, ClientSecret: c.Secret} }},
		{"bearer", func(c Credential) Credentials { return Credentials{Authorization: "Bearer " + c.Secret} }},
	} {
		b.Run(form.name, func(b *testing.B) {
			all := make([]Credentials, len(creds))
			for i, c := range creds {
				all[i] = form.creds(c)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := a.Authenticate(ctx, all[i%len(all)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
