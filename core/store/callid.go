package store

import (
	"crypto/sha256"
	"encoding/hex"
)

// CallIDLen is the length of every CallID.
const CallIDLen = 36

// CallID returns the identifier of the call filed under orgID, provider and providerCallID: the
// same for every write of the call, in every release and on every replica, and known before
// anything is stored. It is shaped as a UUID (version 8, RFC 9562 variant) and is the SHA-256 of
// the key, so distinct keys get distinct ids: a store needs no index of its own to keep call ids
// unique. The key's parts must not contain a zero byte (callwire's identifiers cannot hold control
// characters).
func CallID(orgID, provider, providerCallID string) string {
	var b [CallIDLen]byte
	return string(AppendCallID(b[:0], orgID, provider, providerCallID))
}

// AppendCallID appends CallID(orgID, provider, providerCallID) to dst and returns the extended
// slice.
func AppendCallID(dst []byte, orgID, provider, providerCallID string) []byte {
	sum := KeySum("", orgID, provider, providerCallID)
	sum[6] = sum[6]&0x0f | 0x80
	sum[8] = sum[8]&0x3f | 0x80
	var b [CallIDLen]byte
	hex.Encode(b[0:8], sum[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], sum[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], sum[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], sum[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], sum[10:16])
	return append(dst, b[:]...)
}

// KeySum returns the SHA-256 of domain, then of orgID, provider and providerCallID each followed
// by a zero byte: a digest of a call's key, the same in every release, that differs from one
// domain to another. CallID is the digest of the empty domain; another identifier drawn from the
// key names a domain of its own, which must end in a zero byte, so that its digits are never a
// call's.
func KeySum(domain, orgID, provider, providerCallID string) [sha256.Size]byte {
	var buf [256]byte
	k := append(buf[:0], domain...)
	k = append(append(append(append(append(append(k, orgID...), 0), provider...), 0), providerCallID...), 0)
	return sha256.Sum256(k)
}
