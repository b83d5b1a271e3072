package siptest

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// flows lists the scenario pairs of testdata/sipp: every <flow>_uac.xml has a <flow>_uas.xml.
func flows(t *testing.T) []string {
	t.Helper()
	uacs, err := filepath.Glob(filepath.Join("..", "..", "testdata", "sipp", "*_uac.xml"))
	if err != nil || len(uacs) == 0 {
		t.Fatalf("no scenario pairs: %v", err)
	}
	var out []string
	for _, f := range uacs {
		name := strings.TrimSuffix(filepath.Base(f), "_uac.xml")
		if _, err := os.Stat(scenario(name, "uas")); err != nil {
			t.Fatalf("flow %s has no callee side: %v", name, err)
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func scenario(flow, side string) string {
	p, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "sipp", flow+"_"+side+".xml"))
	return p
}

// TestPairsDirect runs every scenario pair caller to callee with nothing between: the pair is
// consistent when every call succeeds on both sides.
func TestPairsDirect(t *testing.T) {
	sipp, _ := Programs(t)
	for _, tr := range []Transport{UDP, TCP} {
		for _, flow := range flows(t) {
			t.Run(flow+"/"+tr.Name(), func(t *testing.T) {
				t.Parallel()
				r := Run(t.Context(), t, sipp, Pair{UAC: scenario(flow, "uac"), UAS: scenario(flow, "uas"), Calls: 2, Transport: tr})
				if !r.OK(2) {
					t.Fatalf("flow %s over %s: uac %d ok %d failed (exit %d), uas %d ok %d failed (exit %d)", flow, tr.Name(),
						r.UAC.Successful, r.UAC.Failed, r.UAC.ExitCode, r.UAS.Successful, r.UAS.Failed, r.UAS.ExitCode)
				}
			})
		}
	}
}

// TestPairsThroughKamailio runs every pair through a real Kamailio relaying statefully and
// record-routing, and mirroring HEPv3 to a listener: every call succeeds, and HEP3 datagrams
// arrive.
func TestPairsThroughKamailio(t *testing.T) {
	sipp, kamailio := Programs(t)
	for _, tr := range []Transport{UDP, TCP} {
		for _, flow := range flows(t) {
			t.Run(flow+"/"+tr.Name(), func(t *testing.T) {
				t.Parallel()
				hep := ListenHEP(t)
				p := Prepare(t, Pair{UAC: scenario(flow, "uac"), UAS: scenario(flow, "uas"), Calls: 2, Transport: tr})
				k := StartKamailio(t.Context(), t, kamailio, KamailioConfig{NextHop: "127.0.0.1:" + strconv.Itoa(p.UASPort), Transport: tr, HEP: hep.Addr()})
				p.Target = k.Addr()
				r := Run(t.Context(), t, sipp, p)
				if !r.OK(2) {
					t.Fatalf("flow %s over %s through kamailio: uac %d ok %d failed (exit %d), uas %d ok %d failed (exit %d)", flow, tr.Name(),
						r.UAC.Successful, r.UAC.Failed, r.UAC.ExitCode, r.UAS.Successful, r.UAS.Failed, r.UAS.ExitCode)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				for {
					if n, _ := hep.Counts(); n > 0 {
						break
					}
					select {
					case <-ctx.Done():
						n, other := hep.Counts()
						t.Fatalf("no HEP3 datagram reached the collector (%d, %d other)", n, other)
					case <-time.After(20 * time.Millisecond):
					}
				}
				if _, other := hep.Counts(); other != 0 {
					t.Errorf("%d datagrams did not start with HEP3", other)
				}
			})
		}
	}
}
