package hep

import (
	"os"
	"testing"
)

// BenchmarkDecode decodes a real Kamailio INVITE datagram; it must not allocate.
func BenchmarkDecode(b *testing.B) {
	in, err := os.ReadFile("testdata/kamailio-01.hep")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend encodes the same INVITE into a reused buffer.
func BenchmarkAppend(b *testing.B) {
	in, err := os.ReadFile("testdata/kamailio-01.hep")
	if err != nil {
		b.Fatal(err)
	}
	p, err := Decode(in)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, MaxPacketLen)
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = Append(buf[:0], &p); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDecodeDoesNotAllocate(t *testing.T) {
	in, err := os.ReadFile("testdata/kamailio-01.hep")
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = Decode(in) }); n != 0 {
		t.Errorf("Decode allocates %v times per datagram, want 0", n)
	}
}
