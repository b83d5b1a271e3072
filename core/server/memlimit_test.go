package server_test

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/server"
)

// TestApplyMemoryLimit: the configured limit is applied, 0 leaves none, and GOMEMLIMIT wins.
func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	for _, tc := range []struct {
		name  string
		limit int64
		env   string
		want  int64
	}{
		{"configured", 32 << 20, "", 32 << 20},
		{"none", 0, "", math.MaxInt64},
		{"the variable wins", 32 << 20, "48MiB", math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64) // as the runtime starts without GOMEMLIMIT
			got := server.ApplyMemoryLimit(config.Server{MemoryLimit: tc.limit}, func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.env
				}
				return ""
			})
			if got != tc.want {
				t.Errorf("limit in force %d, want %d", got, tc.want)
			}
		})
	}
}
