package proxy

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/sip/callmodel"
	"github.com/callwire/callwire/translators/sip/internal/siptest"
)

// Calls complete while the observer panics on every message: a translation fault never breaks a
// call.
func TestCallsSurviveObserver(t *testing.T) {
	sipp, _ := siptest.Programs(t)
	cases := []struct {
		name    string
		observe func(callmodel.Message)
		check   func(t *testing.T, st Stats)
	}{
		{"panics", func(callmodel.Message) { panic("translation fault") }, func(t *testing.T, st Stats) {
			if st.ObserveFailures == 0 {
				t.Errorf("no observe failure counted: %+v", st)
			}
		}},
	}
	ports, err := siptest.NewPorts(31100, 31299)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pair := siptest.Prepare(t, siptest.Pair{UAC: scenario(t, "basic_uac.xml"), UAS: scenario(t, "basic_uas.xml"),
				Calls: 10, Rate: 20, Timeout: 20 * time.Second, Ports: ports})
			r := start(t, Config{PBX: mustHP(local(pair.UASPort)), Trunk: mustHP(local(pair.UACPort)), Observe: c.observe,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			pair.Target = r.udp.String()
			res := siptest.Run(t.Context(), t, sipp, pair)
			if !res.OK(pair.Calls) {
				t.Fatalf("calls failed with a %s observer: uac %+v uas %+v", c.name, res.UAC, res.UAS)
			}
			c.check(t, r.p.Stats())
		})
	}
}
