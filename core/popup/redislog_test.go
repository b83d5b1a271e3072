package popup_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/callwire/callwire/core/popup"
)

func TestRedisLogger(t *testing.T) {
	tests := []struct {
		name    string
		level   slog.Level
		format  string
		args    []any
		wantMsg string // "" when nothing is logged
	}{
		{"pool dial failure", slog.LevelInfo, "redis: connection pool: failed to dial after %d attempts: %v",
			[]any{5, "dial tcp 127.0.0.1:1: connect: connection refused"},
			"connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:1: connect: connection refused"},
		{"no prefix, trailing newline", slog.LevelInfo, "pubsub: reconnecting to %s\n", []any{"10.0.0.1:6379"},
			"pubsub: reconnecting to 10.0.0.1:6379"},
		{"warn level kept", slog.LevelWarn, "redis: failed to close connection: %v", []any{"boom"},
			"failed to close connection: boom"},
		{"filtered by the logger's level", slog.LevelError, "redis: failed to close connection: %v", []any{"boom"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := popup.NewRedisLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tt.level})))
			if err != nil {
				t.Fatal(err)
			}
			l.Printf(t.Context(), tt.format, tt.args...)
			if tt.wantMsg == "" {
				if buf.Len() != 0 {
					t.Errorf("logged %s, want nothing", buf.String())
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("%d lines, want 1: %s", len(lines), buf.String())
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
				t.Fatalf("not JSON: %v: %s", err, lines[0])
			}
			if rec["level"] != "WARN" || rec["component"] != "redis" || rec["msg"] != tt.wantMsg {
				t.Errorf("record %v, want level WARN, component redis, msg %q", rec, tt.wantMsg)
			}
		})
	}
	if _, err := popup.NewRedisLogger(nil); err == nil {
		t.Error("NewRedisLogger(nil) succeeded")
	}
	// go-redis accepts it as its logger (this test does not install it: that is main's to do).
	_ = func(l *popup.RedisLogger) { redis.SetLogger(l) }
}
