package siptest

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestReplayCapture sends a committed capture to a UDP and a TCP listener: the datagrams, and the
// TCP stream, are the capture's packets unchanged and in order.
func TestReplayCapture(t *testing.T) {
	path := FlowNamed(t, "basic").Capture()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no capture yet: %v", err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	packets, err := SplitCapture(want)
	if err != nil || len(packets) == 0 {
		t.Fatalf("split: %d packets, %v", len(packets), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	t.Run("udp", func(t *testing.T) {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		ReplayCapture(ctx, t, path, "udp", pc.LocalAddr().String())
		buf := make([]byte, 65535)
		for i, p := range packets {
			_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				t.Fatalf("datagram %d: %v", i+1, err)
			}
			if !bytes.Equal(buf[:n], p) {
				t.Fatalf("datagram %d differs from the capture's packet", i+1)
			}
		}
	})
	t.Run("tcp", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		got := make(chan []byte, 1)
		go func() {
			c, err := l.Accept()
			if err != nil {
				got <- nil
				return
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			b, _ := io.ReadAll(c)
			got <- b
		}()
		ReplayCapture(ctx, t, path, "tcp", l.Addr().String())
		if b := <-got; !bytes.Equal(b, want) {
			t.Fatalf("the stream (%d bytes) is not the capture (%d bytes)", len(b), len(want))
		}
	})
}
