package history

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/callwire/callwire/core/store"
)

func TestCallbackCursor(t *testing.T) {
	scope := callbackScope("org-1", store.CallbackFilter{Open: true})
	p := store.CallbackPosition{LastMissedAt: time.Date(2026, 12, 1, 9, 30, 0, 123456789, time.UTC), Number: "+15550100101"}
	c := encodeCallbackCursor(p, scope)
	got, err := decodeCallbackCursor(c, scope)
	if err != nil || *got != p {
		t.Fatalf("decode(encode(%v)) = %v, %v", p, got, err)
	}
	for name, s := range map[string][sha256.Size]byte{
		"another organization": callbackScope("org-2", store.CallbackFilter{Open: true}),
		"another state":        callbackScope("org-1", store.CallbackFilter{}),
		"another location":     callbackScope("org-1", store.CallbackFilter{Open: true, Location: "north"}),
	} {
		if _, err := decodeCallbackCursor(c, s); err == nil {
			t.Errorf("a cursor used by %s was taken", name)
		}
	}
	for _, bad := range []string{"", "!", c[:len(c)-2], c + "A", "AQ"} {
		if _, err := decodeCallbackCursor(bad, scope); err == nil {
			t.Errorf("cursor %q was taken", bad)
		}
	}
}

func FuzzCallbackCursor(f *testing.F) {
	scope := callbackScope("org-1", store.CallbackFilter{Open: true})
	f.Add(encodeCallbackCursor(store.CallbackPosition{LastMissedAt: time.Unix(1, 0), Number: "+15550100101"}, scope))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := decodeCallbackCursor(s, scope)
		if err != nil {
			return
		}
		if again := encodeCallbackCursor(*p, scope); again != s {
			t.Fatalf("cursor %q decodes to %v, which encodes to %q", s, p, again)
		}
	})
}
