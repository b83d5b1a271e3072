// Package logging builds the slog logger of a callwire command (the server's, the agent's) from
// its log settings, so that every command logs alike.
package logging

import (
	"io"
	"log/slog"
	"os"
)

// New returns a logger writing to w at level, which is debug, info, warn or error (anything
// else is info), in format: "json", "text", or "auto" (also "") for text when w is a terminal
// and JSON otherwise. Anything else is JSON. Validating the settings is the configuration's job.
func New(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "auto" || format == "" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
