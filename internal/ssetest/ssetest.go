// Package ssetest reads a server-sent event stream (text/event-stream) for tests: each event
// with its id, name and data, and each comment line, as the server sent them.
package ssetest

import (
	"bufio"
	"io"
	"strings"
)

// Event is one server-sent event, or a comment line when Comment is set.
type Event struct {
	ID, Event, Data, Comment string
}

// Read parses the stream r into out, in the order received, until r ends or fails, then closes
// out. An event's data lines are joined by newlines; a blank line ends an event (one with neither
// a name nor data is not sent); fields other than id, event and data are skipped.
func Read(r io.Reader, out chan<- Event) {
	defer close(out)
	sc := bufio.NewScanner(r)
	var ev Event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Event != "" || len(data) > 0 {
				ev.Data = strings.Join(data, "\n")
				out <- ev
			}
			ev, data = Event{}, nil
		case strings.HasPrefix(line, ":"):
			out <- Event{Comment: strings.TrimSpace(line[1:])}
		default:
			field, val, _ := strings.Cut(line, ":")
			val = strings.TrimPrefix(val, " ")
			switch field {
			case "id":
				ev.ID = val
			case "event":
				ev.Event = val
			case "data":
				data = append(data, val)
			}
		}
	}
}
