package tap

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/sip/callmodel"
	"github.com/callwire/callwire/translators/sip/internal/siptest"
)

// hop is what the test checks of one observed message: what it is and where it went.
type hop struct {
	what     string // the method of a request, "<code> <method>" of a response
	src, dst string
}

// hopOf reads a captured SIP message's start line and CSeq; ok is false when it has neither.
func hopOf(m callmodel.Message) (h hop, callID string, ok bool) {
	head, _, _ := strings.Cut(string(m.Data), "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	var cseqMethod string
	for _, l := range lines[1:] {
		name, value, found := strings.Cut(l, ":")
		if !found {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "call-id", "i":
			callID = value
		case "cseq":
			_, cseqMethod, _ = strings.Cut(value, " ")
		}
	}
	if callID == "" || cseqMethod == "" {
		return hop{}, "", false
	}
	h.src, h.dst = m.Src.String(), m.Dst.String()
	if rest, isResp := strings.CutPrefix(lines[0], "SIP/2.0 "); isResp {
		code, _, _ := strings.Cut(rest, " ")
		h.what = code + " " + cseqMethod
	} else {
		h.what, _, _ = strings.Cut(lines[0], " ")
	}
	return h, callID, true
}

// TestThroughKamailio runs sipp calls through a real Kamailio whose siptrace mirrors every
// message it receives and sends as HEPv3 to the tap, and checks the tap yields each call's
// messages, both the copy into Kamailio and the copy out of it, in timestamp order, with their
// addresses. HEP reaches the tap over UDP, and over TCP (siptrace's duplicate_uri with
// ;transport=tcp).
func TestThroughKamailio(t *testing.T) {
	sipp, kamailio := siptest.Programs(t)
	flow := func(side string) string {
		p, _ := filepath.Abs(filepath.Join("..", "testdata", "sipp", "basic_"+side+".xml"))
		return p
	}
	ports, err := siptest.NewPorts(31300, 31599)
	if err != nil {
		t.Fatal(err)
	}
	for _, hepTransport := range []string{"udp", "tcp"} {
		t.Run("hep over "+hepTransport, func(t *testing.T) {
			t.Parallel()
			const calls = 3
			tp, s := startTap(t, Config{Window: 100 * time.Millisecond, Listen: mustListen(hepTransport + "://127.0.0.1:0")})
			hepAddr := tp.Addrs()[0].String()
			if hepTransport == "tcp" {
				hepAddr += ";transport=tcp"
			}
			p := siptest.Prepare(t, siptest.Pair{UAC: flow("uac"), UAS: flow("uas"), Calls: calls, Rate: 20, Ports: ports})
			k := siptest.StartKamailio(t.Context(), t, kamailio, siptest.KamailioConfig{
				NextHop: "127.0.0.1:" + strconv.Itoa(p.UASPort), HEP: hepAddr, Ports: ports})
			p.Target = k.Addr()
			if r := siptest.Run(t.Context(), t, sipp, p); !r.OK(calls) {
				t.Fatalf("sipp through kamailio: uac %+v, uas %+v", r.UAC, r.UAS)
			}

			uac := "127.0.0.1:" + strconv.Itoa(p.UACPort)
			uas := "127.0.0.1:" + strconv.Itoa(p.UASPort)
			kam := k.Addr()
			want := []hop{
				{"INVITE", uac, kam},
				{"100 INVITE", kam, uac}, // Kamailio's own, hop by hop
				{"INVITE", kam, uas},
				{"180 INVITE", uas, kam},
				{"180 INVITE", kam, uac},
				{"200 INVITE", uas, kam},
				{"200 INVITE", kam, uac},
				{"ACK", uac, kam},
				{"ACK", kam, uas},
				{"BYE", uac, kam},
				{"BYE", kam, uas},
				{"200 BYE", uas, kam},
				{"200 BYE", kam, uac},
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var got []callmodel.Message
			var perCall map[string][]hop
			for {
				got = s.got()
				perCall = map[string][]hop{}
				for _, m := range got {
					h, id, ok := hopOf(m)
					if !ok {
						t.Fatalf("observed something that is not a SIP message of a call: %q", m.Data)
					}
					// a UDP retransmission is a message seen again, not a hop of its own
					if !slices.Contains(perCall[id], h) {
						perCall[id] = append(perCall[id], h)
					}
				}
				complete := len(perCall) == calls
				for _, hops := range perCall {
					complete = complete && len(hops) >= len(want)
				}
				if complete {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("after %v: %d calls observed (%d messages), want %d calls of %d messages; stats %+v",
						ctx.Err(), len(perCall), len(got), calls, len(want), tp.Stats())
				case <-time.After(50 * time.Millisecond):
				}
			}
			for id, hops := range perCall {
				if !slices.Equal(hops, want) {
					t.Errorf("call %s: observed\n%v\nwant\n%v", id, hops, want)
				}
			}
			for i := 1; i < len(got); i++ {
				if got[i].At.Before(got[i-1].At) {
					t.Errorf("message %d captured at %v observed after one captured at %v", i, got[i].At, got[i-1].At)
				}
			}
			for _, m := range got {
				if m.Transport != "udp" || !m.Src.Addr().Is4() || m.At.IsZero() || m.At.Before(time.Now().Add(-time.Hour)) {
					t.Errorf("message %s→%s over %q at %v", m.Src, m.Dst, m.Transport, m.At)
					break
				}
			}
			st := tp.Stats()
			if st.Late != 0 || st.Malformed != 0 || st.Dropped != 0 || st.Unsupported != 0 {
				t.Errorf("stats %+v", st)
			}
			t.Logf("hep over %s: %d messages observed, stats %+v", hepTransport, len(got), st)
		})
	}
}
