package ami_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/asterisk/ami"
	"github.com/callwire/callwire/translators/asterisk/ami/amitest"
)

// fixtureEvents names, for each fixture, an event the flow must contain.
var fixtureEvents = map[string]string{
	"ring-group.ami":        "DialEnd",
	"queue-abandon.ami":     "QueueCallerAbandon",
	"blind-transfer.ami":    "BlindTransfer",
	"attended-transfer.ami": "AttendedTransfer",
	"busy.ami":              "DialEnd",
	"no-answer.ami":         "DialEnd",
	"forward-outside.ami":   "DialEnd",
	// recorded from Asterisk 20 built here (see testdata/README.md)
	"asterisk-20-basic.ami":             "BridgeEnter",
	"asterisk-20-hold.ami":              "Hold",
	"asterisk-20-voicemail.ami":         "MessageWaiting",
	"asterisk-20-busy.ami":              "DialEnd",
	"asterisk-20-no-answer.ami":         "DialEnd",
	"asterisk-20-ring-group.ami":        "DialEnd",
	"asterisk-20-queue-abandon.ami":     "QueueCallerAbandon",
	"asterisk-20-outbound.ami":          "DialBegin",
	"asterisk-20-blind-transfer.ami":    "BlindTransfer",
	"asterisk-20-attended-transfer.ami": "AttendedTransfer",
}

func fixtureFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.ami")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	return files
}

// TestFixturesParse: every fixture is well-formed wire text (CRLF, a blank line after each
// event), every message an event with a Linkedid where it names a channel, and every fixture
// listed in the README.
func TestFixturesParse(t *testing.T) {
	readme, err := os.ReadFile("testdata/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range fixtureFiles(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(string(raw), "\n") != strings.Count(string(raw), "\r\n") {
				t.Error("a line does not end in CRLF")
			}
			if !strings.Contains(string(readme), "`"+name+"`") {
				t.Error("not named in testdata/README.md")
			}
			msgs, err := amitest.LoadFixture(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) == 0 {
				t.Fatal("empty")
			}
			var sawWanted bool
			for i, m := range msgs {
				if !m.IsEvent() {
					t.Fatalf("message %d is not an event: %v", i, m)
				}
				if _, ok := m.Lookup("Channel"); ok && m.Get("Linkedid") == "" {
					t.Errorf("message %d (%s) names a channel without a Linkedid", i, m.Event())
				}
				sawWanted = sawWanted || m.Event() == fixtureEvents[name]
			}
			if want := fixtureEvents[name]; want == "" {
				t.Errorf("no expected event listed for %s", name)
			} else if !sawWanted {
				t.Errorf("no %s event", want)
			}
		})
	}
}

// TestFixturesReplayOverTCP: a fixture replayed by amitest.Server arrives through Conn whole and
// in order.
func TestFixturesReplayOverTCP(t *testing.T) {
	for _, path := range fixtureFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			want, err := amitest.LoadFixture(path)
			if err != nil {
				t.Fatal(err)
			}
			srv := amitest.NewServer(t, amitest.Config{Username: testUser, Secret: testSecret, OnLogin: want})
			c := dial(t, srv, ami.Config{PingInterval: -1})
			login(t, c)
			for i, w := range want {
				got := recv(t, c)
				if !reflect.DeepEqual(got, w) {
					t.Fatalf("event %d:\n got %v\nwant %v", i, got, w)
				}
			}
			select {
			case m := <-c.Events():
				t.Fatalf("unexpected extra event %v", m)
			case <-time.After(20 * time.Millisecond):
			}
		})
	}
}
