// Command hepcapture writes every UDP datagram it receives on one address to a
// file of its own, in order of arrival. It is the listener regenerate.sh runs to
// record the HEP fixtures beside it; it lives under testdata so that the Go
// tooling's ./... patterns leave it out of builds and tests.
//
//	go run ./translators/sip/hep/testdata/hepcapture -listen 127.0.0.1:9060 -out DIR -count 13
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9060", "UDP address to listen on")
	out := flag.String("out", ".", "directory to write the datagrams to")
	count := flag.Int("count", 0, "stop after this many datagrams (0: only on -idle)")
	idle := flag.Duration("idle", 5*time.Second, "stop after this long without a datagram")
	flag.Parse()
	if err := run(*listen, *out, *count, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "hepcapture:", err)
		os.Exit(1)
	}
}

func run(listen, out string, count int, idle time.Duration) error {
	conn, err := net.ListenPacket("udp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer conn.Close()
	fmt.Fprintln(os.Stderr, "hepcapture: listening on", conn.LocalAddr())
	buf := make([]byte, 65535)
	for n := 0; count == 0 || n < count; n++ {
		if err := conn.SetReadDeadline(time.Now().Add(idle)); err != nil {
			return fmt.Errorf("set deadline: %w", err)
		}
		size, from, err := conn.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				fmt.Fprintf(os.Stderr, "hepcapture: idle, %d datagrams\n", n)
				return nil
			}
			return fmt.Errorf("read: %w", err)
		}
		name := filepath.Join(out, fmt.Sprintf("%02d.hep", n+1))
		if err := os.WriteFile(name, buf[:size], 0o644); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		fmt.Fprintf(os.Stderr, "hepcapture: %s: %d bytes from %s\n", name, size, from)
	}
	return nil
}
