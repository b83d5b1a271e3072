package siptest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Kamailio is a running Kamailio: a stateful, record-routing proxy on 127.0.0.1:Port (UDP and
// TCP) that relays every initial request to its next hop and mirrors every SIP message it
// receives and sends, requests and replies, as HEPv3 to a collector.
type Kamailio struct {
	Port int // where it listens, UDP and TCP
	cmd  *exec.Cmd
	log  *syncBuffer
}

// KamailioConfig is what StartKamailio needs.
type KamailioConfig struct {
	NextHop   string    // host:port that initial requests are relayed to (the PBX)
	Transport Transport // transport towards NextHop; UDP when empty
	HEP       string    // host:port of the HEPv3 collector (UDP)
	Port      int       // where Kamailio listens (UDP and TCP); 0: one from Ports
	Ports     *Ports    // where Port is taken when 0; nil: FreePort (not safe beside parallel peers)
	// NoTrying stops Kamailio answering an initial INVITE with its own 100 Trying, so that a
	// caller whose callee is slow keeps retransmitting over UDP (as it would with no proxy) and
	// the HEP copies show the caller's retransmissions as well as Kamailio's.
	NoTrying bool
}

// kamailioCfg is the routing script: max-forwards, in-dialog requests by loose routing,
// CANCEL matched to its INVITE transaction, initial requests record-routed and relayed
// statefully. siptrace's trace_mode 1 mirrors every message through the core's events.
const kamailioCfg = `#!KAMAILIO
debug=2
log_stderror=yes
children=1
tcp_children=1
auto_aliases=no
listen=udp:127.0.0.1:%[1]d
listen=tcp:127.0.0.1:%[1]d
mpath="%[4]s"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "siputils.so"
loadmodule "textops.so"
loadmodule "siptrace.so"
modparam("rr", "enable_full_lr", 1)
modparam("siptrace", "duplicate_uri", "sip:%[2]s")
modparam("siptrace", "hep_mode_on", 1)
modparam("siptrace", "hep_version", 3)
modparam("siptrace", "trace_on", 1)
modparam("siptrace", "trace_to_database", 0)
modparam("siptrace", "trace_mode", 1)

request_route {
	if (!mf_process_maxfwd_header("10")) {
		sl_send_reply("483", "Too Many Hops");
		exit;
	}
	if (has_totag()) {
		if (loose_route()) {
			if (!t_relay()) { sl_reply_error(); }
			exit;
		}
		if (is_method("ACK")) {
			if (t_check_trans()) { t_relay(); }
			exit;
		}
		sl_send_reply("404", "Not here");
		exit;
	}
	if (is_method("CANCEL")) {
		if (t_check_trans()) { t_relay(); }
		exit;
	}
	t_check_trans();
	remove_hf("Route");
	record_route();
	$du = "sip:%[3]s;transport=%[5]s";%[6]s
	if (!t_relay()) { sl_reply_error(); }
	exit;
}
`

// StartKamailio writes a config for c, starts kamailio in the foreground (-DD -E) as a child of
// the test, waits until it listens, and stops it at the end of the test. Its log goes to the test
// log when the test fails.
func StartKamailio(ctx context.Context, t testing.TB, kamailio string, c KamailioConfig) *Kamailio {
	t.Helper()
	if c.Transport == "" {
		c.Transport = UDP
	}
	dir := t.TempDir()
	port := c.Port
	if port == 0 && c.Ports != nil {
		port = c.Ports.Take(t)
	} else if port == 0 {
		port = FreePort(t)
	}
	k := &Kamailio{Port: port, log: &syncBuffer{}}
	noTrying := ""
	if c.NoTrying {
		noTrying = "\n\tt_set_auto_inv_100(0);"
	}
	cfg := fmt.Sprintf(kamailioCfg, k.Port, c.HEP, c.NextHop, modulesDir(), c.Transport.Name(), noTrying)
	path := filepath.Join(dir, "kamailio.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	k.cmd = exec.CommandContext(ctx, kamailio, "-f", path, "-DD", "-E", "-Y", dir, "-m", "32", "-M", "8", "-n", "1")
	k.cmd.Dir = dir
	k.cmd.Stdout, k.cmd.Stderr = k.log, k.log
	k.cmd.WaitDelay = 5 * time.Second
	ownGroup(k.cmd)
	if err := k.cmd.Start(); err != nil {
		t.Fatalf("start kamailio: %v", err)
	}
	t.Cleanup(func() {
		_ = k.cmd.Process.Signal(os.Interrupt)
		_ = k.cmd.Wait()
		killGroup(k.cmd) // the workers it forked, whatever became of the main process
		if t.Failed() {
			t.Logf("--- kamailio log ---\n%s", k.log.String())
		}
	})
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(k.Port))
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return k
		}
		if k.cmd.ProcessState != nil {
			t.Fatalf("kamailio exited: %s", k.log.String())
		}
		select {
		case <-wctx.Done():
			t.Fatalf("kamailio does not listen on %s: %v\n%s", addr, wctx.Err(), k.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Addr is host:port of the proxy.
func (k *Kamailio) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.Port)) }

