package siptest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/sip/hep"
)

var updateCaptures = flag.Bool("update-captures", false, "rewrite testdata/captures/<flow>.hep from this run's Kamailio HEP copies")

const (
	// pairTimeout is sipp's -timeout for each side of a pair: every flow ends in well under it.
	pairTimeout = 10 * time.Second
	// concurrency is how many pairs run at once, whatever -parallel says: the peers mostly wait.
	concurrency = 8
)

type pairCase struct {
	flow Flow
	tr   Transport
}

// attempts is how often a pair may run before its subtest fails. A loaded machine can stall a
// sipp process for seconds; over UDP that means retransmissions arriving where a scenario no
// longer expects them. A broken scenario fails every time; a stall rarely twice.
const attempts = 2

// runPairs runs every flow over every transport as a subtest named flow/transport, at most
// concurrency at a time, with ports from their own range [first, first+3999]. try returns what
// went wrong, or "" when the pair passed; a failed try is logged and tried again.
func runPairs(t *testing.T, trs []Transport, first int, try func(t *testing.T, ports *Ports, f Flow, tr Transport) string) {
	t.Helper()
	ports, err := NewPorts(first, first+3999)
	if err != nil {
		t.Fatal(err)
	}
	var cases []pairCase
	for _, tr := range trs {
		for _, f := range Flows(t) {
			cases = append(cases, pairCase{f, tr})
		}
	}
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t.Run(c.flow.Name+"/"+c.tr.Name(), func(t *testing.T) {
				var problems []string
				for i := range attempts {
					p := try(t, ports, c.flow, c.tr)
					if p == "" {
						return
					}
					problems = append(problems, p)
					t.Logf("attempt %d of %d failed: %s", i+1, attempts, p)
				}
				t.Fatalf("flow %s over %s failed every attempt:\n%s", c.flow.Name, c.tr.Name(), strings.Join(problems, "\n"))
			})
		}()
	}
	wg.Wait()
}

// problem describes a pair's failure, or is "" when every call succeeded on both sides.
func problem(what string, r Result, calls int) string {
	if r.OK(calls) {
		return ""
	}
	return fmt.Sprintf("%s: uac %d ok %d failed (exit %d), uas %d ok %d failed (exit %d)", what,
		r.UAC.Successful, r.UAC.Failed, r.UAC.ExitCode, r.UAS.Successful, r.UAS.Failed, r.UAS.ExitCode)
}

// TestFlowsAreComplete holds the scenario directory to what the observer's tests rely on: every
// flow has both sides, a comment saying what it shows, and (once captured) a capture.
func TestFlowsAreComplete(t *testing.T) {
	fs := Flows(t)
	if len(fs) < 30 {
		t.Errorf("%d flows, want every flow of the SIP observer's issue (30 or more)", len(fs))
	}
	for _, f := range fs {
		for _, p := range []string{f.UAC, f.UAS} {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b[:min(len(b), 400)], []byte("<!-- "+f.Name+",")) {
				t.Errorf("%s does not open with a comment saying what the flow shows", p)
			}
		}
		if len(f.Shows) < 20 {
			t.Errorf("flow %s: Shows %q says too little", f.Name, f.Shows)
		}
		if !*updateCaptures {
			if _, err := os.Stat(f.Capture()); err != nil {
				t.Errorf("flow %s has no capture (go test -run TestPairsThroughKamailio -update-captures): %v", f.Name, err)
			}
		}
	}
}

// TestPairsDirect runs every scenario pair caller to callee with nothing between, over UDP and
// TCP: the pair is consistent when every call succeeds on both sides.
func TestPairsDirect(t *testing.T) {
	sipp, _ := Programs(t)
	runPairs(t, []Transport{UDP, TCP}, 20000, func(t *testing.T, ports *Ports, f Flow, tr Transport) string {
		p := f.Pair(2, tr)
		p.Timeout = pairTimeout
		p.UASPort, p.UACPort = ports.Take(t), ports.Take(t)
		r := Run(t.Context(), t, sipp, p)
		return problem(fmt.Sprintf("flow %s over %s", f.Name, tr.Name()), r, 2)
	})
}

