package tap

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/sip/callmodel"
)

// BenchmarkTap measures the tap's own work per HEP datagram, without sockets or call model:
// decode, checks, a copy of the payload, duplicate suppression and the reorder window (200 ms,
// one datagram every 20 µs of capture and arrival time, so about 10,000 held), on the committed
// Kamailio captures in turn. It reports datagrams/s.
func BenchmarkTap(b *testing.B) {
	files, err := filepath.Glob(filepath.Join("..", "hep", "testdata", "kamailio-*.hep"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no fixtures: %v", err)
	}
	var pkts [][]byte
	for _, f := range files {
		p, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		pkts = append(pkts, p)
	}
	r := newReorder(DefaultWindow, DefaultMaxHeld)
	observed := 0
	emit := func(callmodel.Message) { observed++ }
	now := wall
	const step = 20 * time.Microsecond
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m, why := convert(pkts[i%len(pkts)], "")
		if why != dropNone {
			b.Fatalf("fixture dropped: %d", why)
		}
		// every datagram is a new message: its capture time moves on with the clock
		m.At = m.At.Add(time.Duration(i) * step)
		// and comes from its own port, so that it is not a duplicate of the previous round
		m.Src = netip.AddrPortFrom(m.Src.Addr(), uint16(i/len(pkts)))
		now = now.Add(step)
		if r.push(m, now, emit) == duplicate {
			b.Fatal("a new message was taken for a duplicate")
		}
		i++
	}
	r.drain(emit)
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "datagrams/s")
}
