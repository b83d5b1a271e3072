package sqlite

import (
	"path/filepath"
	"runtime"
	"testing"
)

// TestReaderCache: the readers share 2 MiB of page cache, each at least 256 KiB.
func TestReaderCache(t *testing.T) {
	for _, tc := range []struct {
		readers int
		want    int64
	}{
		{4, 512},
		{8, 256},
		{16, 256},
		{32, 256},
	} {
		if got := readerCacheKiB(tc.readers); got != tc.want {
			t.Errorf("readerCacheKiB(%d) = %d, want %d", tc.readers, got, tc.want)
		}
	}
}

// TestCacheBudget: with up to 8 readers (one per core, at least four) the writer's and the
// readers' page caches take 6 MiB.
func TestCacheBudget(t *testing.T) {
	if n := runtime.GOMAXPROCS(0); n > 8 {
		t.Skipf("SKIP: %d cores give %d readers, past the 8 whose caches stay at 6 MiB", n, n)
	}
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "callwire.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.CacheBudget(); got != 6<<20 {
		t.Errorf("CacheBudget() = %d, want %d", got, 6<<20)
	}
}
