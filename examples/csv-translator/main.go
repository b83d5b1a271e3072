// Command csv-translator is an example callwire translator: it tails a CSV call log, one line per
// moment of a call, and emits each line as a canonical event. Build it as
// callwire-translator-csv and load it from agent.yaml by path; see README.md beside it and
// docs/writing-a-translator.md.
//
// The columns are time (RFC 3339), call_id, type, direction, from, to, sequence and an optional
// detail, whose meaning depends on the type: the answering extension (call_answered), the
// disposition (call_ended), the party transferred to (call_transferred), the recording's URL
// (call_recorded) or the transcript (call_transcribed). A party is an E.164 number (+44…), an
// extension, "anonymous", or empty. A line starting with "time," is a header and skipped.
//
// It records in a state file how far it has read, after each line the agent took, so that a
// restarted translator goes on where it stopped. A malformed line is logged and skipped.
package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
)

// config is the translator's block in agent.yaml.
type config struct {
	Path     string `json:"path"`     // the CSV call log; required
	State    string `json:"state"`    // the read position; default <path>.state
	Provider string `json:"provider"` // the provider calls are filed under; default "csvlog"
	Poll     string `json:"poll"`     // how often to look for new lines; default 500ms
}

// csvLog tails one call log; path is the log being read, for Health.
type csvLog struct {
	path atomic.Pointer[string]
}

// Health tells the agent whether the call log can be read (translator.HealthChecker).
func (t *csvLog) Health(context.Context) error {
	if p := t.path.Load(); p != nil {
		if _, err := os.Stat(*p); err != nil {
			return fmt.Errorf("the call log: %w", err)
		}
	}
	return nil
}

// Run tails the call log until the agent stops the translator (translator.Translator).
func (t *csvLog) Run(ctx context.Context, raw json.RawMessage, out translator.Emitter) error {
	cfg := config{Provider: "csvlog", Poll: "500ms"}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	poll, err := time.ParseDuration(cfg.Poll)
	if cfg.Path == "" || err != nil || poll <= 0 {
		return fmt.Errorf("config: path is required and poll must be a positive duration (%q)", cfg.Poll)
	}
	if cfg.State == "" {
		cfg.State = cfg.Path + ".state"
	}
	t.path.Store(&cfg.Path)
	offset := readOffset(cfg.State)
	slog.Info("tailing the call log", "path", cfg.Path, "offset", offset)
	for {
		if offset, err = follow(ctx, cfg, offset, poll, out); err != nil {
			if ctx.Err() != nil {
				return nil // the agent asked us to stop
			}
			return err // the agent restarts us; we resume at offset
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// follow emits every complete line after offset and returns the offset after the last line the
// agent took. A line counts as read only once Emit returned nil.
func follow(ctx context.Context, cfg config, offset int64, poll time.Duration, out translator.Emitter) (int64, error) {
	f, err := os.Open(cfg.Path)
	if err != nil {
		return offset, nil // not there yet: look again later
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() < offset {
		slog.Warn("the call log shrank; reading it from the start", "size", fi.Size(), "offset", offset)
		offset = 0
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset, fmt.Errorf("seek %s: %w", cfg.Path, err)
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil { // EOF: a partial line stays for the next look
			return offset, nil
		}
		if e, ok := toEvent(line, cfg.Provider, offset); ok {
			if err := emit(ctx, out, e, poll); err != nil {
				return offset, err
			}
		}
		offset += int64(len(line))
		if err := saveOffset(cfg.State, offset); err != nil {
			return offset, err
		}
	}
}

// emit hands e to the agent, waiting while its outbox is full. It returns nil once the agent took
// e, or refused it as invalid (logged: retrying cannot help).
func emit(ctx context.Context, out translator.Emitter, e event.Event, poll time.Duration) error {
	for {
		err := out.Emit(ctx, e)
		var refused *translator.RefusedError
		switch _, invalid := event.AsValidationError(err); {
		case err == nil:
			return nil
		case invalid:
			slog.Warn("the agent refused an event as invalid; skipping it", "call", e.ProviderCallID, "error", err)
			return nil
		case !errors.As(err, &refused) || ctx.Err() != nil:
			return fmt.Errorf("emit: %w", err) // the agent is gone or stopping
		}
		slog.Warn("the agent cannot take the event yet; trying again", "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("emit: %w", ctx.Err())
		case <-time.After(poll):
		}
	}
}

// toEvent turns one line into an event; ok is false for a header, a blank or a malformed line.
func toEvent(line, provider string, offset int64) (event.Event, bool) {
	line = strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "time,") {
		return event.Event{}, false
	}
	e, err := parseLine(line, provider)
	if err != nil {
		slog.Warn("skipping a malformed line", "offset", offset, "error", err, "line", line)
		return event.Event{}, false
	}
	return e, true
}

// parseLine parses one CSV line into a validated event.
func parseLine(line, provider string) (event.Event, error) {
	r := csv.NewReader(strings.NewReader(line))
	r.FieldsPerRecord = -1
	f, err := r.Read()
	if err != nil {
		return event.Event{}, fmt.Errorf("not CSV: %w", err)
	}
	if len(f) < 7 || len(f) > 8 {
		return event.Event{}, fmt.Errorf("want 7 or 8 columns, got %d", len(f))
	}
	f = append(f, "")
	at, err := time.Parse(time.RFC3339Nano, f[0])
	if err != nil {
		return event.Event{}, fmt.Errorf("time: %w", err)
	}
	seq, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil {
		return event.Event{}, fmt.Errorf("sequence: %w", err)
	}
	e := event.New(event.Type(f[2]), f[1], at, event.Call{Direction: event.Direction(f[3]), From: party(f[4]), To: party(f[5])})
	e.Provider, e.Sequence, e.Observer = provider, seq, event.ObserverPBXAPI
	e.Raw, _ = json.Marshal(map[string]string{"csv": line})
	switch detail := f[7]; e.Type {
	case event.CallAnswered:
		e.AnsweredBy = detail
	case event.CallEnded:
		e.Disposition = event.Disposition(detail)
	case event.CallTransferred:
		e.TransferTo = party(detail)
	case event.CallRecorded:
		e.URL = detail
	case event.CallTranscribed:
		e.Text = detail
	}
	if err := e.Validate(); err != nil {
		return event.Event{}, err
	}
	return e, nil
}

// party reads a party column: an E.164 number, "anonymous", an extension, or empty for none.
func party(s string) *event.Party {
	switch {
	case s == "":
		return nil
	case s == "anonymous":
		return event.Anonymous()
	case strings.HasPrefix(s, "+"):
		return event.E164(s)
	}
	return event.Extension(s)
}

// readOffset returns the position saved in the state file, 0 when there is none.
func readOffset(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		slog.Warn("ignoring an unreadable state file; reading the log from the start", "path", path)
		return 0
	}
	return n
}

// saveOffset replaces the state file in one step, so that a crash leaves the old position or the
// new one, never half of one.
func saveOffset(path string, offset int64) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(offset, 10)), 0o600); err != nil {
		return fmt.Errorf("save the read position: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save the read position: %w", err)
	}
	return nil
}

func main() { translator.Serve(&csvLog{}) }
