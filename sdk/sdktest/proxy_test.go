package sdktest_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/callwire/callwire/sdk/sdktest"
)

// echo serves a line-echo server and returns its address.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line to addr and reads the echo, giving up after wait. A round trip
// expected to succeed gets a generous wait, so that a busy machine cannot fail it; one expected
// to fail (a hung proxy never answers) gets a short one, which only makes the test quicker.
func roundTrip(addr string, wait time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

func TestProxyCutRestoreHang(t *testing.T) {
	const answers, fails = 10 * time.Second, 300 * time.Millisecond
	p := sdktest.NewProxy(t, echo(t))
	if err := roundTrip(p.Addr(), answers); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := roundTrip(p.Addr(), fails); err == nil {
		t.Fatal("a cut proxy still answered")
	}
	p.Restore()
	if err := roundTrip(p.Addr(), answers); err != nil {
		t.Fatalf("after restore: %v", err)
	}
	p.Hang()
	if err := roundTrip(p.Addr(), fails); err == nil {
		t.Fatal("a hung proxy answered")
	}
	if got := p.URL("redis://user@db.example:6379/0"); got != "redis://user@"+p.Addr()+"/0" {
		t.Errorf("URL = %s", got)
	}
}
