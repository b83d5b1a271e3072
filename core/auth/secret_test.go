package auth

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
)

func TestNewCredential(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		c := NewCredential()
		if err := CheckSecretFormat(c.Secret); err != nil {
			t.Fatalf("fresh secret refused: %v", err)
		}
		if len(c.Secret) != 54 {
			t.Fatalf("secret length %d, want %d", len(c.Secret), SecretLen)
		}
		if !strings.HasPrefix(c.ClientID, ClientIDPrefix) ||
			len(c.ClientID) != len(ClientIDPrefix)+ClientIDRandomLen {
			t.Fatalf("client id %q: bad shape", c.ClientID)
		}
		for i := len(ClientIDPrefix); i < len(c.ClientID); i++ {
			if !isBase62(c.ClientID[i]) {
				t.Fatalf("client id %q: non-base62 character", c.ClientID)
			}
		}
		sum := sha256.Sum256([]byte(c.Secret))
		if !bytes.Equal(c.SecretHash, sum[:]) || !bytes.Equal(HashSecret(c.Secret), sum[:]) {
			t.Fatal("secret hash is not the SHA-256 of the secret")
		}
		if c.SecretLast8 != c.Secret[len(c.Secret)-8:] {
			t.Fatalf("last8 %q of %q", c.SecretLast8, c.Secret)
		}
		if seen[c.Secret] || seen[c.ClientID] {
			t.Fatal("repeated secret or client id")
		}
		seen[c.Secret], seen[c.ClientID] = true, true
	}
}

// TestRandomBase62Spread is a coarse check that every alphabet character turns up and none
// dominates; it catches a broken alphabet or a modulo slip, not subtle bias.
func TestRandomBase62Spread(t *testing.T) {
	counts := map[byte]int{}
	s := randomBase62(62 * 400)
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	if len(counts) != 62 {
		t.Fatalf("%d distinct characters, want 62", len(counts))
	}
	for c, n := range counts {
		if n < 250 || n > 550 {
			t.Errorf("character %q drawn %d times of %d, expected about 400", c, n, len(s))
		}
	}
}

func TestSecretLast8(t *testing.T) {
	for in, want := range map[string]string{"": "", "abc": "abc", "12345678": "12345678",
		"x12345678": "12345678"} {
		if got := SecretLast8(in); got != want {
			t.Errorf("SecretLast8(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckSecretFormat(t *testing.T) {
	good := NewSecret()
	body := good[:SecretLen-SecretChecksumLen]
	tests := []struct {
		name   string
		secret string
		ok     bool
		want   string // substring of the error
	}{
		{"fresh", good, true, ""},
		{"known vector", knownSecret, true, ""},
		{"empty", "", false, "prefix"},
		{"client id prefix", ClientIDPrefix + good[len(SecretPrefix):], false, "prefix"},
		{"upper-case prefix", "CWSK_" + good[len(SecretPrefix):], false, "prefix"},
		{"truncated", good[:len(good)-1], false, "53 characters"},
		{"extended", good + "0", false, "55 characters"},
		{"trailing newline", good[:len(good)-1] + "\n", false, "not base62"},
		{"underscore in body", body[:10] + "_" + body[11:] + good[len(body):], false, "not base62"},
		{"wrong checksum", body + "000000", false, "checksum"},
		{"checksum of another body", NewSecret()[:len(body)] + good[len(body):], false, "checksum"},
		{"non-ASCII", body[:20] + "é" + body[22:] + good[len(body):], false, "not base62"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSecretFormat(tt.secret)
			if tt.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if len(tt.secret) > 12 && strings.Contains(err.Error(), tt.secret[len(SecretPrefix):]) {
				t.Errorf("error %q repeats the secret", err)
			}
		})
	}
}

// knownSecret pins the checksum algorithm (CRC-32 IEEE of prefix and body, base62, six digits):
// changing it would invalidate every secret already issued.
const knownSecret = "cwsk_0000000000000000000000000000000000000000000" + "3o6FQK"

// TestChecksumCatchesSingleCharTypos tries every single-character substitution, within the
// base62 alphabet and outside it, at every position of a few secrets, and every swap of two
// different neighbours: all must be refused.
func TestChecksumCatchesSingleCharTypos(t *testing.T) {
	for range 5 {
		s := NewSecret()
		for i := 0; i < len(s); i++ {
			for c := 0; c < 256; c++ {
				if byte(c) == s[i] {
					continue
				}
				typo := s[:i] + string([]byte{byte(c)}) + s[i+1:]
				if CheckSecretFormat(typo) == nil {
					t.Fatalf("typo at %d (%q -> %q) accepted", i, s[i], byte(c))
				}
			}
		}
		for i := 0; i+1 < len(s); i++ {
			if s[i] == s[i+1] {
				continue
			}
			swapped := s[:i] + string([]byte{s[i+1], s[i]}) + s[i+2:]
			if CheckSecretFormat(swapped) == nil {
				t.Fatalf("swap at %d accepted", i)
			}
		}
	}
}
