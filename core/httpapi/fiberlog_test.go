package httpapi_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	fiberlog "github.com/gofiber/fiber/v2/log"

	"github.com/callwire/callwire/core/httpapi"
)

func TestFiberLogger(t *testing.T) {
	tests := []struct {
		name      string
		slogLevel slog.Level     // the slog handler's level
		setLevel  fiberlog.Level // the Fiber logger's level
		log       func(l fiberlog.AllLogger)
		want      map[string]any // the record's fields; nil when nothing is logged
	}{
		{"errorf, as Fiber's error handler failure", slog.LevelInfo, fiberlog.LevelTrace,
			func(l fiberlog.AllLogger) { l.Errorf("serverErrorHandler: failed to call ErrorHandler: %v", "boom") },
			map[string]any{"level": "ERROR", "msg": "serverErrorHandler: failed to call ErrorHandler: boom"}},
		{"warn joins its arguments", slog.LevelInfo, fiberlog.LevelTrace,
			func(l fiberlog.AllLogger) { l.Warn("Prefork isn't supported", " for custom listeners.") },
			map[string]any{"level": "WARN", "msg": "Prefork isn't supported for custom listeners."}},
		{"infow keeps the pairs", slog.LevelInfo, fiberlog.LevelTrace,
			func(l fiberlog.AllLogger) { l.Infow("listening", "addr", ":8080") },
			map[string]any{"level": "INFO", "msg": "listening", "addr": ":8080"}},
		{"with a context", slog.LevelInfo, fiberlog.LevelTrace,
			func(l fiberlog.AllLogger) { l.WithContext(t.Context()).Warnf("hook %d failed", 2) },
			map[string]any{"level": "WARN", "msg": "hook 2 failed"}},
		{"debug below the slog level", slog.LevelInfo, fiberlog.LevelTrace,
			func(l fiberlog.AllLogger) { l.Debug("noise") }, nil},
		{"trace below debug", slog.LevelDebug, fiberlog.LevelTrace,
			func(l fiberlog.AllLogger) { l.Trace("noise") }, nil},
		{"warn below the Fiber level", slog.LevelInfo, fiberlog.LevelError,
			func(l fiberlog.AllLogger) { l.Warn("noise") }, nil},
		{"Fiber level shared with context loggers", slog.LevelInfo, fiberlog.LevelError,
			func(l fiberlog.AllLogger) { l.WithContext(t.Context()).Warn("noise") }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			l, err := httpapi.NewFiberLogger(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tt.slogLevel})))
			if err != nil {
				t.Fatal(err)
			}
			l.SetLevel(tt.setLevel)
			tt.log(l)
			if tt.want == nil {
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
			if rec["component"] != "fiber" {
				t.Errorf("component %v, want fiber: %s", rec["component"], lines[0])
			}
			for k, v := range tt.want {
				if rec[k] != v {
					t.Errorf("%s = %v, want %v: %s", k, rec[k], v, lines[0])
				}
			}
		})
	}
	t.Run("panic", func(t *testing.T) {
		var buf bytes.Buffer
		l, err := httpapi.NewFiberLogger(slog.New(slog.NewJSONHandler(&buf, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if r := recover(); r != "bad state" {
				t.Errorf("recovered %v, want the message", r)
			}
			if !strings.Contains(buf.String(), `"level":"ERROR","msg":"bad state"`) {
				t.Errorf("panic not logged first: %s", buf.String())
			}
		}()
		l.Panicf("bad %s", "state")
	})
	if _, err := httpapi.NewFiberLogger(nil); err == nil {
		t.Error("NewFiberLogger(nil) succeeded")
	}
}
