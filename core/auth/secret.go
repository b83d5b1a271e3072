package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

// Secret and client ID layout. A secret is SecretPrefix, SecretRandomLen random base62
// characters, then a checksum of SecretChecksumLen base62 characters: the CRC-32 (IEEE) of
// everything before it, most significant digit first, padded with '0'. A client ID is
// ClientIDPrefix followed by ClientIDRandomLen random base62 characters. The base62 alphabet is
// 0-9, A-Z, a-z.
const (
	// SecretPrefix starts every client secret, so that secret scanners can recognise a leaked
	// one.
	SecretPrefix = "cwsk_"
	// SecretRandomLen is the number of random base62 characters in a secret: 43 characters
	// carry just over 256 bits.
	SecretRandomLen = 43
	// SecretChecksumLen is the number of base62 checksum characters that end a secret.
	SecretChecksumLen = 6
	// SecretLen is the length of every well-formed secret.
	SecretLen = len(SecretPrefix) + SecretRandomLen + SecretChecksumLen

	// ClientIDPrefix starts every client ID generated here. Client IDs are not secret.
	ClientIDPrefix = "cwid_"
	// ClientIDRandomLen is the number of random base62 characters in a client ID (about 131
	// bits, enough to be unique without coordination).
	ClientIDRandomLen = 22
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Credential is a freshly generated key credential: what the client is given once, and what the
// store keeps (SecretHash and SecretLast8 go into store.Key; Secret itself must never be stored).
type Credential struct {
	// ClientID names the key. It is not secret.
	ClientID string
	// Secret proves the key. Show it to the client once; it cannot be recovered.
	Secret string
	// SecretHash is HashSecret(Secret).
	SecretHash []byte
	// SecretLast8 is SecretLast8(Secret), for display.
	SecretLast8 string
}

// NewCredential returns a new client ID and secret, drawn from crypto/rand, together with the
// hash and last eight characters of the secret that the store keeps. The secret passes
// CheckSecretFormat.
func NewCredential() Credential {
	s := NewSecret()
	return Credential{
		ClientID:    NewClientID(),
		Secret:      s,
		SecretHash:  HashSecret(s),
		SecretLast8: SecretLast8(s),
	}
}

// NewClientID returns a new random client ID: ClientIDPrefix and ClientIDRandomLen base62
// characters from crypto/rand.
func NewClientID() string {
	return ClientIDPrefix + randomBase62(ClientIDRandomLen)
}

// NewSecret returns a new random client secret (SecretPrefix, SecretRandomLen base62 characters
// from crypto/rand, and the checksum). Use it on its own to rotate a key's secret; the store
// takes HashSecret and SecretLast8 of it.
func NewSecret() string {
	body := SecretPrefix + randomBase62(SecretRandomLen)
	return body + checksum(body)
}

// HashSecret returns the SHA-256 of the secret, as kept in store.Key.SecretHash. It does not
// check the secret's format.
func HashSecret(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// SecretLast8 returns the last eight characters of the secret (all of it when shorter), as kept
// in store.Key.SecretLast8 for display.
func SecretLast8(secret string) string {
	if len(secret) <= 8 {
		return secret
	}
	return secret[len(secret)-8:]
}

// CheckSecretFormat reports whether s is a well-formed client secret: the prefix, the length,
// the alphabet and the checksum. It reads no database, so a truncated or mistyped secret (any
// single changed character, or two swapped neighbours) is refused before a lookup. A nil result
// says nothing about whether a key with that secret exists. The error never contains s.
func CheckSecretFormat(s string) error {
	if !strings.HasPrefix(s, SecretPrefix) {
		return errors.New("malformed secret: missing " + SecretPrefix + " prefix")
	}
	if len(s) != SecretLen {
		return fmt.Errorf("malformed secret: %d characters, want %d", len(s), SecretLen)
	}
	for i := len(SecretPrefix); i < len(s); i++ {
		if !isBase62(s[i]) {
			return fmt.Errorf("malformed secret: character %d is not base62", i+1)
		}
	}
	body := s[:SecretLen-SecretChecksumLen]
	if checksum(body) != s[len(body):] {
		return errors.New("malformed secret: checksum does not match (mistyped or truncated)")
	}
	return nil
}

func isBase62(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z'
}

// checksum returns the CRC-32 (IEEE) of body as SecretChecksumLen base62 digits, most
// significant first. 62^6 exceeds 2^32, so the encoding is exact.
func checksum(body string) string {
	n := crc32.ChecksumIEEE([]byte(body))
	var out [SecretChecksumLen]byte
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = base62[n%62]
		n /= 62
	}
	return string(out[:])
}

// randomBase62 returns n characters drawn uniformly from the base62 alphabet with crypto/rand.
// Bytes of 248 and above are rejected so that every character is equally likely (248 = 4*62).
func randomBase62(n int) string {
	out := make([]byte, 0, n)
	var buf [64]byte
	for len(out) < n {
		// crypto/rand.Read never returns an error: on failure it stops the program.
		_, _ = rand.Read(buf[:])
		for _, b := range buf {
			if b >= 248 {
				continue
			}
			out = append(out, base62[b%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out)
}
