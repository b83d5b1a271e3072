package hep

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func addFixtures(f *testing.F) {
	files, _ := filepath.Glob("testdata/kamailio-*.hep")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	p := samplePacket()
	b, err := Encode(&p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("HEP3\x00\x06"))
	f.Add([]byte{2, 16, 2, 17})
}

// FuzzDecode: Decode never panics, fails only with its two kinds of error, and a
// packet it accepts survives Encode and Decode again unchanged.
func FuzzDecode(f *testing.F) {
	addFixtures(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := Decode(in)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Decode error of no known kind: %v", err)
			}
			return
		}
		b, err := Encode(&p)
		if err != nil {
			t.Fatalf("Encode of a decoded packet: %v", err)
		}
		if len(b) > len(in) {
			t.Fatalf("re-encoded packet of %d bytes is longer than the %d decoded", len(b), len(in))
		}
		q, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode of the re-encoded packet: %v", err)
		}
		if !equalPackets(p, q) {
			t.Fatalf("round trip changed the packet:\n got %+v\nwant %+v", q, p)
		}
	})
}

// FuzzReader: the framer never panics, never returns a packet over its maximum
// or one whose length field disagrees with it, and ends every stream.
func FuzzReader(f *testing.F) {
	addFixtures(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 1024
		r, err := NewReader(bytes.NewReader(in), max)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for {
			b, err := r.Next()
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) {
					t.Fatalf("Next error of no known kind: %v", err)
				}
				return
			}
			if len(b) > max || len(b) < HeaderLen || int(b[4])<<8|int(b[5]) != len(b) {
				t.Fatalf("packet of %d bytes, length field %d", len(b), int(b[4])<<8|int(b[5]))
			}
			total += len(b)
			if total > len(in) {
				t.Fatalf("returned %d bytes from a stream of %d", total, len(in))
			}
		}
	})
}
