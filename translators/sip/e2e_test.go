package sip_test

// End-to-end tests of the SIP observer with real processes: a real `callwire serve` on the
// embedded store, a real `callwire agent` running the built-in `sip` translator six times (three
// proxies, three taps), sipp playing the carrier trunk and the PBX, and real Kamailio proxies
// mirroring HEPv3 to the taps. Every flow of testdata/sipp runs through a proxy and through
// Kamailio into a tap, and the events that land at the core are compared with the events the
// flow's committed capture yields (testdata/captures/<flow>.events.json).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/cmd/callwire/e2etest"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/testwait"
	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/sip/internal/siptest"
)

var callwireBin string

func TestMain(m *testing.M) { os.Exit(e2etest.Main(m, &callwireBin)) }

// lane is one `sip` translator of the agent under test, with ports of its own: a proxy (or a
// tap fed by Kamailio) between a trunk port and a PBX port. A lane runs its flows one at a time;
// lanes run side by side.
type lane struct {
	name             string
	mode             string // "proxy" or "hep"
	listen, pbx, trk int
}

func (l lane) yaml() string {
	trunk := ""
	if l.mode == "proxy" {
		trunk = fmt.Sprintf("\n      trunk: \"127.0.0.1:%d\"", l.trk)
	}
	return fmt.Sprintf(`  - name: %s
    builtin: sip
    config:
      mode: %s
      listen: ["udp://127.0.0.1:%d", "tcp://127.0.0.1:%[3]d"]
      pbx: "127.0.0.1:%d"%s
      numbers: ["+15551230100"]
      default_country: US
      locations: {"+15551230100": ["front-desk"]}
      ring_timeout: 10s
      call_timeout: 3s
      grace: 2s
`, l.name, l.mode, l.listen, l.pbx, trunk)
}

// rig is a core and an agent running one translator per lane.
type rig struct {
	core  *e2etest.Core
	agent *e2etest.Agent
	st    store.Store
	lanes []lane
	ports *siptest.Ports
}

// startRig starts a core and an agent with one translator per lane, taking the ports a lane
// leaves at zero from [first, first+999].
func startRig(t *testing.T, first int, lanes ...lane) *rig {
	t.Helper()
	ports, err := siptest.NewPorts(first, first+999)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{core: e2etest.StartCore(t, callwireBin), ports: ports}
	var yaml strings.Builder
	for i, l := range lanes {
		l.name = fmt.Sprintf("%s%d", l.mode, i)
		for _, p := range []*int{&l.listen, &l.pbx, &l.trk} {
			if *p == 0 {
				*p = ports.Take(t)
			}
		}
		r.lanes = append(r.lanes, l)
		yaml.WriteString(l.yaml())
	}
	modes := lanes
	dir := t.TempDir()
	e2etest.AgentConfig(t, dir, r.core.URL(), r.core.ClientID, r.core.Secret, yaml.String())
	r.agent = e2etest.StartAgent(t, callwireBin, dir)
	testwait.Until(t, 20*time.Second, "every translator to start", func() bool { return len(r.agent.TranslatorPIDs()) >= len(modes) })
	r.st = r.core.OpenStore()
	for _, l := range r.lanes {
		testwait.Until(t, 10*time.Second, fmt.Sprintf("lane %s to listen on %d", l.name, l.listen), func() bool {
			return siptest.Listening(siptest.UDP, l.listen) && siptest.Listening(siptest.TCP, l.listen)
		})
	}
	return r
}

// events returns the stored events of the call filed under callID, in sequence order.
func (r *rig) events(t *testing.T, callID string) []event.Event {
	t.Helper()
	_, evs, err := r.st.GetCall(t.Context(), r.core.Org, "sip", callID)
	if err != nil {
		return nil
	}
	out := make([]event.Event, 0, len(evs))
	for _, e := range evs {
		var ev event.Event
		if err := json.Unmarshal(e.Body, &ev); err != nil {
			t.Fatalf("stored event %s: %v", e.ID, err)
		}
		out = append(out, ev)
	}
	slices.SortStableFunc(out, func(a, b event.Event) int { return int(a.Sequence - b.Sequence) })
	return out
}

