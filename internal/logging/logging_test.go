package logging

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		level, format string
		wantJSON      bool
		enabled       slog.Level // the lowest level that is logged
	}{
		{"info", "json", true, slog.LevelInfo},
		{"debug", "text", false, slog.LevelDebug},
		{"warn", "auto", true, slog.LevelWarn}, // a buffer is not a terminal
		{"error", "", true, slog.LevelError},
		{"loud", "json", true, slog.LevelInfo},
	} {
		var b bytes.Buffer
		log := New(&b, tc.level, tc.format)
		if !log.Enabled(context.Background(), tc.enabled) || log.Enabled(context.Background(), tc.enabled-1) {
			t.Errorf("%s: the lowest level logged is not %v", tc.level, tc.enabled)
		}
		log.Error("hello", "k", "v")
		if got := strings.HasPrefix(b.String(), "{"); got != tc.wantJSON {
			t.Errorf("%s/%s: JSON %v, want %v: %s", tc.level, tc.format, got, tc.wantJSON, b.String())
		}
	}
}

func TestAutoOnAFileIsJSON(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	New(f, "info", "auto").Info("hello")
	b, err := os.ReadFile(f.Name())
	if err != nil || !strings.HasPrefix(string(b), "{") {
		t.Errorf("auto on a regular file: %q %v", b, err)
	}
}