// TestPairsThroughKamailio runs every pair through a real Kamailio relaying statefully,
// record-routing and mirroring HEPv3 to a listener, over UDP (one call, whose HEP copies are the
// flow's capture) and TCP (two calls): every call succeeds and only HEP3 datagrams arrive. Over
// UDP the copies must have the shape of the committed capture (who sent what to whom, in order);
// with -update-captures they replace it.
func TestPairsThroughKamailio(t *testing.T) {
	sipp, kamailio := Programs(t)
	runPairs(t, []Transport{UDP, TCP}, 24000, func(t *testing.T, ports *Ports, f Flow, tr Transport) string {
		calls := 2
		if tr == UDP {
			calls = 1
		}
		hepc := ListenHEP(t)
		p := f.Pair(calls, tr)
		p.Timeout = pairTimeout
		p.UASPort, p.UACPort = ports.Take(t), ports.Take(t)
		k := StartKamailio(t.Context(), t, kamailio, KamailioConfig{NextHop: "127.0.0.1:" + strconv.Itoa(p.UASPort), Transport: tr, HEP: hepc.Addr(), Port: ports.Take(t),
			NoTrying: f.Name == "retransmit"})
		p.Target = k.Addr()
		r := Run(t.Context(), t, sipp, p)
		if pr := problem(fmt.Sprintf("flow %s over %s through kamailio", f.Name, tr.Name()), r, calls); pr != "" {
			return pr
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if n := hepc.WaitQuiet(ctx, 1, 300*time.Millisecond); n == 0 {
			_, other := hepc.Counts()
			return fmt.Sprintf("no HEP3 datagram reached the collector (%d other)", other)
		}
		if _, other := hepc.Counts(); other != 0 {
			t.Errorf("%d datagrams did not start with HEP3", other)
		}
		if tr != UDP {
			return ""
		}
		got := hepc.Datagrams()
		if *updateCaptures {
			WriteCapture(t, f.Capture(), got)
			return ""
		}
		var gotPackets []hep.Packet
		for i, d := range got {
			pk, err := hep.Decode(d)
			if err != nil {
				t.Fatalf("datagram %d: %v", i+1, err)
			}
			gotPackets = append(gotPackets, pk)
		}
		want := ReadCapture(t, f.Capture())
		if g, w := shape(gotPackets), shape(want); g != w {
			return fmt.Sprintf("this run's HEP copies differ in shape from %s (regenerate with -update-captures if the flow changed on purpose)\n--- got\n%s--- want\n%s", f.Capture(), g, w)
		}
		return ""
	})
}

// shape is a capture reduced to what stays the same from run to run: for each message, who sent
// it to whom (addresses numbered in order of first appearance) and its first line's method or
// status code with its CSeq method. A message identical to an earlier one on the same leg (a
// UDP retransmission, whose number depends on timing) is left out.
func shape(ps []hep.Packet) string {
	seen := map[string]bool{}
	ids := map[string]int{}
	id := func(a string) int {
		if n, ok := ids[a]; ok {
			return n
		}
		ids[a] = len(ids) + 1
		return ids[a]
	}
	var b strings.Builder
	for _, p := range ps {
		key := p.SrcAddrPort().String() + ">" + p.DstAddrPort().String() + "\n" + string(p.Payload)
		if seen[key] {
			continue
		}
		seen[key] = true
		src, dst := id(p.SrcAddrPort().String()), id(p.DstAddrPort().String())
		fmt.Fprintf(&b, "%d>%d %s\n", src, dst, summary(p.Payload))
	}
	return b.String()
}

// summary is "INVITE" for a request, "200 INVITE" for a response.
func summary(sip []byte) string {
	first, rest, _ := strings.Cut(string(sip), "\r\n")
	cseq := ""
	for _, l := range strings.Split(rest, "\r\n") {
		name, v, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "CSeq") {
			if f := strings.Fields(v); len(f) == 2 {
				cseq = f[1]
			}
		}
	}
	f := strings.Fields(first)
	if len(f) >= 2 && f[0] == "SIP/2.0" {
		return f[1] + " " + cseq
	}
	if len(f) > 0 {
		return f[0]
	}
	return "?"
}

