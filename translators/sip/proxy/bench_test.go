package proxy

import (
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/callwire/callwire/translators/sip/callmodel"
)

// BenchmarkHandleInvite is the cost of routing one initial INVITE (parse excluded): with
// observing off (the message is changed in place) and on (the forwarded copy is a clone, the
// observer gets the message as received).
func BenchmarkHandleInvite(b *testing.B) {
	for _, observe := range []bool{false, true} {
		b.Run("observe="+strconv.FormatBool(observe), func(b *testing.B) {
			pbx := netip.MustParseAddrPort("127.0.0.1:9") // discard port: nothing answers
			cfg := Config{PBX: mustHP(pbx.String()), Trunk: mustHP("127.0.0.1:7"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if observe {
				cfg.Observe = func(callmodel.Message) {}
			}
			r := start(b, cfg)
			src := peer{network: "udp", addr: netip.MustParseAddrPort("127.0.0.1:5")}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				data := []byte(wire(invite(&ua{addr: src.addr}, r.udp, "bench-"+strconv.Itoa(i), strconv.Itoa(i), "70")))
				msg, err := r.p.parser.ParseSIP(data)
				if err != nil {
					b.Fatal(err)
				}
				r.p.handle(msg, data, src, time.Now())
			}
		})
	}
}
