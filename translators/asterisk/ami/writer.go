package ami

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrInvalidField is wrapped by AppendMessage and Writer when a key is empty or holds a colon,
// CR or LF, or a value holds CR or LF: written out, such a field would end the message early or
// smuggle another field (or action) into the stream.
var ErrInvalidField = errors.New("invalid ami field")

// Action is a request to Asterisk: its name, the ActionID that ties the response to it, and
// its other fields in order (keys may repeat, e.g. Variable in Originate).
type Action struct {
	Name   string
	ID     string
	Fields []Field
}

// Message returns the action as a message: "Action", then "ActionID" when ID is set, then
// Fields.
func (a Action) Message() Message {
	m := Message{Fields: make([]Field, 0, len(a.Fields)+2)}
	m.Add("Action", a.Name)
	if a.ID != "" {
		m.Add("ActionID", a.ID)
	}
	m.Fields = append(m.Fields, a.Fields...)
	return m
}

// AppendMessage appends m in wire form ("Key: Value\r\n" per field, then "\r\n") to dst. On
// error (wrapping ErrInvalidField) dst is returned unchanged. An empty message is an error too:
// on the wire it would be nothing at all.
func AppendMessage(dst []byte, m Message) ([]byte, error) {
	if len(m.Fields) == 0 {
		return dst, fmt.Errorf("%w: empty message", ErrInvalidField)
	}
	for _, f := range m.Fields {
		if f.Key == "" || strings.ContainsAny(f.Key, ":\r\n") || f.Key != strings.TrimSpace(f.Key) {
			return dst, fmt.Errorf("%w: key %q", ErrInvalidField, clip(f.Key))
		}
		if strings.ContainsAny(f.Value, "\r\n") {
			return dst, fmt.Errorf("%w: value of %s holds a line end", ErrInvalidField, f.Key)
		}
	}
	for _, f := range m.Fields {
		dst = append(dst, f.Key...)
		dst = append(dst, ": "...)
		dst = append(dst, f.Value...)
		dst = append(dst, "\r\n"...)
	}
	return append(dst, "\r\n"...), nil
}

// Writer writes AMI messages to a byte stream, each one whole and flushed. It is not safe for
// concurrent use.
type Writer struct {
	w   *bufio.Writer
	buf []byte
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriter(w)}
}

// WriteBanner writes the banner line a manager server sends first, BannerPrefix and version.
func (w *Writer) WriteBanner(version string) error {
	if strings.ContainsAny(version, "\r\n") {
		return fmt.Errorf("%w: banner version holds a line end", ErrInvalidField)
	}
	if _, err := w.w.WriteString(BannerPrefix + version + "\r\n"); err != nil {
		return fmt.Errorf("write ami banner: %w", err)
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("write ami banner: %w", err)
	}
	return nil
}

// WriteMessage writes m (see AppendMessage) and flushes it. Nothing is written when m is
// invalid.
func (w *Writer) WriteMessage(m Message) error {
	b, err := AppendMessage(w.buf[:0], m)
	if err != nil {
		return err
	}
	w.buf = b
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("write ami message: %w", err)
	}
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("write ami message: %w", err)
	}
	return nil
}

// WriteAction writes a.Message().
func (w *Writer) WriteAction(a Action) error {
	return w.WriteMessage(a.Message())
}
