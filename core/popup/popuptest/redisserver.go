package popuptest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// RedisServer is a redis-server process of a test's own, on a loopback port chosen before the
// process starts, so that a test can point a broker at a Redis that is not there yet and start
// it later. Unlike the shared server of RedisURL, it may be stopped and started at will.
type RedisServer struct {
	t    testing.TB
	port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the running process has exited
	logs   string        // the running process's output file
}

// NewRedisServer reserves a free loopback port for a redis-server and returns it, not started.
// It skips t with a loud message when the redis-server binary is not on PATH, or fails it when
// EnvRequire=1 is set. A process still running when the test ends is stopped.
func NewRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		const why = "this test needs the redis-server binary on PATH (Debian: apt-get install redis-server)"
		if os.Getenv(EnvRequire) == "1" {
			t.Fatal("popuptest: " + why + ", and " + EnvRequire + "=1")
		}
		t.Skip("popuptest: SKIPPING: " + why)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &RedisServer{t: t, port: port}
	t.Cleanup(s.Stop)
	return s
}

// URL is the redis:// URL of the server, database 0.
func (s *RedisServer) URL() string {
	return "redis://" + s.Addr() + "/0"
}

// Addr is the server's host:port.
func (s *RedisServer) Addr() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// Start runs redis-server on the reserved port, without persistence, and returns once it accepts
// connections. It fails t when the server does not come up within 30 seconds.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.t.Fatal("popuptest: redis-server is running already")
	}
	dir := s.t.TempDir()
	s.logs = filepath.Join(dir, "redis.log")
	out, err := os.Create(s.logs)
	if err != nil {
		s.t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", dir)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("popuptest: start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			s.cmd = nil
			s.t.Fatalf("popuptest: redis-server exited at start:\n%s", s.output())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("popuptest: redis-server did not accept connections on %s within 30s:\n%s", s.Addr(), s.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server, if it runs, and waits for it to exit. It is safe to call more than
// once.
func (s *RedisServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// output is what the last process printed, for failure messages.
func (s *RedisServer) output() string {
	b, _ := os.ReadFile(s.logs)
	return string(b)
}
