package hep

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
)

func kamailioStream(t testing.TB) (stream []byte, packets [][]byte) {
	t.Helper()
	files, err := filepath.Glob("testdata/kamailio-*.hep")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		packets = append(packets, b)
		stream = append(stream, b...)
	}
	return stream, packets
}

func TestReaderSplitsAStream(t *testing.T) {
	stream, packets := kamailioStream(t)
	readers := []struct {
		name string
		r    io.Reader
	}{
		{"whole", bytes.NewReader(stream)},
		{"a byte at a time", iotest.OneByteReader(bytes.NewReader(stream))},
		{"half reads", iotest.HalfReader(bytes.NewReader(stream))},
	}
	for _, tt := range readers {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewReader(tt.r, MaxPacketLen)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range packets {
				got, err := r.Next()
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("packet %d differs", i)
				}
				if _, err := Decode(got); err != nil {
					t.Fatalf("packet %d: Decode: %v", i, err)
				}
			}
			if _, err := r.Next(); err != io.EOF {
				t.Errorf("after the last packet: %v, want io.EOF", err)
			}
		})
	}
}

func TestReaderStopsOnGarbage(t *testing.T) {
	stream, packets := kamailioStream(t)
	first := len(packets[0])
	long := packet(chunk(0, ChunkPayload, make([]byte, 800)))
	tests := []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"garbage after a packet", append(bytes.Clone(stream[:first]), "GET / HTTP/1.1\r\n\r\n"...), MaxPacketLen, ErrMalformed},
		{"HEPv2 after a packet", append(bytes.Clone(stream[:first]), 2, 16, 2, 17, 0, 0), MaxPacketLen, ErrUnsupported},
		{"length under a header", append(bytes.Clone(stream[:first]), "HEP3\x00\x05"...), MaxPacketLen, ErrMalformed},
		{"length over the maximum", append(bytes.Clone(stream[:first]), long...), 700, ErrMalformed},
		{"cut inside a header", stream[:first+3], MaxPacketLen, io.ErrUnexpectedEOF},
		{"cut inside a packet", stream[:first+10], MaxPacketLen, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			max := tt.max
			if first > max {
				t.Fatalf("first fixture of %d bytes is over the test's maximum %d", first, max)
			}
			r, err := NewReader(bytes.NewReader(tt.in), max)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Next(); err != nil {
				t.Fatalf("first packet: %v", err)
			}
			_, err = r.Next()
			if !errors.Is(err, tt.want) {
				t.Fatalf("second Next: %v, want %v", err, tt.want)
			}
			if _, again := r.Next(); !errors.Is(again, tt.want) {
				t.Errorf("Next after the error: %v, want the same error", again)
			}
		})
	}
}

func TestNewReaderValidates(t *testing.T) {
	tests := []struct {
		name string
		r    io.Reader
		max  int
	}{
		{"nil reader", nil, MaxPacketLen},
		{"max of a header", bytes.NewReader(nil), HeaderLen},
		{"max over the field", bytes.NewReader(nil), MaxPacketLen + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewReader(tt.r, tt.max); err == nil {
				t.Error("NewReader accepted it")
			}
		})
	}
}
