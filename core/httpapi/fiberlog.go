package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	fiberlog "github.com/gofiber/fiber/v2/log"
)

// levelTrace is slog's level for Fiber's trace lines, below debug.
const levelTrace = slog.LevelDebug - 4

// FiberLogger writes the log lines of Fiber itself (an error handler that failed, a shutdown
// hook that failed) to a slog logger with the attribute component=fiber, so that they land in
// the server's structured log rather than as plain text on stderr. It implements Fiber's
// log.AllLogger: install it with Fiber's log.SetLogger, once, in main, since that logger is a
// process-wide setting of the library. Fatal lines are logged at error level and end the process
// with status 1, and Panic lines at error level before panicking, as Fiber's own logger does.
// It is safe for concurrent use.
type FiberLogger struct {
	fiberCommon
}

// NewFiberLogger returns a FiberLogger writing to log, every level included; it fails when log is
// nil.
func NewFiberLogger(log *slog.Logger) (*FiberLogger, error) {
	if log == nil {
		return nil, errors.New("httpapi: fiber logger: a slog logger is required")
	}
	min := &atomic.Int64{}
	min.Store(int64(fiberlog.LevelTrace))
	return &FiberLogger{fiberCommon: fiberCommon{log: log, min: min}}, nil
}

// SetLevel drops the lines below lv. The slog logger's own level applies too.
func (l *FiberLogger) SetLevel(lv fiberlog.Level) { l.min.Store(int64(lv)) }

// SetOutput does nothing: the lines go where the slog logger writes.
func (l *FiberLogger) SetOutput(io.Writer) {}

// WithContext returns a logger that passes ctx to the slog handler with each line.
func (l *FiberLogger) WithContext(ctx context.Context) fiberlog.CommonLogger {
	return &fiberCommon{log: l.log, min: l.min, ctx: ctx}
}

// fiberCommon implements Fiber's log.CommonLogger on a slog logger.
type fiberCommon struct {
	log *slog.Logger
	min *atomic.Int64   // the lowest fiberlog.Level written, shared with WithContext's loggers
	ctx context.Context // nil: slog's default
}

// write logs msg and the key-value pairs at Fiber's level lv, unless lv is filtered out.
func (c *fiberCommon) write(lv fiberlog.Level, msg func() string, kv ...any) {
	if int64(lv) < c.min.Load() {
		return
	}
	level := slogLevel(lv)
	if !c.log.Enabled(c.ctx, level) {
		return
	}
	c.log.Log(c.ctx, level, strings.TrimSpace(msg()), append([]any{"component", "fiber"}, kv...)...)
}

// finish ends the process or panics, after a Fatal or Panic line.
func (c *fiberCommon) finish(lv fiberlog.Level, msg func() string) {
	switch lv {
	case fiberlog.LevelFatal:
		os.Exit(1)
	case fiberlog.LevelPanic:
		panic(msg())
	}
}

func slogLevel(lv fiberlog.Level) slog.Level {
	switch lv {
	case fiberlog.LevelTrace:
		return levelTrace
	case fiberlog.LevelDebug:
		return slog.LevelDebug
	case fiberlog.LevelInfo:
		return slog.LevelInfo
	case fiberlog.LevelWarn:
		return slog.LevelWarn
	}
	return slog.LevelError // error, fatal, panic
}

func (c *fiberCommon) print(lv fiberlog.Level, v []any) {
	msg := func() string { return fmt.Sprint(v...) }
	c.write(lv, msg)
	c.finish(lv, msg)
}

func (c *fiberCommon) printf(lv fiberlog.Level, format string, v []any) {
	msg := func() string { return fmt.Sprintf(format, v...) }
	c.write(lv, msg)
	c.finish(lv, msg)
}

func (c *fiberCommon) printw(lv fiberlog.Level, m string, kv []any) {
	msg := func() string { return m }
	c.write(lv, msg, kv...)
	c.finish(lv, msg)
}

