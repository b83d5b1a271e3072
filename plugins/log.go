package plugins

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
)

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// hostLogger is the hclog.Logger go-plugin is given on the host side. It writes into the agent's
// *slog.Logger, which already carries the translator's name. The lines a translator logs arrive
// through a Named logger, with go-plugin's copy of the line's timestamp as the last attribute;
// that copy is dropped, the agent's own record already has the time.
type hostLogger struct {
	ctx   context.Context
	l     *slog.Logger
	name  string
	args  []any
	level hclog.Level // NoLevel: follow the slog handler
}

func newHostLogger(ctx context.Context, l *slog.Logger) *hostLogger {
	return &hostLogger{ctx: ctx, l: l}
}

func (h *hostLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || level == hclog.NoLevel {
		level = hclog.Info
	}
	if h.level != hclog.NoLevel && level < h.level {
		return
	}
	if h.name != "" && len(args) >= 2 && args[len(args)-2] == "timestamp" {
		args = args[:len(args)-2]
	}
	if len(h.args) > 0 {
		args = append(append([]any{}, h.args...), args...)
	}
	h.l.Log(h.ctx, slogLevel(level), msg, args...)
}

func (h *hostLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hostLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hostLogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hostLogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hostLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hostLogger) enabled(level hclog.Level) bool {
	if h.level != hclog.NoLevel && level < h.level {
		return false
	}
	return h.l.Enabled(h.ctx, slogLevel(level))
}

func (h *hostLogger) IsTrace() bool { return h.enabled(hclog.Trace) }
func (h *hostLogger) IsDebug() bool { return h.enabled(hclog.Debug) }
func (h *hostLogger) IsInfo() bool  { return h.enabled(hclog.Info) }
func (h *hostLogger) IsWarn() bool  { return h.enabled(hclog.Warn) }
func (h *hostLogger) IsError() bool { return h.enabled(hclog.Error) }

func (h *hostLogger) ImpliedArgs() []any { return h.args }

func (h *hostLogger) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any{}, h.args...), args...)
	return &c
}

func (h *hostLogger) Name() string { return h.name }

func (h *hostLogger) Named(name string) hclog.Logger {
	c := *h
	if c.name == "" {
		c.name = name
	} else {
		c.name += "." + name
	}
	return &c
}

func (h *hostLogger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	return &c
}

func (h *hostLogger) SetLevel(level hclog.Level) { h.level = level }

// GetLevel reports the lowest level that would be logged, so that go-plugin skips parsing lines
// the agent would drop.
func (h *hostLogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (h *hostLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hostLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &lineWriter{line: func(s string) { h.Info(s) }}
}

// lineWriter calls line for each complete line written to it, without the newline.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(string(bytes.TrimRight(w.buf[:i], "\r")))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 64<<10 { // a very long line without a newline: pass it on in pieces
		w.line(string(w.buf))
		w.buf = nil
	}
	return len(p), nil
}
