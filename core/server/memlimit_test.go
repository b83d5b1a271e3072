package server_test

import (
	"math"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/sqlite"
)

// TestApplyMemoryLimit: the configured limit is applied, less the embedded store's page caches
// (but never below half of it), 0 leaves none, and GOMEMLIMIT wins.
func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	lite, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "callwire.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	budget := lite.CacheBudget()
	if budget < 6<<20 {
		// The writer's and at least four readers' page caches, at what they take in memory.
		t.Fatalf("CacheBudget() = %d, want at least 6 MiB", budget)
	}

	for _, tc := range []struct {
		name  string
		limit int64
		st    store.Store
		env   string
		want  int64
	}{
		{"configured", 32 << 20, nil, "", 32 << 20},
		{"the embedded store's caches come off", 64 << 20, lite, "", 64<<20 - budget},
		{"but not past half", 8 << 20, lite, "", 4 << 20},
		{"none", 0, nil, "", math.MaxInt64},
		{"none with the embedded store", 0, lite, "", math.MaxInt64},
		{"the variable wins", 32 << 20, lite, "48MiB", math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64) // as the runtime starts without GOMEMLIMIT
			got := server.ApplyMemoryLimit(config.Server{MemoryLimit: tc.limit}, tc.st, func(k string) string {
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