// expected returns the summary lines of the events a flow's committed capture yields.
func expected(t *testing.T, f siptest.Flow) []string {
	t.Helper()
	return lines(readEvents(t, f))
}

func lines(evs []event.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, summaryLine(e))
	}
	return out
}

// runFlow runs flow f once through lane l, with Call-IDs <lane>-<flow>-<n>@e2e.test, and
// checks that what lands at the core is what the flow's capture yields (with want's edits).
func (r *rig) runFlow(t *testing.T, sipp, kamailio string, l lane, f siptest.Flow, want []string) {
	t.Helper()
	pair := f.Pair(1, siptest.UDP)
	pair.Timeout = 15 * time.Second
	pair.CallID = fmt.Sprintf("%s-%s-%%u@e2e.test", l.name, f.Name)
	pair.UASPort, pair.UACPort = l.pbx, l.trk
	pair.Ports = r.ports // for sipp's media ports
	if f.Outbound {
		pair.UASPort, pair.UACPort = l.trk, l.pbx
	}
	switch l.mode {
	case "proxy":
		pair.Target = fmt.Sprintf("127.0.0.1:%d", l.listen)
	case "hep":
		k := siptest.StartKamailio(t.Context(), t, kamailio, siptest.KamailioConfig{
			NextHop: fmt.Sprintf("127.0.0.1:%d", pair.UASPort),
			HEP:     fmt.Sprintf("127.0.0.1:%d", l.listen),
			Port:    r.ports.Take(t),
		})
		pair.Target = k.Addr()
	}
	res := siptest.Run(t.Context(), t, sipp, pair)
	if !res.OK(1) {
		t.Fatalf("flow %s through %s: the call failed: %+v", f.Name, l.name, res)
	}
	callID := fmt.Sprintf("%s-%s-1@e2e.test", l.name, f.Name)
	var got []string
	if testwait.Poll(20*time.Second, func() bool { got = lines(r.events(t, callID)); return slices.Equal(got, want) }) {
		return
	}
	t.Errorf("flow %s through %s: the core has\n  %s\nwant\n  %s", f.Name, l.name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
}

// TestFlowsEndToEnd runs every flow through the proxy mode and through Kamailio into the tap
// mode, with a real core and a real agent, and compares the stored events with the flow's
// expected events.
func TestFlowsEndToEnd(t *testing.T) {
	sipp, kamailio := siptest.Programs(t)
	r := startRig(t, 28000, lane{mode: "proxy"}, lane{mode: "proxy"}, lane{mode: "proxy"}, lane{mode: "hep"}, lane{mode: "hep"}, lane{mode: "hep"})
	flows := siptest.Flows(t)
	for _, l := range r.lanes {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			for i, f := range flows {
				if i%3 != int(l.name[len(l.name)-1]-'0')%3 {
					continue
				}
				want := expected(t, f)
				if l.mode == "proxy" {
					want = proxyEdits(f.Name, want)
				}
				t.Run(f.Name, func(t *testing.T) { r.runFlow(t, sipp, kamailio, l, f, want) })
			}
		})
	}
}

// proxyEdits adjusts a flow's capture-derived events for what a proxy sees differently from a
// tap behind Kamailio: Kamailio relays a PBX's 503 to the caller as 500 and the tap reports the
// 500 that reached the caller, while the proxy reports the 503 the PBX sent.
func proxyEdits(flow string, want []string) []string {
	out := slices.Clone(want)
	if flow == "unavailable" {
		for i, l := range out {
			out[i] = strings.Replace(l, "sipCode=500", "sipCode=503", 1)
		}
	}
	return out
}