// FuzzParseCapture feeds arbitrary bytes to ParseCapture: it never panics, and what it returns
// re-encodes to packets that parse again.
func FuzzParseCapture(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(CaptureDir(), "busy.hep")); err == nil {
		f.Add(b[:min(len(b), 2000)])
	}
	f.Add([]byte("HEP3\x00\x06"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, _ := ParseCapture(b)
		for i := range ps {
			if _, err := hep.Encode(&ps[i]); err != nil {
				t.Fatalf("packet %d decoded but does not encode: %v", i+1, err)
			}
		}
	})
}

// TestCapturesRead decodes every committed capture with the hep package: every packet is SIP with
// addresses and a timestamp, and the first is the flow's initial INVITE.
func TestCapturesRead(t *testing.T) {
	for _, f := range Flows(t) {
		t.Run(f.Name, func(t *testing.T) {
			if _, err := os.Stat(f.Capture()); err != nil {
				t.Skipf("no capture yet: %v", err)
			}
			ps := ReadCapture(t, f.Capture())
			for i, p := range ps {
				if !p.IsSIP() || !p.Src.IsValid() || !p.Dst.IsValid() || p.Seconds == 0 || len(p.Payload) == 0 {
					t.Errorf("packet %d: not a timestamped SIP copy with addresses: %+v", i+1, p)
				}
			}
			if s := summary(ps[0].Payload); s != "INVITE" {
				t.Errorf("first packet is %q, want the INVITE", s)
			}
		})
	}
}

