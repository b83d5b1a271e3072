package ami

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// BannerPrefix starts the line Asterisk sends when a manager client connects, followed by the
// protocol version ("Asterisk Call Manager/7.0.3").
const BannerPrefix = "Asterisk Call Manager/"

// Default limits of a Reader; see Limits.
const (
	DefaultMaxLineBytes    = 64 << 10
	DefaultMaxMessageBytes = 1 << 20
)

// endCommand ends the output of a "Response: Follows" message (the Command action before
// Asterisk 14).
const endCommand = "--END COMMAND--"

var (
	// ErrLineTooLong is wrapped by Reader when a line is longer than Limits.MaxLineBytes. The
	// stream cannot be resynchronised: every later read returns the same error.
	ErrLineTooLong = errors.New("ami line too long")
	// ErrMessageTooLarge is wrapped by Reader when a message is larger than
	// Limits.MaxMessageBytes. Every later read returns the same error.
	ErrMessageTooLarge = errors.New("ami message too large")
	// ErrBanner is wrapped by ReadBanner when the first line is not an Asterisk manager banner.
	ErrBanner = errors.New("not an asterisk manager banner")
)

// SyntaxError is returned by ReadMessage for a message with a line that is not "Key: Value"
// (no colon, or an empty key). The reader has consumed the whole message, so the next
// ReadMessage starts at the next one.
type SyntaxError struct {
	// Line is the offending line (at most 80 bytes of it).
	Line string
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("ami line without a key: %q", e.Line)
}

// Limits bound what a Reader accepts, so a broken or hostile peer cannot make it buffer without
// end. A zero field takes its default.
type Limits struct {
	// MaxLineBytes is the longest line, without its line end (default DefaultMaxLineBytes).
	MaxLineBytes int
	// MaxMessageBytes is the largest message, line ends included (default
	// DefaultMaxMessageBytes).
	MaxMessageBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = DefaultMaxLineBytes
	}
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return l
}

// Reader reads AMI messages from a byte stream. Lines may end in CRLF (what Asterisk sends) or a
// bare LF. Empty lines between messages are skipped. A Reader is not safe for concurrent use.
//
// The output of a "Response: Follows" message (Command before Asterisk 14: raw lines up to a
// line ending in "--END COMMAND--", blank lines included) is returned as one "Output" field per
// line, the shape Asterisk 14 and later send themselves, so GetAll("Output") reads both.
type Reader struct {
	br     *bufio.Reader
	limits Limits
	err    error // sticky: a limit was crossed or the stream failed
}

// NewReader returns a Reader of r with the default limits.
func NewReader(r io.Reader) *Reader {
	return NewReaderLimits(r, Limits{})
}

// NewReaderLimits returns a Reader of r with the given limits (zero fields take their default).
func NewReaderLimits(r io.Reader, l Limits) *Reader {
	l = l.withDefaults()
	return &Reader{br: bufio.NewReaderSize(r, l.MaxLineBytes+2), limits: l}
}

// ReadBanner reads the first line of a manager session and returns the protocol version after
// BannerPrefix. Any other line is an error wrapping ErrBanner.
func (r *Reader) ReadBanner() (string, error) {
	if r.err != nil {
		return "", r.err
	}
	line, err := r.readLine()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", r.fail(fmt.Errorf("read banner: %w", err))
	}
	if !strings.HasPrefix(line, BannerPrefix) {
		return "", r.fail(fmt.Errorf("%w: %q", ErrBanner, clip(line)))
	}
	return strings.TrimSpace(strings.TrimPrefix(line, BannerPrefix)), nil
}

// ReadMessage reads the next message. It returns io.EOF when the stream ends between messages
// and io.ErrUnexpectedEOF when it ends inside one. A *SyntaxError leaves the Reader usable; any
// other error is returned again by every later call.
func (r *Reader) ReadMessage() (Message, error) {
	if r.err != nil {
		return Message{}, r.err
	}
	var (
		m        Message
		size     int
		follows  bool // inside the output of "Response: Follows"
		output   bool // at least one output line seen
		badLine  string
		sawLine  bool
		finished bool
	)
	for !finished {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && sawLine {
				err = io.ErrUnexpectedEOF
			}
			return Message{}, r.fail(err)
		}
		if !sawLine && line == "" {
			continue // blank lines between messages
		}
		sawLine = true
		size += len(line) + 2
		if size > r.limits.MaxMessageBytes {
			return Message{}, r.fail(fmt.Errorf("%w: over %d bytes", ErrMessageTooLarge, r.limits.MaxMessageBytes))
		}
		switch {
		case follows:
			if !output {
				if k, v, ok := splitField(line); ok && (strings.EqualFold(k, "ActionID") || strings.EqualFold(k, "Privilege")) {
					m.Add(k, v)
					continue
				}
			}
			output = true
			if rest, ok := strings.CutSuffix(line, endCommand); ok {
				if rest = strings.TrimRight(rest, "\r\n"); rest != "" {
					m.Add("Output", rest)
				}
				follows = false
				continue
			}
			m.Add("Output", line)
		case line == "":
			finished = true
		default:
			k, v, ok := splitField(line)
			if !ok {
				if badLine == "" {
					badLine = clip(line)
				}
				continue
			}
			m.Add(k, v)
			if strings.EqualFold(k, "Response") && strings.EqualFold(v, "Follows") {
				follows = true
			}
		}
	}
	if badLine != "" {
		return Message{}, &SyntaxError{Line: badLine}
	}
	return m, nil
}

// readLine returns the next line without its line end. A last line without a line end is an
// io.ErrUnexpectedEOF when not empty.
func (r *Reader) readLine() (string, error) {
	b, err := r.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return "", fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.limits.MaxLineBytes)
	case err == io.EOF && len(b) > 0:
		return "", io.ErrUnexpectedEOF
	case err != nil:
		return "", err
	}
	b = b[:len(b)-1]
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	if len(b) > r.limits.MaxLineBytes {
		return "", fmt.Errorf("%w: over %d bytes", ErrLineTooLong, r.limits.MaxLineBytes)
	}
	return string(b), nil
}

func (r *Reader) fail(err error) error {
	r.err = err
	return err
}

// splitField splits "Key: Value" at the first colon; spaces and tabs around the colon are not
// part of the key or the value. ok is false for a line without a colon or with an empty key.
func splitField(line string) (key, value string, ok bool) {
	k, v, found := strings.Cut(line, ":")
	if !found {
		return "", "", false
	}
	k = strings.TrimRight(k, " \t")
	if k == "" {
		return "", "", false
	}
	return k, strings.TrimLeft(v, " \t"), true
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