// TestReplayStoresNothingNew sends a flow's capture to a tap twice, the second time after the
// translator forgot the call: the core stores the call once, and the replayed events reach it
// and are recognised as duplicates.
func TestReplayStoresNothingNew(t *testing.T) {
	f := siptest.FlowNamed(t, "hold_sendonly")
	evs := readEvents(t, f)
	callID := evs[0].ProviderCallID
	// The tap's PBX is the capture's: the party Kamailio relayed the INVITE to.
	pkts := siptest.ReadCapture(t, f.Capture())
	pbx := int(pkts[2].DstPort)
	r := startRig(t, 29000, lane{mode: "hep", pbx: pbx})
	addr := fmt.Sprintf("127.0.0.1:%d", r.lanes[0].listen)
	want := lines(evs)
	siptest.ReplayCapture(t.Context(), t, f.Capture(), "udp", addr)
	testwait.Until(t, 20*time.Second, "the capture's events to land", func() bool { return slices.Equal(lines(r.events(t, callID)), want) })
	testwait.Until(t, 10*time.Second, "the agent to have sent them", func() bool {
		return r.agent.Metric(t, "callwire_agent_events_sent_total") >= float64(len(want))
	})
	sent := r.agent.Metric(t, "callwire_agent_events_sent_total")
	time.Sleep(4 * time.Second) // past the translator's grace (2s): it forgets the call
	siptest.ReplayCapture(t.Context(), t, f.Capture(), "udp", addr)
	testwait.Until(t, 20*time.Second, "the replayed events to reach the core", func() bool {
		return r.agent.Metric(t, "callwire_agent_events_sent_total") >= sent+float64(len(want))
	})
	if got := lines(r.events(t, callID)); !slices.Equal(got, want) {
		t.Errorf("after the replay the core has\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if _, _, err := r.st.GetCall(t.Context(), r.core.Org, "sip", callID+"#2"); err == nil {
		t.Error("the replay was filed as a second call")
	}
}

// readEvents returns the events a flow's committed capture yields.
func readEvents(t *testing.T, f siptest.Flow) []event.Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(siptest.CaptureDir(), f.Name+".events.json"))
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	if err := json.Unmarshal(b, &evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestProxyWhileCoreDown: with the core stopped, calls through the proxy still complete; the
// agent keeps their events and delivers them once the core is back.
func TestProxyWhileCoreDown(t *testing.T) {
	sipp, _ := siptest.Programs(t)
	r := startRig(t, 29500, lane{mode: "proxy"})
	r.core.Stop()
	l := r.lanes[0]
	for _, name := range []string{"basic", "cancel", "hold_sendonly"} {
		f := siptest.FlowNamed(t, name)
		pair := f.Pair(1, siptest.UDP)
		pair.Timeout = 15 * time.Second
		pair.CallID = fmt.Sprintf("down-%s-%%u@e2e.test", name)
		pair.UASPort, pair.UACPort = l.pbx, l.trk
		pair.Ports = r.ports
		pair.Target = fmt.Sprintf("127.0.0.1:%d", l.listen)
		if res := siptest.Run(t.Context(), t, sipp, pair); !res.OK(1) {
			t.Fatalf("flow %s failed through the proxy while the core was down: %+v", name, res)
		}
	}
	testwait.Until(t, 10*time.Second, "the agent to hold the events in its outbox", func() bool {
		return r.agent.Metric(t, "callwire_agent_events_queued") > 0
	})
	r.core.Start()
	for _, name := range []string{"basic", "cancel", "hold_sendonly"} {
		want := expected(t, siptest.FlowNamed(t, name))
		callID := fmt.Sprintf("down-%s-1@e2e.test", name)
		testwait.Until(t, 30*time.Second, "the events of "+name+" to land once the core is back", func() bool {
			return slices.Equal(lines(r.events(t, callID)), want)
		})
	}
}
