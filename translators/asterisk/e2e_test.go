package asterisk_test

// End to end with real processes: a real `callwire serve` on the embedded store and a real
// `callwire agent` running the built-in asterisk translator against a test manager. The
// translator process is killed with SIGKILL in the middle of a call; the agent starts it
// again, it learns the call back from CoreShowChannels, and the core holds each of the call's
// events exactly once.

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/cmd/callwire/e2etest"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/asterisk/ami"
	"github.com/callwire/callwire/translators/asterisk/ami/amitest"
)

var callwireBin string

func TestMain(m *testing.M) { os.Exit(e2etest.Main(m, &callwireBin)) }

// upList answers CoreShowChannels with what the test says is up.
type upList struct {
	mu   sync.Mutex
	list []ami.Message
}

func (u *upList) handle(a ami.Message) ([]ami.Message, bool) {
	if !strings.EqualFold(a.Get("Action"), "CoreShowChannels") {
		return nil, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	id := a.ActionID()
	out := []ami.Message{ami.NewMessage("Response", "Success", "EventList", "start", "Message", "Channels will follow", "ActionID", id)}
	for _, m := range u.list {
		item := ami.NewMessage("Event", "CoreShowChannel")
		for _, k := range []string{"Channel", "ChannelState", "ChannelStateDesc", "CallerIDNum", "CallerIDName",
			"Context", "Exten", "Uniqueid", "Linkedid"} {
			item.Add(k, m.Get(k))
		}
		item.Add("Application", "Dial")
		item.Add("ActionID", id)
		out = append(out, item)
	}
	return append(out, ami.NewMessage("Event", "CoreShowChannelsComplete", "EventList", "Complete", "ActionID", id)), true
}

func TestEndToEndKillMidCall(t *testing.T) {
	msgs, err := amitest.LoadFixture("testdata/synthetic/hold.ami")
	if err != nil {
		t.Fatal(err)
	}
	var up upList
	srv := amitest.NewServer(t, amitest.Config{Username: "callwire", Secret: "s3cret", Handle: up.handle})
	core := e2etest.StartCore(t, callwireBin)
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/ami-secret", []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e2etest.AgentConfig(t, dir, core.URL(), core.ClientID, core.Secret, fmt.Sprintf(`  - name: pbx
    builtin: asterisk
    config:
      address: %q
      username: callwire
      secret_file: %q
      trunk_channels: ["PJSIP/carrier-"]
      numbers: ["+31150010004"]
      default_country: NL
      reconnect_min: 50ms
      reconnect_max: 200ms
`, srv.Addr(), dir+"/ami-secret"))
	agent := e2etest.StartAgent(t, callwireBin, dir)
	st := core.OpenStore()
	ctx := t.Context()
	stored := func() []string {
		_, evs, err := st.GetCall(ctx, core.Org, "asterisk", "1700000000.11")
		if err != nil {
			return nil
		}
		var out []string
		for _, e := range evs {
			var ev event.Event
			if err := json.Unmarshal(e.Body, &ev); err != nil {
				t.Fatalf("stored event: %v", err)
			}
			out = append(out, ev.ProviderEventID)
		}
		slices.Sort(out)
		return out
	}
	waitLogins := func(n int) {
		testwait.Until(t, 20*time.Second, fmt.Sprintf("login %d", n), func() bool {
			lists := 0
			for _, a := range srv.Answered() {
				if a.Get("Action") == "CoreShowChannels" {
					lists++
				}
			}
			// Answered, not only asked: what is emitted next follows the list on the connection.
			return srv.Logins() >= n && lists >= n
		})
	}
	waitLogins(1)
	cut := 0
	for i, m := range msgs {
		if m.Event() == "Hold" {
			cut = i
			break
		}
	}
	if err := srv.Emit(msgs[:cut]...); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 20*time.Second, "the ringing and the answer to be stored", func() bool { return len(stored()) == 2 })

	var last ami.Message
	var phone ami.Message
	for _, m := range msgs[:cut] {
		switch m.Get("Channel") {
		case "PJSIP/carrier-00000001":
			last = m
		case "PJSIP/201-00000002":
			phone = m
		}
	}
	up.mu.Lock()
	up.list = []ami.Message{last, phone}
	up.mu.Unlock()
	pids := agent.TranslatorPIDs()
	if err := syscall.Kill(pids[len(pids)-1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitLogins(2)
	if err := srv.Emit(msgs[cut:]...); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1700000000.11/answered/1700000000.12", "1700000000.11/call_received", "1700000000.11/ended",
		"1700000000.11/hold/1700000000.12/1", "1700000000.11/hold/1700000000.12/2",
		"1700000000.11/unhold/1700000000.12/1", "1700000000.11/unhold/1700000000.12/2",
	}
	testwait.Until(t, 20*time.Second, "the whole call to be stored, each event once", func() bool {
		return slices.Equal(stored(), want)
	})
	// Each event once: nothing can signal that a duplicate will never come, so the check waits
	// a while of real time for one to show, and looks again.
	time.Sleep(300 * time.Millisecond)
	if got := stored(); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}
