package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/callwire/callwire/core/store"
)

// TestCallIDStable pins the derived id: calls on file and popups in flight carry it, so a release
// must derive the same ids as the releases before it. Keys longer than the derivation's stack
// buffer must hash the same way.
func TestCallIDStable(t *testing.T) {
	const org, provider, pcid = "clinic-1", "sip", "a84b4c76e66710@pc33.example.com"
	if got, want := store.CallID(org, provider, pcid), "b2b371f0-5bdd-8c16-9c6f-e1884d1e062f"; got != want {
		t.Errorf("CallID = %s, want %s", got, want)
	}
	long := strings.Repeat("k", 300)
	h := sha256.Sum256([]byte(org + "\x00" + provider + "\x00" + long + "\x00"))
	if got := strings.ReplaceAll(store.CallID(org, provider, long), "-", ""); got[:12] != hex.EncodeToString(h[:6]) {
		t.Errorf("CallID of a long key = %s, want it to start %x", got, h[:6])
	}
	if got := store.AppendCallID([]byte("x"), org, provider, pcid); string(got) != "x"+store.CallID(org, provider, pcid) {
		t.Errorf("AppendCallID = %s", got)
	}
}

func TestCallIDDistinct(t *testing.T) {
	a := store.CallID("o1", "sip", "x")
	for _, other := range []string{store.CallID("o2", "sip", "x"), store.CallID("o1", "sipx", ""), store.CallID("o1", "sip", "y")} {
		if other == a {
			t.Errorf("two keys share the call ID %s", a)
		}
	}
	if len(a) != store.CallIDLen {
		t.Errorf("len(CallID) = %d, want %d", len(a), store.CallIDLen)
	}
}
