package translator

import (
	"io"
	"log/slog"
)

// hclogTimeFormat is the timestamp layout go-plugin's host expects in a forwarded log line.
const hclogTimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// newPluginLogHandler returns the slog handler of a translator process: JSON lines in the shape
// go-plugin's host parses (@level, @message, @timestamp, then the attributes), so that each line
// reaches the agent's log at its own level with its attributes intact.
func newPluginLogHandler(w io.Writer) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug - 4,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				if a.Value.Kind() == slog.KindTime {
					return slog.String("@timestamp", a.Value.Time().Format(hclogTimeFormat))
				}
			case slog.LevelKey:
				if l, ok := a.Value.Any().(slog.Level); ok {
					return slog.String("@level", hclogLevelName(l))
				}
			case slog.MessageKey:
				if a.Value.Kind() == slog.KindString {
					return slog.String("@message", a.Value.String())
				}
			}
			return a
		},
	})
}

func hclogLevelName(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "trace"
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}
