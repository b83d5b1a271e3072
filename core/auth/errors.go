package auth

import (
	"errors"
	"log/slog"
)

// Kind classifies an authentication or authorization refusal. The HTTP layer maps it to a status:
// KindUnauthenticated to 401, KindForbidden and KindNotFederated to 403, KindUnavailable to 503
// with Retry-After. The zero Kind means "not an auth refusal" (see KindOf).
type Kind int

// The kinds of refusal.
const (
	// KindUnauthenticated: no live key matched the request. No credential, a malformed one, an
	// unknown key, a wrong secret, a revoked key and an expired key all land here.
	KindUnauthenticated Kind = iota + 1
	// KindForbidden: the key authenticated but lacks one or more scopes, listed in Error.Scopes.
	KindForbidden
	// KindNotFederated: the key is an operator key, not locked to an organization, and the
	// operation serves one organization.
	KindNotFederated
	// KindUnavailable: the key store failed transiently (the lookup error wraps
	// store.ErrUnavailable). The client should retry the same request later.
	KindUnavailable
)

// String returns the kind's name, for logs.
func (k Kind) String() string {
	switch k {
	case KindUnauthenticated:
		return "unauthenticated"
	case KindForbidden:
		return "forbidden"
	case KindNotFederated:
		return "not_federated"
	case KindUnavailable:
		return "unavailable"
	}
	return "none"
}

// Reason says why a request was unauthenticated. It is for logs and metric labels on the server
// and must not be sent to the client: telling an unknown key from a revoked one helps an
// attacker. The values are fixed short phrases.
type Reason string

// The reasons for KindUnauthenticated.
const (
	// ReasonMissing: no secret was presented.
	ReasonMissing Reason = "missing"
	// ReasonMalformed: a header or the secret is not well formed (format or checksum).
	ReasonMalformed Reason = "malformed"
	// ReasonConflict: Client-Secret and the bearer token were both sent and differ.
	ReasonConflict Reason = "conflict"
	// ReasonUnknownKey: no key has that client ID, or no key has that secret.
	ReasonUnknownKey Reason = "unknown_key"
	// ReasonWrongSecret: the secret does not belong to the named client ID.
	ReasonWrongSecret Reason = "wrong_secret"
	// ReasonRevoked: the key was revoked.
	ReasonRevoked Reason = "revoked"
	// ReasonExpired: the key's expiry time has been reached.
	ReasonExpired Reason = "expired"
	// ReasonCheckFailed: the store's KeyCheck, run with the request's work, found the key no
	// longer live (revoked, rotated or expired since its facts were cached).
	ReasonCheckFailed Reason = "check_failed"
)

// Messages shown to clients. They never say which of several refusals applied.
const (
	msgMissing = "no credential: send the Client-ID and Client-Secret headers, " +
		"or Authorization: Bearer <secret>"
	msgMalformed = "malformed credential: the headers or the secret are not well formed " +
		"(check for a copying mistake)"
	msgConflict = "conflicting credentials: Client-Secret and the bearer token differ"
	msgRejected = "invalid credential: the key is unknown, revoked or expired, " +
		"or the secret is wrong"
	msgNotFederated = "key is not federated to an organization: this endpoint serves one clinic, " +
		"use a key federated to it"
	msgUnavailable = "key store unavailable, retry later"
)

// Error is a refusal by this package. Branch on Kind (or use KindOf); never on the wording of
// Message, which may change.
type Error struct {
	// Kind classifies the refusal.
	Kind Kind
	// Reason says why, for KindUnauthenticated only; server-side use only (see Reason).
	Reason Reason
	// Message is a lowercase sentence safe to send to the client. It does not reveal Reason.
	Message string
	// Scopes lists the missing scopes, sorted and without duplicates, for KindForbidden.
	Scopes []string
	// Err is the underlying cause, if any (a format error, a store error); for logs only.
	Err error
}

// Error returns Message, which is safe to show the client. Log the whole error with slog to see
// Reason and the cause.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the underlying cause, so that errors.Is(err, store.ErrUnavailable) holds for a
// KindUnavailable error.
func (e *Error) Unwrap() error { return e.Err }

// LogValue reports the kind, reason, missing scopes, message and cause for structured logs.
func (e *Error) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("kind", e.Kind.String())}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", string(e.Reason)))
	}
	if len(e.Scopes) > 0 {
		attrs = append(attrs, slog.Any("missing_scopes", e.Scopes))
	}
	attrs = append(attrs, slog.String("message", e.Message))
	if e.Err != nil {
		attrs = append(attrs, slog.String("cause", e.Err.Error()))
	}
	return slog.GroupValue(attrs...)
}

// KindOf returns the Kind of the first *Error in err's chain, or 0 when there is none (err is nil
// or is not a refusal, for example a permanent store failure the caller should answer with 500).
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

func unauthenticated(r Reason, cause error) *Error {
	msg := msgRejected
	switch r {
	case ReasonMissing:
		msg = msgMissing
	case ReasonMalformed:
		msg = msgMalformed
	case ReasonConflict:
		msg = msgConflict
	}
	return &Error{Kind: KindUnauthenticated, Reason: r, Message: msg, Err: cause}
}

// Rejected returns the 401 refusal for a request whose KeyCheck the store rejected (cause wraps
// store.ErrKeyRejected). Its message is the same as for any other dead key.
func Rejected(cause error) *Error {
	return &Error{Kind: KindUnauthenticated, Reason: ReasonCheckFailed, Message: msgRejected, Err: cause}
}
