package asterisk

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/asterisk/ami"
	"github.com/callwire/callwire/translators/asterisk/ami/amitest"
	"github.com/callwire/callwire/translators/numbering"
)

var update = flag.Bool("update", false, "rewrite the expected events of every fixture (testdata/golden/*.events.json)")

// testConfig is the configuration the fixtures are translated with: the recorded PBX's trunk
// (VoIPGRID's SIP/voipgrid-siproute-docker channels), the clinic number the queue's callers
// dialled, and its phones' extensions: the recordings' SIP accounts 150010001-3 call out as 201,
// 202 and 203 and are reached by dialling those numbers, so that is what the desk knows them by.
// The asterisk-20-* recordings add their trunk (SIP/carrier-) and the clinic numbers they were
// dialled on (0150010004-8); their phones are named by extension (SIP/201), so need no map.
const testConfig = `{
	"address": "127.0.0.1:5038",
	"username": "callwire",
	"secret": "s3cret-never-logged",
	"default_country": "NL",
	"numbers": ["+31150010004", "+31150010005", "+31150010006", "+31150010007", "+31150010008"],
	"locations": {"+31150010004": ["front-desk"]},
	"trunk_channels": ["SIP/voipgrid-", "PJSIP/carrier-", "SIP/carrier-"],
	"endpoint_extensions": {"150010001": "201", "SIP/150010002": "202", "sip/150010003": "203"}
}`

// epoch is the time of a fixture's first event: the Cacofonisk recordings carry no Timestamp,
// so the tests' clock starts here and moves 250 ms per event (the asterisk-20-* recordings carry
// Asterisk's Timestamp, which wins).
var epoch = time.Date(2018, 6, 25, 14, 23, 18, 0, time.UTC)

const step = 250 * time.Millisecond

func testTracker(t testing.TB) *Tracker {
	t.Helper()
	cfg, err := ParseConfig(json.RawMessage(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := numbering.New(cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTracker(TrackerConfig{Plan: plan, Provider: cfg.Provider, TrunkChannels: cfg.TrunkChannels,
		TrunkContexts: cfg.TrunkContexts, EndpointExtensions: cfg.EndpointExtensions})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// fixture names a stream of AMI events and what it must come out as.
type fixture struct {
	name, path string
}

func fixtures(t *testing.T) []fixture {
	t.Helper()
	var out []fixture
	for _, dir := range []string{"ami/testdata", "testdata/synthetic", "testdata/regress"} {
		paths, err := filepath.Glob(filepath.Join(dir, "*.ami"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			out = append(out, fixture{name: strings.TrimSuffix(filepath.Base(p), ".ami"), path: p})
		}
	}
	if len(out) < 8 {
		t.Fatalf("only %d fixtures found", len(out))
	}
	return out
}

func load(t testing.TB, path string) []ami.Message {
	t.Helper()
	msgs, err := amitest.LoadFixture(path)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// translate runs msgs through tr with the test clock.
func translate(tr *Tracker, msgs []ami.Message) []event.Event {
	var out []event.Event
	for i, m := range msgs {
		out = append(out, tr.Observe(m, epoch.Add(time.Duration(i)*step))...)
	}
	return out
}

func render(t testing.TB, evs []event.Event) []byte {
	t.Helper()
	b, err := json.MarshalIndent(evs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestFixtures translates every fixture and compares the events with the committed golden file;
// -update rewrites them. Every event must validate, and every call must end.
func TestFixtures(t *testing.T) {
	for _, fx := range fixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			tr := testTracker(t)
			got := translate(tr, load(t, fx.path))
			for i, e := range got {
				if err := e.Validate(); err != nil {
					t.Errorf("event %d (%s) does not validate: %v", i, e.Type, err)
				}
			}
			if n := tr.Stats().Active; n != 0 {
				t.Errorf("%d calls still in progress at the end of the stream: %v", n, tr.Active())
			}
			golden := filepath.Join("testdata", "golden", fx.name+".events.json")
			b := render(t, got)
			if *update {
				if err := os.WriteFile(golden, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if !bytes.Equal(b, want) {
				t.Errorf("events differ from %s (run with -update after checking):\n%s", golden, summary(got))
			}
		})
	}
}

// summary is one line per event, for failure messages.
func summary(evs []event.Event) string {
	var sb strings.Builder
	for _, e := range evs {
		sb.WriteString(string(e.Type) + " " + e.ProviderCallID + " " + e.ProviderEventID)
		if e.Disposition != "" {
			sb.WriteString(" " + string(e.Disposition))
		}
		if e.AnsweredBy != "" {
			sb.WriteString(" by " + e.AnsweredBy)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// TestHungUpIsBounded pins that the Tracker remembers only the last maxHungUp channels that hung
// up (to ignore their late events), however many calls it sees.
func TestHungUpIsBounded(t *testing.T) {
	tr := testTracker(t)
	for i := range maxHungUp + 10 {
		uid := fmt.Sprintf("1701000000.%d", i)
		tr.Observe(ch("Newchannel", "PJSIP/201-00000001", uid, uid, 0, "Context", "phones", "Exten", "202"), epoch)
		tr.Observe(ch("Hangup", "PJSIP/201-00000001", uid, uid, 0, "Cause", "16"), epoch)
	}
	if n, o := len(tr.hungUp), len(tr.hungUpOrder); n != maxHungUp || o != maxHungUp {
		t.Errorf("%d hung-up channels remembered (%d in order), want %d", n, o, maxHungUp)
	}
	if _, ok := tr.hungUp["1701000000.0"]; ok {
		t.Error("the oldest hung-up channel is still remembered")
	}
	// A late event of a remembered channel brings nothing back.
	last := fmt.Sprintf("1701000000.%d", maxHungUp+9)
	if evs := tr.Observe(ch("NewConnectedLine", "PJSIP/201-00000001", last, last, 0), epoch); len(evs) != 0 || tr.Stats().Active != 0 {
		t.Errorf("a late event of a hung-up channel gave %v and %d calls in progress", evs, tr.Stats().Active)
	}
}