func modulesDir() string {
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu/kamailio/modules", "/usr/lib/aarch64-linux-gnu/kamailio/modules", "/usr/lib/kamailio/modules", "/usr/local/lib64/kamailio/modules", "/usr/local/lib/kamailio/modules"} {
		if _, err := os.Stat(filepath.Join(d, "tm.so")); err == nil {
			return d
		}
	}
	return "/usr/lib/kamailio/modules"
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// HEPCounter is a UDP listener on 127.0.0.1 that counts datagrams starting with "HEP3" and keeps
// a copy of each (up to MaxKeptDatagrams) in arrival order. It does not decode them.
type HEPCounter struct {
	conn        net.PacketConn
	hep3, other atomic.Int64
	mu          sync.Mutex
	kept        [][]byte
}

// MaxKeptDatagrams bounds how many HEP3 datagrams a HEPCounter keeps; it counts the rest.
const MaxKeptDatagrams = 10000

// ListenHEP starts a HEPCounter on a free port, closed at the end of the test.
func ListenHEP(t testing.TB) *HEPCounter {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hep listener: %v", err)
	}
	h := &HEPCounter{conn: conn}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			if n >= 4 && string(buf[:4]) == "HEP3" {
				h.mu.Lock()
				if len(h.kept) < MaxKeptDatagrams {
					h.kept = append(h.kept, bytes.Clone(buf[:n]))
				}
				h.mu.Unlock()
				h.hep3.Add(1)
			} else {
				h.other.Add(1)
			}
		}
	}()
	t.Cleanup(func() { _ = conn.Close(); <-done })
	return h
}

// Addr is host:port of the listener.
func (h *HEPCounter) Addr() string { return h.conn.LocalAddr().String() }

// Counts returns how many datagrams started with "HEP3" and how many did not.
func (h *HEPCounter) Counts() (hep3, other int64) { return h.hep3.Load(), h.other.Load() }

// Datagrams returns copies of the HEP3 datagrams received so far, in arrival order.
func (h *HEPCounter) Datagrams() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([][]byte, len(h.kept))
	for i, d := range h.kept {
		out[i] = bytes.Clone(d)
	}
	return out
}

// WaitQuiet waits until at least min HEP3 datagrams have arrived and then none for quiet, or until
// ctx is done, and reports how many arrived.
func (h *HEPCounter) WaitQuiet(ctx context.Context, min int64, quiet time.Duration) int64 {
	last, lastAt := h.hep3.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return h.hep3.Load()
		case <-time.After(20 * time.Millisecond):
		}
		n := h.hep3.Load()
		if n != last {
			last, lastAt = n, time.Now()
			continue
		}
		if n >= min && time.Since(lastAt) >= quiet {
			return n
		}
	}
}
