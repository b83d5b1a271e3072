package asterisk

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/asterisk/ami"
)

// FuzzTracker feeds arbitrary AMI streams to the call model (and its resync): it must never
// panic, and every event it emits must validate.
func FuzzTracker(f *testing.F) {
	for _, p := range []string{"ami/testdata/attended-transfer.ami", "ami/testdata/queue-abandon.ami", "testdata/synthetic/hold.ami",
		"ami/testdata/asterisk-20-attended-transfer.ami", "ami/testdata/asterisk-20-blind-transfer.ami",
		"testdata/regress/pickup-by-dial.ami", "testdata/regress/queue-local-busy-member.ami"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("Event: Hangup\r\nUniqueid: 1.1\r\nLinkedid: 1.1\r\nCause: 17\r\n\r\n"))
	f.Add([]byte("Event: AttendedTransfer\r\nOrigTransfererUniqueid: 1.2\r\nOrigTransfererLinkedid: 1.1\r\nSecondTransfererUniqueid: 1.3\r\nSecondTransfererLinkedid: 1.3\r\nResult: Success\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr := testTracker(t)
		r := ami.NewReader(bytes.NewReader(b))
		var msgs []ami.Message
		for len(msgs) < 500 {
			m, err := r.ReadMessage()
			if err != nil {
				break
			}
			msgs = append(msgs, m)
		}
		at := epoch
		for i, m := range msgs {
			at = at.Add(time.Second)
			evs := tr.Observe(m, at)
			switch i % 7 {
			case 3:
				evs = append(evs, tr.Resync(msgs[i/2:i], at)...)
			case 5:
				evs = append(evs, tr.Sweep(msgs[i/3:i], at)...)
			}
			for _, e := range evs {
				if err := e.Validate(); err != nil {
					t.Fatalf("invalid %s: %v", e.Type, err)
				}
			}
		}
		for _, e := range tr.Resync(nil, at) {
			if err := e.Validate(); err != nil {
				t.Fatalf("invalid %s: %v", e.Type, err)
			}
		}
		if n := tr.Stats().Active; n != 0 {
			t.Fatalf("%d calls left after an empty resync", n)
		}
	})
}
