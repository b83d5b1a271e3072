package tap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/sip/callmodel"
	"github.com/callwire/callwire/translators/sip/hep"
)

// FuzzTapPacket feeds bytes to the tap's path from the wire to Observe: split as a HEP-over-TCP
// stream into packets, each decoded, checked and given to a small reorder window on a clock
// that moves on by one input byte's worth of milliseconds. Nothing panics, the window holds no
// more than its bound, every message accepted is either observed or counted as a duplicate,
// and an observed message shares no memory with the input.
func FuzzTapPacket(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "hep", "testdata", "kamailio-*.hep"))
	var all []byte
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	f.Add(sipPacket(f, 1, 1, nil))
	f.Add(append(sipPacket(f, 1, 1, nil), sipPacket(f, 1, 1, nil)...))
	f.Add(sipPacket(f, 1, 1, func(p *hep.Packet) { p.Payload = []byte("SIP/2.0 200 OK\r\n\r\n") }))
	f.Add([]byte("HEP3\x00\x06"))
	f.Add([]byte{2, 16, 2, 17})
	f.Fuzz(func(t *testing.T, in []byte) {
		const maxHeld = 4
		r := newReorder(20*time.Millisecond, maxHeld)
		var out []callmodel.Message
		var snap [][]byte
		emit := func(m callmodel.Message) {
			out = append(out, m)
			snap = append(snap, bytes.Clone(m.Data))
		}
		accepted, dups := 0, 0
		now := wall
		rd, err := hep.NewReader(bytes.NewReader(in), hep.MaxPacketLen)
		if err != nil {
			t.Fatal(err)
		}
		for {
			b, err := rd.Next()
			if err != nil {
				break
			}
			for _, key := range []string{"", "k"} {
				m, why := convert(b, key)
				if why != dropNone {
					continue
				}
				if !looksLikeSIP(m.Data) {
					t.Fatalf("accepted a payload that is not SIP: %q", m.Data)
				}
				accepted++
				if r.push(m, now, emit) == duplicate {
					dups++
				}
				if r.held() > maxHeld {
					t.Fatalf("%d held, bound %d", r.held(), maxHeld)
				}
				if len(r.seen) > r.seenMax {
					t.Fatalf("%d remembered, bound %d", len(r.seen), r.seenMax)
				}
				if len(b) > 0 {
					now = now.Add(time.Duration(b[len(b)-1]) * time.Millisecond)
				}
			}
		}
		r.drain(emit)
		if len(out)+dups != accepted {
			t.Fatalf("accepted %d, observed %d, duplicates %d", accepted, len(out), dups)
		}
		for i := range in {
			in[i] ^= 0xff
		}
		for i, m := range out {
			if !bytes.Equal(m.Data, snap[i]) {
				t.Fatal("an observed message changed with the input")
			}
		}
	})
}