// TestCapturesShowTheirFlow checks that each capture holds what its flow is about, on the wire as
// the tap receives it: each string must occur in some packet's SIP message, at least as often as
// given (so a header Kamailio forwards shows on both legs).
func TestCapturesShowTheirFlow(t *testing.T) {
	type want struct {
		s string
		n int
	}
	flows := map[string][]want{
		"anonymous_from":      {{"From: \"Anonymous\" <sip:anonymous@anonymous.invalid>", 2}},
		"auth_401":            {{"SIP/2.0 401 ", 2}, {"WWW-Authenticate: Digest", 2}, {"Authorization: Digest username=\"trunk\"", 2}, {"CSeq: 2 INVITE", 2}},
		"auth_407":            {{"SIP/2.0 407 ", 2}, {"Proxy-Authenticate: Digest", 2}, {"Proxy-Authorization: Digest username=\"trunk\"", 2}},
		"basic":               {{"SIP/2.0 200 OK", 4}, {"P-Asserted-Identity: <sip:201@", 2}, {"BYE ", 2}},
		"busy":                {{"SIP/2.0 486 Busy Here", 2}},
		"busy_everywhere":     {{"SIP/2.0 600 Busy Everywhere", 2}},
		"bye_from_callee":     {{"BYE sip:+15559870123@", 2}},
		"bye_reason":          {{"Reason: Q.850;cause=16;text=\"Normal call clearing\"", 2}},
		"cancel":              {{"CANCEL ", 2}, {"SIP/2.0 487 ", 2}},
		"cancel_race_200":     {{"CANCEL ", 2}, {"CSeq: 1 INVITE", 4}, {"BYE ", 2}},
		"completed_elsewhere": {{"Reason: SIP;cause=200;text=\"Call completed elsewhere\"", 2}, {"SIP/2.0 487 ", 2}},
		"decline":             {{"SIP/2.0 603 Decline", 2}},
		"diversion":           {{"Diversion: <sip:+15551230199@", 2}, {"History-Info: <sip:+15551230199@", 2}},
		"fork_parallel":       {{"Contact: <sip:202@", 2}, {"SIP/2.0 180 Ringing", 4}},
		"hold_inactive":       {{"a=inactive", 4}},
		"hold_sendonly":       {{"a=sendonly", 2}, {"a=recvonly", 2}},
		"hold_update":         {{"UPDATE sip:", 4}, {"a=sendonly", 2}},
		"hold_zero_ipv4":      {{"c=IN IP4 0.0.0.0", 2}},
		"hold_zero_ipv6":      {{"c=IN IP6 ::", 2}},
		"no_answer_480":       {{"SIP/2.0 480 Temporarily Unavailable", 2}},
		"no_bye":              {{"ACK sip:", 2}},
		"not_found":           {{"SIP/2.0 404 Not Found", 2}},
		"outbound":            {{"INVITE sip:+15559870123@", 2}, {"From: \"Front desk\" <sip:201@", 2}},
		"privacy_id":          {{"Privacy: id", 2}, {"P-Asserted-Identity: <sip:+15559870123@", 2}},
		"redirect_302":        {{"SIP/2.0 302 Moved Temporarily", 2}, {"INVITE sip:201@", 2}},
		"refer_attended":      {{"Refer-To: <sip:202@", 2}, {"?Replaces=", 2}, {"SIP/2.0 202 Accepted", 2}, {"NOTIFY sip:", 2}},
		"refer_blind":         {{"Refer-To: <sip:+15551230200@", 2}, {"SIP/2.0 202 Accepted", 2}, {"NOTIFY sip:", 2}},
		"request_timeout_408": {{"SIP/2.0 408 Request Timeout", 2}},
		"retransmit":          {{"INVITE sip:+15551230100@", 4}},
		"rpid":                {{"Remote-Party-ID: \"Pat Doe\" <sip:+15559870123@", 2}},
		"session_refresh":     {{"Session-Expires: 90;refresher=uac", 8}},
		"unavailable":         {{"SIP/2.0 503 Service Unavailable", 1}, {"SIP/2.0 500 Service Unavailable", 1}, {"Retry-After: 30", 1}},
	}
	for _, f := range Flows(t) {
		t.Run(f.Name, func(t *testing.T) {
			ws, ok := flows[f.Name]
			if !ok {
				t.Fatalf("flow %s: say here what its capture must show", f.Name)
			}
			if _, err := os.Stat(f.Capture()); err != nil {
				t.Skipf("no capture yet: %v", err)
			}
			ps := ReadCapture(t, f.Capture())
			for _, w := range ws {
				n := 0
				for _, p := range ps {
					n += strings.Count(string(p.Payload), w.s)
				}
				if n < w.n {
					t.Errorf("%q occurs %d times in the capture, want at least %d", w.s, n, w.n)
				}
			}
		})
	}
}

// TestStretched checks the copy of a scenario a run plays: retransmission timers and the pauses
// that hold back an answer four times longer, the pauses that only order messages as they were.
func TestStretched(t *testing.T) {
	in := `<send retrans="500">x</send>
  <pause milliseconds="100"/>
  <pause milliseconds="1000"/>
  <send retrans="500" start_txn="invite">y</send>`
	want := `<send retrans="2000">x</send>
  <pause milliseconds="100"/>
  <pause milliseconds="4000"/>
  <send retrans="2000" start_txn="invite">y</send>`
	dir := t.TempDir()
	src := filepath.Join(dir, "flow_uac.xml")
	if err := os.WriteFile(src, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	out := stretched(t, dir, "uac", src)
	if out == src {
		t.Fatalf("the copy overwrote the scenario")
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("stretched scenario:\n%s\nwant:\n%s", got, want)
	}
}
