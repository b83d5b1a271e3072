package sip_test

import (
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/numbering"
	"github.com/callwire/callwire/translators/sip/callmodel"
	"github.com/callwire/callwire/translators/sip/hep"
	"github.com/callwire/callwire/translators/sip/internal/siptest"
)

var update = flag.Bool("update", false, "rewrite the expected events of every capture (testdata/captures/*.events.json)")

// captureMessages returns a capture's SIP messages in capture-time order (as the tap releases
// them), with the PBX's address: the party Kamailio relays the INVITE to for an inbound flow,
// the one that sends it for an outbound flow.
func captureMessages(t *testing.T, f siptest.Flow) ([]callmodel.Message, netip.AddrPort) {
	t.Helper()
	pkts := siptest.ReadCapture(t, f.Capture())
	slices.SortStableFunc(pkts, func(a, b hep.Packet) int { return a.Time().Compare(b.Time()) })
	var msgs []callmodel.Message
	var caller, proxy netip.AddrPort
	parties := map[netip.AddrPort]bool{}
	for i, p := range pkts {
		if !p.IsSIP() {
			continue
		}
		if i == 0 {
			caller, proxy = p.SrcAddrPort(), p.DstAddrPort()
		}
		parties[p.SrcAddrPort()], parties[p.DstAddrPort()] = true, true
		tr := "udp"
		if p.IPProtocol == hep.IPProtoTCP {
			tr = "tcp"
		}
		msgs = append(msgs, callmodel.Message{Data: p.Payload, Transport: tr, Src: p.SrcAddrPort(), Dst: p.DstAddrPort(), At: p.Time()})
	}
	if f.Outbound {
		return msgs, caller
	}
	for a := range parties {
		if a != caller && a != proxy {
			return msgs, a
		}
	}
	t.Fatalf("capture %s: no third party", f.Name)
	return nil, netip.AddrPort{}
}

// translateCapture runs a capture through a fresh call model and ends what it leaves open.
func translateCapture(t *testing.T, msgs []callmodel.Message, pbx netip.AddrPort) []event.Event {
	t.Helper()
	plan, err := numbering.New(numbering.Config{DefaultCountry: "US", Numbers: []string{"+15551230100"},
		Locations: map[string][]string{"+15551230100": {"front-desk"}}})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := callmodel.NewTracker(callmodel.Config{Plan: plan, PBX: []netip.AddrPort{pbx}})
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	for _, m := range msgs {
		out = append(out, tr.Observe(m)...)
	}
	if len(msgs) > 0 {
		out = append(out, tr.Expire(msgs[len(msgs)-1].At.Add(24*time.Hour))...)
	}
	return out
}

// TestCaptures: for each flow, the real capture of its sipp pair through Kamailio yields the
// committed events; -update rewrites them. A capture replayed into the same call model again
// yields nothing new, and every event validates.
func TestCaptures(t *testing.T) {
	for _, f := range siptest.Flows(t) {
		t.Run(f.Name, func(t *testing.T) {
			if _, err := os.Stat(f.Capture()); err != nil {
				t.Fatalf("flow %s has no capture: %v", f.Name, err)
			}
			msgs, pbx := captureMessages(t, f)
			got := translateCapture(t, msgs, pbx)
			if len(got) == 0 {
				t.Fatal("the capture yields no events")
			}
			for _, e := range got {
				if err := e.Validate(); err != nil {
					t.Errorf("%s #%d: %v", e.Type, e.Sequence, err)
				}
			}
			t.Logf("\n%s", summary(got))
			b, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, '\n')
			path := filepath.Join(siptest.CaptureDir(), f.Name+".events.json")
			if *update {
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if string(want) != string(b) {
				t.Errorf("events differ from %s (run with -update after checking):\n%s", path, summary(got))
			}
		})
	}
}

// summary is one line per event: its type and the fields a flow decides.
func summary(evs []event.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(summaryLine(e))
		b.WriteByte('\n')
	}
	return b.String()
}

// summaryLine is an event's type and the fields a flow decides, in a stable form.
func summaryLine(e event.Event) string {
	parts := []string{string(e.Type), string(e.Call.Direction)}
	party := func(name string, p *event.Party) {
		if p == nil {
			return
		}
		v := string(p.EffectiveKind())
		switch {
		case p.Number != "":
			v += ":" + p.Number
		case p.Extension != "":
			v += ":" + p.Extension
		}
		parts = append(parts, name+"="+v)
	}
	party("from", e.Call.From)
	party("to", e.Call.To)
	if len(e.Call.Diversion) > 0 {
		parts = append(parts, "diversion="+e.Call.Diversion[0].Number)
	}
	if e.AnsweredBy != "" {
		parts = append(parts, "answeredBy="+e.AnsweredBy)
	}
	if e.Disposition != "" {
		parts = append(parts, "disposition="+string(e.Disposition))
	}
	if e.SIPCode != nil {
		parts = append(parts, "sipCode="+itoa(*e.SIPCode))
	}
	if e.SIPReason != "" {
		parts = append(parts, "sipReason="+strconv.Quote(e.SIPReason))
	}
	if e.AnsweredElsewhere != nil && *e.AnsweredElsewhere {
		parts = append(parts, "answeredElsewhere")
	}
	if e.Released != nil {
		if *e.Released {
			parts = append(parts, "released")
		} else {
			parts = append(parts, "held")
		}
	}
	if e.Mode != "" {
		parts = append(parts, "mode="+string(e.Mode))
	}
	if e.TransferTo != nil {
		party("transferTo", e.TransferTo)
	}
	return strings.Join(parts, " ")
}

func itoa(n int) string { return strconv.Itoa(n) }
