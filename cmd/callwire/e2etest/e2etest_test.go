package e2etest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/internal/testwait"
)

func TestLogBufferLines(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		lines  []string
	}{
		{"one write, one line", []string{"a\n"}, []string{"a"}},
		{"a line split across writes", []string{"ab", "c\nd", "e\n"}, []string{"abc", "de"}},
		{"several lines in one write", []string{"a\nb\n\nc\n"}, []string{"a", "b", "", "c"}},
		{"a partial last line is held back", []string{"a\nb"}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			b := &LogBuffer{OnLine: func(line string) { got = append(got, line) }}
			for _, w := range tt.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if !slices.Equal(got, tt.lines) {
				t.Errorf("lines %q, want %q", got, tt.lines)
			}
			if want := strings.Join(tt.writes, ""); b.String() != want {
				t.Errorf("String() = %q, want %q", b.String(), want)
			}
		})
	}
}

func TestLogBufferKeepsTheTail(t *testing.T) {
	var b LogBuffer // without OnLine
	fmt.Fprint(&b, strings.Repeat("x", 30000), "end\n")
	s := b.String()
	if !strings.HasPrefix(s, "…") || !strings.HasSuffix(s, "end\n") || len(s) != len("…")+20000 {
		t.Errorf("String() is %d bytes starting %q, want … and the last 20,000 bytes", len(s), s[:10])
	}
}

func TestMetric(t *testing.T) {
	const page = `# HELP callwire_agent_events_sent_total Events the core acknowledged.
# TYPE callwire_agent_events_sent_total counter
callwire_agent_events_sent_total{translator="csv"} 12
callwire_agent_events_sent_total{translator="sip"} 3.5
callwire_agent_events_sent_total_extra 100
callwire_agent_outbox_events 0
callwire_agent_events_queued 7
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, page)
	}))
	t.Cleanup(srv.Close)
	a := &Agent{metricsAddr: strings.TrimPrefix(srv.URL, "http://")}
	tests := []struct {
		name string
		want float64
	}{
		{"callwire_agent_events_sent_total", 15.5}, // labelled samples summed, a longer name not
		{"callwire_agent_outbox_events", 0},
		{"callwire_agent_events_queued", 7},
		{"callwire_agent_events", 0}, // a prefix of names is no name
		{"callwire_agent_absent", 0},
	}
	for _, tt := range tests {
		if got := a.Metric(t, tt.name); got != tt.want {
			t.Errorf("Metric(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestChild(t *testing.T) {
	dir := t.TempDir()
	log := &LogBuffer{}
	c := StartChild(t, dir, log, []string{"E2ETEST_GREETING=hello"}, "sh", "-c", `echo "$E2ETEST_GREETING from $HOME" >&2; exec sleep 3617`)
	testwait.Until(t, 10*time.Second, "the child to write its greeting", func() bool {
		return strings.Contains(log.String(), "hello from "+dir+"\n")
	})
	if err := c.Stop(t, syscall.SIGTERM); err == nil {
		t.Error("Stop of a child killed by SIGTERM returned nil, want its exit status")
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done is open after Stop returned")
	}
	c.Signal(syscall.SIGKILL) // after exit: no effect, no panic
	NoProcess(t, "sleep\x003617\x00")
}
