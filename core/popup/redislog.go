package popup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// RedisLogger writes the go-redis client's own log lines (a pool that cannot dial, a connection
// that failed to close) to a slog logger, at warn level with the attribute component=redis, so
// that they land in the server's structured log rather than as plain text on stderr. It
// implements the go-redis logging interface: install it with redis.SetLogger, once, in main,
// since that logger is a process-wide setting of the library. It is safe for concurrent use.
type RedisLogger struct {
	log *slog.Logger
}

// NewRedisLogger returns a RedisLogger writing to log; it fails when log is nil.
func NewRedisLogger(log *slog.Logger) (*RedisLogger, error) {
	if log == nil {
		return nil, errors.New("popup: redis logger: a slog logger is required")
	}
	return &RedisLogger{log: log}, nil
}

// Printf formats one go-redis log line and writes it as a warning. The client's "redis: "
// prefix and trailing newline are dropped: the component attribute says where it came from.
func (l *RedisLogger) Printf(ctx context.Context, format string, v ...any) {
	if !l.log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	msg = strings.TrimPrefix(msg, "redis: ")
	l.log.Log(ctx, slog.LevelWarn, msg, "component", "redis")
}
