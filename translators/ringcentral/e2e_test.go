package ringcentral_test

// End to end with real processes: a real `callwire serve`, a real `callwire agent` running the
// built-in `ringcentral` translator against the fake RingCentral of the tests, and a kill -9 of
// the translator in the middle of a call.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/callwire/callwire/cmd/callwire/e2etest"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/ringcentral"
)

// TestKillTranslatorMidCall kills, with SIGKILL in the middle of a call, the translator (the
// agent starts it again) or the whole agent (started again by hand, as its service manager
// would): either way the core ends up with each of the call's events once, and the call ended
// answered.
func TestKillTranslatorMidCall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the callwire binary")
	}
	bin, err := e2etest.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, killAgent := range []bool{false, true} {
		name := "translator"
		if killAgent {
			name = "agent"
		}
		t.Run(name, func(t *testing.T) { killMidCall(t, bin, killAgent) })
	}
}

func killMidCall(t *testing.T, bin string, killAgent bool) {
	rc := ringcentral.NewFakeRC(t)
	core := e2etest.StartCore(t, bin)
	adir := t.TempDir()
	if err := os.WriteFile(filepath.Join(adir, "rc-secret"), []byte("client-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e2etest.AgentConfig(t, adir, core.URL(), core.ClientID, core.Secret, fmt.Sprintf(`  - name: rc
    builtin: ringcentral
    config:
      server: %s
      client_id: client-id
      client_secret_file: %s
      jwt: the-jwt
      cursor_file: %s
      poll_interval: 10s
      default_country: US
      numbers: ["+16505550100"]
`, rc.URL(), filepath.Join(adir, "rc-secret"), filepath.Join(adir, "rc.cursor")))
	agent := e2etest.StartAgent(t, bin, adir)
	st := core.OpenStore()
	const callID = "s-a0d7e4d8b7a7fz1885c9bd8e8ez0001"
	stored := func() []string {
		_, evs, err := st.GetCall(t.Context(), core.Org, "ringcentral", callID)
		if err != nil {
			return nil
		}
		var out []string
		for _, e := range evs {
			var ev event.Event
			if err := json.Unmarshal(e.Body, &ev); err != nil {
				t.Fatal(err)
			}
			out = append(out, string(ev.Type))
		}
		slices.Sort(out)
		return out
	}

	testwait.Until(t, 20*time.Second, "the subscription", func() bool { return rc.Subscriptions() >= 1 })
	rc.Push(t, "normal_call", 0, 3) // setup, proceeding, answered
	testwait.Until(t, 20*time.Second, "call_received and call_answered stored", func() bool { return len(stored()) == 2 })

	pids := agent.TranslatorPIDs()
	if killAgent {
		_ = agent.Proc.Stop(t, syscall.SIGKILL)
		// The translator, its child, goes with it (it watches its parent); the agent comes back
		// on the same configuration, outbox and cursor file.
		e2etest.NoProcess(t, bin+"\x00translator\x00")
		e2etest.StartAgent(t, bin, adir)
	} else if err := syscall.Kill(pids[len(pids)-1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 30*time.Second, "the translator restarted and resubscribed", func() bool { return rc.Subscriptions() >= 2 })
	// As the real gateway does, it sends only what happens after the new subscription: the
	// call's end. The new translator never saw the call begin, so it cannot tell from the end
	// alone whether anyone answered; the call log, polled every 10 s, says it was.
	start := time.Now().Add(-time.Minute)
	rc.AddCallLogRecord(callID, "Accepted", start, 40, time.Now())
	rc.Push(t, "normal_call", 3, 4)
	want := []string{"call_answered", "call_ended", "call_received"}
	testwait.Until(t, 40*time.Second, "call_ended stored", func() bool { return slices.Equal(stored(), want) })
	// Nothing twice: nothing can signal that a duplicate will never come, so the check waits a
	// while of real time for one to show, and looks again.
	time.Sleep(500 * time.Millisecond)
	if got := stored(); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v: nothing lost, nothing twice", got, want)
	}
	_, evs, err := st.GetCall(t.Context(), core.Org, "ringcentral", callID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		var ev event.Event
		if err := json.Unmarshal(e.Body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == event.CallEnded && ev.Disposition != event.DispositionAnswered {
			t.Errorf("call_ended %s, want answered: the call was answered before the restart", ev.Disposition)
		}
	}
}