// Trace writes its arguments, joined as fmt.Sprint does, as a trace line (below debug).
func (c *fiberCommon) Trace(v ...any) { c.print(fiberlog.LevelTrace, v) }

// Debug writes its arguments, joined as fmt.Sprint does, as a debug line.
func (c *fiberCommon) Debug(v ...any) { c.print(fiberlog.LevelDebug, v) }

// Info writes its arguments, joined as fmt.Sprint does, as an info line.
func (c *fiberCommon) Info(v ...any) { c.print(fiberlog.LevelInfo, v) }

// Warn writes its arguments, joined as fmt.Sprint does, as a warning.
func (c *fiberCommon) Warn(v ...any) { c.print(fiberlog.LevelWarn, v) }

// Error writes its arguments, joined as fmt.Sprint does, as an error line.
func (c *fiberCommon) Error(v ...any) { c.print(fiberlog.LevelError, v) }

// Fatal writes its arguments, joined as fmt.Sprint does, as an error line, then ends the process with status 1.
func (c *fiberCommon) Fatal(v ...any) { c.print(fiberlog.LevelFatal, v) }

// Panic writes its arguments, joined as fmt.Sprint does, as an error line, then panics.
func (c *fiberCommon) Panic(v ...any) { c.print(fiberlog.LevelPanic, v) }

// Tracef writes the formatted line as a trace line (below debug).
func (c *fiberCommon) Tracef(f string, v ...any) { c.printf(fiberlog.LevelTrace, f, v) }

// Debugf writes the formatted line as a debug line.
func (c *fiberCommon) Debugf(f string, v ...any) { c.printf(fiberlog.LevelDebug, f, v) }

// Infof writes the formatted line as an info line.
func (c *fiberCommon) Infof(f string, v ...any) { c.printf(fiberlog.LevelInfo, f, v) }

// Warnf writes the formatted line as a warning.
func (c *fiberCommon) Warnf(f string, v ...any) { c.printf(fiberlog.LevelWarn, f, v) }

// Errorf writes the formatted line as an error line.
func (c *fiberCommon) Errorf(f string, v ...any) { c.printf(fiberlog.LevelError, f, v) }

// Fatalf writes the formatted line as an error line, then ends the process with status 1.
func (c *fiberCommon) Fatalf(f string, v ...any) { c.printf(fiberlog.LevelFatal, f, v) }

// Panicf writes the formatted line as an error line, then panics.
func (c *fiberCommon) Panicf(f string, v ...any) { c.printf(fiberlog.LevelPanic, f, v) }

// Tracew writes the message, with the key-value pairs as attributes, as a trace line (below debug).
func (c *fiberCommon) Tracew(m string, kv ...any) { c.printw(fiberlog.LevelTrace, m, kv) }

// Debugw writes the message, with the key-value pairs as attributes, as a debug line.
func (c *fiberCommon) Debugw(m string, kv ...any) { c.printw(fiberlog.LevelDebug, m, kv) }

// Infow writes the message, with the key-value pairs as attributes, as an info line.
func (c *fiberCommon) Infow(m string, kv ...any) { c.printw(fiberlog.LevelInfo, m, kv) }

// Warnw writes the message, with the key-value pairs as attributes, as a warning.
func (c *fiberCommon) Warnw(m string, kv ...any) { c.printw(fiberlog.LevelWarn, m, kv) }

// Errorw writes the message, with the key-value pairs as attributes, as an error line.
func (c *fiberCommon) Errorw(m string, kv ...any) { c.printw(fiberlog.LevelError, m, kv) }

// Fatalw writes the message, with the key-value pairs as attributes, as an error line, then ends the process with status 1.
func (c *fiberCommon) Fatalw(m string, kv ...any) { c.printw(fiberlog.LevelFatal, m, kv) }

// Panicw writes the message, with the key-value pairs as attributes, as an error line, then panics.
func (c *fiberCommon) Panicw(m string, kv ...any) { c.printw(fiberlog.LevelPanic, m, kv) }

var _ fiberlog.AllLogger = (*FiberLogger)(nil)
