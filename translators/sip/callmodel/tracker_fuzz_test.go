package callmodel

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/callwire/callwire/sdk/event"
)

// fuzzSep separates the messages of one fuzz input.
var fuzzSep = []byte("\n--- \n")

// FuzzObserve feeds arbitrary messages, with a little framing (which way each goes, how far
// apart in time), to one small tracker: it must not panic, must hold at most MaxCalls calls,
// and every event it makes must be valid.
func FuzzObserve(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "flows", "*.sip"))
	for _, path := range files {
		msgs := loadFlow(f, path)
		var parts [][]byte
		var dirs []byte
		for _, m := range msgs {
			parts = append(parts, m.Data)
			d := byte(0)
			if m.Src == testPBX {
				d = 1
			}
			dirs = append(dirs, d)
		}
		f.Add(bytes.Join(parts, fuzzSep), dirs)
	}
	f.Add([]byte("INVITE sip:a SIP/2.0\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\nFrom: <sip:a>;tag=1\r\nTo: <sip:b>\r\n\r\n"), []byte{0})
	f.Fuzz(func(t *testing.T, data []byte, dirs []byte) {
		cfg := testConfig(t)
		cfg.MaxCalls = 4
		tr, err := NewTracker(cfg)
		if err != nil {
			t.Fatal(err)
		}
		check := func(evs []event.Event) {
			for i := range evs {
				if err := evs[i].Validate(); err != nil {
					t.Fatalf("invalid %s: %v", evs[i].Type, err)
				}
				rawIsCanonical(t, evs[i])
			}
			if n := tr.Stats().Calls; n > cfg.MaxCalls {
				t.Fatalf("%d calls held, MaxCalls %d", n, cfg.MaxCalls)
			}
		}
		at := flowBase
		for i, part := range bytes.Split(data, fuzzSep) {
			if i >= 64 {
				break
			}
			m := Message{Data: part, Transport: "udp", Src: testTrunk, Dst: testPBX, At: at}
			if i < len(dirs) {
				if dirs[i]&1 == 1 {
					m.Src, m.Dst = m.Dst, m.Src
				}
				at = at.Add(time.Duration(dirs[i]>>1) * time.Second)
			}
			check(tr.Observe(m))
		}
		check(tr.Expire(at.Add(time.Hour)))
		check(tr.Expire(at.Add(72 * time.Hour)))
		if tr.recovered != 0 {
			t.Fatalf("Observe panicked %d times", tr.recovered)
		}
		if n := tr.Stats().Calls; n != 0 {
			t.Fatalf("%d calls held after every deadline passed", n)
		}
	})
}

// BenchmarkObserve measures one basic inbound call (INVITE, 100, 180, 200, ACK, BYE, 200) per
// operation, each on its own Call-ID, with the calls forgotten as the benchmark goes.
func BenchmarkObserve(b *testing.B) { benchmarkObserve(b, false) }

// BenchmarkObserveParsed is BenchmarkObserve with messages already parsed, as the proxy hands
// them over: what translation costs the proxy mode.
func BenchmarkObserveParsed(b *testing.B) { benchmarkObserve(b, true) }

// benchmarkObserve feeds the messages of a basic call, under 1,024 Call-IDs in turn, as text (the
// tap's way) or parsed (the proxy's).
func benchmarkObserve(b *testing.B, parsed bool) {
	msgs := loadFlow(b, filepath.Join("testdata", "flows", "inbound_answered_caller_bye.sip"))
	const variants = 1024
	p := newParser()
	calls := make([][]Message, variants)
	for v := range calls {
		id := "bench-" + itoa(v) + "@203.0.113.5"
		for _, m := range msgs {
			m.Data = []byte(strings.ReplaceAll(string(m.Data), "in-caller-bye@203.0.113.5", id))
			if parsed {
				msg, err := p.ParseSIP(m.Data)
				if err != nil {
					b.Fatal(err)
				}
				m.SIP = msg
			}
			calls[v] = append(calls[v], m)
		}
	}
	tr := newTestTracker(b)
	b.ReportAllocs()
	b.ResetTimer()
	events := 0
	for i := 0; i < b.N; i++ {
		round := i / variants
		shift := time.Duration(round) * time.Hour
		for _, m := range calls[i%variants] {
			m.At = m.At.Add(shift)
			events += len(tr.Observe(m))
		}
		if i%variants == variants-1 {
			tr.Expire(flowBase.Add(shift + 30*time.Minute))
		}
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkObserveBusy is BenchmarkObserveParsed at a busy proxy's steady state: a new Call-ID
// for every call, 2,000 calls a second, Expire called as the pipeline calls it, and the tracker
// as full as that keeps it (every call held for its grace after it ends: about 50,000 calls).
// What a call costs there, with the calls map, the deadlines and the heap that large, is what
// translation costs a proxy under load.
func BenchmarkObserveBusy(b *testing.B) {
	msgs := loadFlow(b, filepath.Join("testdata", "flows", "inbound_answered_caller_bye.sip"))
	p := newParser()
	var ids []*sip.CallIDHeader
	for i := range msgs {
		msg, err := p.ParseSIP(msgs[i].Data)
		if err != nil {
			b.Fatal(err)
		}
		msgs[i].SIP = msg
		for _, h := range msg.(headerer).Headers() {
			if id, ok := h.(*sip.CallIDHeader); ok {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) != len(msgs) {
		b.Fatalf("%d Call-IDs in %d messages", len(ids), len(msgs))
	}
	tr := newTestTracker(b)
	const every = time.Second / 2000
	events := 0
	var evs []event.Event // reused, as the pipeline reuses its slice
	call := func(n int) {
		id := sip.CallIDHeader("busy-" + itoa(n) + "@203.0.113.5")
		for _, h := range ids {
			*h = id
		}
		shift := time.Duration(n) * every
		for _, m := range msgs {
			m.At = m.At.Add(shift)
			evs = tr.ObserveAppend(evs[:0], m)
			events += len(evs)
		}
		if n%64 == 63 {
			tr.Expire(msgs[len(msgs)-1].At.Add(shift))
		}
	}
	const warm = 100_000
	for n := range warm {
		call(n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	events = 0
	for i := 0; i < b.N; i++ {
		call(warm + i)
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
	b.ReportMetric(float64(tr.Stats().Calls), "calls-held")
}
