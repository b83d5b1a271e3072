package event

import "testing"

// TestCallPathIsJoin: the constant paths are the paths join would build.
func TestCallPathIsJoin(t *testing.T) {
	for _, prefix := range []string{"call", "call.from", "call.to", "call.trunk", "events[0].call", ""} {
		for _, name := range []string{"direction", "from", "to", "trunk", "diversion", "kind", "number", "name", "extension", "uri", "other"} {
			want := name
			if prefix != "" {
				want = prefix + "." + name
			}
			if got := join(prefix, name); got != want {
				t.Errorf("join(%q, %q) = %q, want %q", prefix, name, got, want)
			}
		}
	}
}
