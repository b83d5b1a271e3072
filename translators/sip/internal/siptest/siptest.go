// Package siptest runs real SIP peers for the SIP observer's tests: sipp scenario pairs (a UAC
// playing the carrier trunk, a UAS playing the PBX) and Kamailio as a stateful, record-routing
// proxy that mirrors every message as HEPv3. Everything listens on 127.0.0.1 only, on ports
// chosen free at run time, and every program is a real child process bounded by the test's
// context. Production code never imports this package.
//
// Without sipp or kamailio the tests skip loudly; with CALLWIRE_REQUIRE_SIP=1 (set by .ci/run
// once both are installed) they fail instead.
package siptest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireVariable names the switch that turns a missing sipp or kamailio into a test failure.
const RequireVariable = "CALLWIRE_REQUIRE_SIP"

// Programs locates sipp and kamailio. It skips the test when either is missing, or fails it when
// RequireVariable is set to 1.
func Programs(t testing.TB) (sipp, kamailio string) {
	t.Helper()
	sipp, errS := exec.LookPath("sipp")
	kamailio, errK := exec.LookPath("kamailio")
	if errK != nil {
		if _, err := os.Stat("/usr/sbin/kamailio"); err == nil {
			kamailio, errK = "/usr/sbin/kamailio", nil
		}
	}
	if err := errors.Join(errS, errK); err != nil {
		msg := fmt.Sprintf("SIP RIG NOT RUN: sipp and kamailio are needed (Debian packages sip-tester and kamailio): %v", err)
		if os.Getenv(RequireVariable) == "1" {
			t.Fatal(msg + " (" + RequireVariable + "=1)")
		}
		t.Skip(msg)
	}
	return sipp, kamailio
}

// FreePort returns a port on 127.0.0.1 that is free for both UDP and TCP at the moment of the
// call. Another process may still take it before the caller binds it; callers that start a
// peer on it should be ready to retry.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		_ = l.Close()
		if err != nil {
			continue
		}
		_ = u.Close()
		return port
	}
	t.Fatal("free port: no port free for both UDP and TCP after 50 tries")
	return 0
}

// Transport is sipp's -t value: U1 is UDP on one socket, T1 is TCP on one connection.
type Transport string

// The transports the rig runs.
const (
	UDP Transport = "u1"
	TCP Transport = "t1"
)

// Name is the transport as Kamailio and SIP URIs spell it.
func (tr Transport) Name() string {
	if tr == TCP {
		return "tcp"
	}
	return "udp"
}

// Pair describes one sipp scenario pair run: the UAS (the PBX) answers on UASPort, the UAC (the
// carrier trunk) sends its calls to Target (the UAS itself, or a proxy in front of it).
type Pair struct {
	UAC, UAS  string        // scenario files
	Calls     int           // -m: calls the UAC places and the UAS expects
	Rate      int           // -r: calls per second; 0 means 10
	Transport Transport     // UDP when empty
	Timeout   time.Duration // sipp's -timeout for each side; 30s when zero
	UASPort   int           // 0: a free port
	UACPort   int           // 0: a free port
	Target    string        // host:port the UAC sends to; empty: the UAS
	CallID    string        // sipp's -cid_str for the UAC's Call-IDs (%u is the call number); empty: sipp's own
	Ports     *Ports        // where Prepare takes the ports left at 0; nil: FreePort (not safe beside parallel pairs)
}

// Side is the outcome of one sipp process.
type Side struct {
	ExitCode   int    // 0 all calls succeeded, 1 some failed, 97/99/255 see sipp(1)
	Successful int    // SuccessfulCall(C) from the stat file
	Failed     int    // FailedCall(C) from the stat file
	MessageLog string // path of -message_file
	ErrorLog   string // path of -error_file
}

// Result is the outcome of a pair: both sides.
type Result struct{ UAC, UAS Side }

// OK reports whether every call succeeded on both sides.
func (r Result) OK(calls int) bool {
	return r.UAC.ExitCode == 0 && r.UAS.ExitCode == 0 && r.UAC.Successful == calls && r.UAS.Successful == calls &&
		r.UAC.Failed == 0 && r.UAS.Failed == 0
}

// Prepare returns a Pair with its ports chosen, ready to Run. Callers that put a proxy between the
// two sides read UASPort to point the proxy at the PBX, then set Target.
func Prepare(t testing.TB, p Pair) Pair {
	t.Helper()
	if p.Calls <= 0 {
		p.Calls = 1
	}
	if p.Rate <= 0 {
		p.Rate = 10
	}
	if p.Transport == "" {
		p.Transport = UDP
	}
	if p.Timeout <= 0 {
		p.Timeout = 30 * time.Second
	}
	take := FreePort
	if p.Ports != nil {
		take = p.Ports.Take
	}
	if p.UASPort == 0 {
		p.UASPort = take(t)
	}
	if p.UACPort == 0 {
		p.UACPort = take(t)
	}
	return p
}

// Run starts the UAS, waits until it listens, runs the UAC against p.Target (or the UAS), and
// waits for both to exit. On any failed call both sides' message logs go to the test log.
func Run(ctx context.Context, t testing.TB, sipp string, p Pair) Result {
	t.Helper()
	p = Prepare(t, p)
	target := p.Target
	if target == "" {
		target = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.UASPort))
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(ctx, p.Timeout+10*time.Second)
	defer cancel()
	uas := start(ctx, t, sipp, dir, "uas", p.UAS, p, p.UASPort, "")
	if !waitListening(ctx, t, p.Transport, p.UASPort, uas.done) {
		// Not a test failure by itself: the caller sees a failed Result, and may try again.
		r := Result{UAS: uas.wait(t)}
		errs, _ := os.ReadFile(r.UAS.ErrorLog)
		t.Logf("sipp uas %s exited %d before it listened: %s\n%s", filepath.Base(p.UAS), r.UAS.ExitCode,
			strings.TrimSpace(string(errs)), tail(uas.out.String(), 2000))
		r.UAC.ExitCode = -1
		return r
	}
	uac := start(ctx, t, sipp, dir, "uac", p.UAC, p, p.UACPort, target)
	var r Result
	r.UAC = uac.wait(t)
	r.UAS = uas.wait(t)
	if !r.OK(p.Calls) {
		t.Logf("sipp pair %s / %s over %s: uac %+v, uas %+v", filepath.Base(p.UAC), filepath.Base(p.UAS), p.Transport, r.UAC, r.UAS)
		for _, f := range []string{r.UAC.ErrorLog, r.UAC.MessageLog, r.UAS.ErrorLog, r.UAS.MessageLog} {
			b, _ := os.ReadFile(f)
			t.Logf("--- %s ---\n%s", f, b)
		}
	}
	return r
}

type proc struct {
	cmd          *exec.Cmd
	out          bytes.Buffer
	stat, msg, e string
	name         string
	done         chan struct{} // closed once the process has exited and err is set
	err          error
}

func start(ctx context.Context, t testing.TB, sipp, dir, role, scenario string, p Pair, port int, target string) *proc {
	t.Helper()
	pr := &proc{name: role,
		stat: filepath.Join(dir, role+"_stat.csv"),
		msg:  filepath.Join(dir, role+"_messages.log"),
		e:    filepath.Join(dir, role+"_errors.log")}
	scenario = stretched(t, dir, role, scenario)
	args := []string{"-sf", scenario, "-i", "127.0.0.1", "-p", strconv.Itoa(port),
		"-t", string(p.Transport), "-m", strconv.Itoa(p.Calls), "-nostdin",
		"-timeout", strconv.Itoa(int(p.Timeout/time.Second)) + "s", "-timeout_error",
		"-trace_stat", "-stf", pr.stat, "-fd", "1",
		"-trace_err", "-error_file", pr.e,
		"-trace_msg", "-message_file", pr.msg,
		"-max_socket", "64"}
	if p.Ports != nil {
		// sipp binds RTP sockets at startup: audio at the first free port from -mp (6000 by
		// default), video two above it without a retry. Two sipps starting at once can take each
		// other's video port, and the loser exits 254 ("Unable to bind video RTP socket"). A block
		// of four ports of the pair's own range keeps every sipp's media apart.
		args = append(args, "-mp", strconv.Itoa(p.Ports.TakeBlock(t, 4)))
	}
	if target != "" {
		if p.CallID != "" {
			args = append(args, "-cid_str", p.CallID)
		}
		args = append(args, "-r", strconv.Itoa(p.Rate), target)
	}
	pr.cmd = exec.CommandContext(ctx, sipp, args...)
	pr.cmd.Dir = dir
	pr.cmd.Stdout, pr.cmd.Stderr = &pr.out, &pr.out
	pr.cmd.WaitDelay = 5 * time.Second
	if err := pr.cmd.Start(); err != nil {
		t.Fatalf("start sipp %s: %v", role, err)
	}
	pr.done = make(chan struct{})
	go func() {
		pr.err = pr.cmd.Wait()
		close(pr.done)
	}()
	t.Cleanup(func() {
		select {
		case <-pr.done:
		default:
			_ = pr.cmd.Process.Kill()
			<-pr.done
		}
	})
	return pr
}

// stretch is how many times longer than a scenario says a rig's sipp waits before it retransmits
// over UDP. The scenarios keep RFC 3261's T1 (500 ms), what a real trunk and PBX use, but on
// loopback nothing is lost: a retransmission in the rig only ever comes from a peer the machine
// paused for longer than T1, and a shared machine pauses processes for a second at a time. A late
// retransmission then reaches a sipp that has moved on, which aborts the call on the unexpected
// message (sipp even answers a retransmitted 401 with an ACK in the next transaction's branch).
// Stretched, a pause must last longer than 2 s to cause a retransmission at all.
const stretch = 4

// t1 is RFC 3261's round-trip estimate, the value the scenarios give every retransmission timer.
const t1 = 500

var (
	retransAttr = regexp.MustCompile(`retrans="(\d+)"`)
	pauseAttr   = regexp.MustCompile(`<pause milliseconds="(\d+)"`)
)

// stretched writes the scenario into dir as role.xml with every retransmission timer, and every
// pause of at least t1 (a peer that holds back its answer to provoke retransmissions), made stretch
// times longer, and returns the copy's path. Shorter pauses only order messages and stay as they
// are.
func stretched(t testing.TB, dir, role, scenario string) string {
	t.Helper()
	b, err := os.ReadFile(scenario)
	if err != nil {
		t.Fatalf("read sipp scenario: %v", err)
	}
	scale := func(re *regexp.Regexp, min int) func([]byte) []byte {
		return func(m []byte) []byte {
			sub := re.FindSubmatchIndex(m)
			ms, _ := strconv.Atoi(string(m[sub[2]:sub[3]]))
			if ms < min {
				return m
			}
			return slices.Concat(m[:sub[2]], []byte(strconv.Itoa(ms*stretch)), m[sub[3]:])
		}
	}
	b = retransAttr.ReplaceAllFunc(b, scale(retransAttr, 0))
	b = pauseAttr.ReplaceAllFunc(b, scale(pauseAttr, t1))
	out := filepath.Join(dir, role+".xml")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatalf("write sipp scenario: %v", err)
	}
	return out
}

func (pr *proc) wait(t testing.TB) Side {
	t.Helper()
	<-pr.done
	err := pr.err
	s := Side{MessageLog: pr.msg, ErrorLog: pr.e}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		s.ExitCode = ee.ExitCode()
	default:
		t.Errorf("sipp %s: %v", pr.name, err)
		s.ExitCode = -1
	}
	s.Successful, s.Failed = readStat(t, pr.stat)
	if s.ExitCode != 0 {
		t.Logf("sipp %s exited %d: %s", pr.name, s.ExitCode, tail(pr.out.String(), 2000))
	}
	return s
}

// readStat reads the cumulative successful and failed call counts from the last row of a sipp
// stat file (semicolon-separated, header first).
func readStat(t testing.TB, path string) (ok, failed int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("sipp stat file: %v", err)
		return 0, 0
	}
	var header, last []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), ";")
		if header == nil {
			header = f
			continue
		}
		if len(f) > 1 {
			last = f
		}
	}
	for i, h := range header {
		if i >= len(last) {
			break
		}
		switch h {
		case "SuccessfulCall(C)":
			ok, _ = strconv.Atoi(last[i])
		case "FailedCall(C)":
			failed, _ = strconv.Atoi(last[i])
		}
	}
	return ok, failed
}

// waitListening polls until something is bound to the port on the transport, bounded by ctx. It
// reports false when exited is closed first (the program that was to listen has stopped).
func waitListening(ctx context.Context, t testing.TB, tr Transport, port int, exited <-chan struct{}) bool {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for {
		if Listening(tr, port) {
			return true
		}
		select {
		case <-exited:
			return false
		case <-ctx.Done():
			t.Fatalf("nothing listens on %s/%s: %v", addr, tr.Name(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Listening reports whether something listens on port of 127.0.0.1 over the transport: for TCP,
// whether a connection is accepted (and closed at once); for UDP, whether a socket is bound there,
// which is all that can be told of UDP without sending the listener a datagram.
func Listening(tr Transport, port int) bool {
	if tr == TCP {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}
	return udpBound(port)
}

// udpBound reports whether a UDP socket is bound to port of 127.0.0.1 (or of any address),
// from the kernel's socket table. It must not find out by binding the port itself: a probe that
// holds the port for an instant makes the peer starting there fail to bind it (sipp exits 254,
// "Unable to bind main socket"). Where the table cannot be read (not Linux), it waits a moment
// and answers true.
func udpBound(port int) bool {
	want := fmt.Sprintf(":%04X", port)
	seen := false
	for _, table := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		seen = true
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 1 && strings.HasSuffix(f[1], want) {
				return true
			}
		}
	}
	if !seen {
		time.Sleep(300 * time.Millisecond)
		return true
	}
	return false
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Ports hands out ports of 127.0.0.1 from a fixed range, each at most once, checking that each is
// free for both UDP and TCP. Pairs run concurrently in one test never share a port, which
// FreePort (the kernel's pick, released again before the peer binds it) cannot promise: two
// concurrent FreePort calls may return the same port, and a peer's outgoing TCP connection may
// take it as its source port. Choose a range outside the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default) and apart from other tests'
// ranges. A Ports is safe for concurrent use.
type Ports struct {
	mu         sync.Mutex
	next, last int
}

// NewPorts returns a Ports handing out first..last (1024 < first <= last < 65536).
func NewPorts(first, last int) (*Ports, error) {
	if first <= 1024 || last >= 65536 || first > last {
		return nil, fmt.Errorf("ports: range %d-%d not within 1025-65535", first, last)
	}
	return &Ports{next: first, last: last}, nil
}

// Take returns the next port of the range that is free for UDP and TCP now, failing the test
// when the range is used up.
func (p *Ports) Take(t testing.TB) int {
	t.Helper()
	return p.TakeBlock(t, 1)
}

// TakeBlock returns the first of the next n consecutive ports of the range that are all free
// for UDP and TCP now, and hands none of them out again; it fails the test when the range is
// used up.
func (p *Ports) TakeBlock(t testing.TB, n int) int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for first := p.next; first+n-1 <= p.last; {
		ok := true
		for port := first; port < first+n; port++ {
			if !portFree(port) {
				first, ok = port+1, false
				break
			}
		}
		if ok {
			p.next = first + n
			return first
		}
	}
	p.next = p.last + 1
	t.Fatalf("ports: range used up at %d", p.last)
	return 0
}

// portFree reports whether port of 127.0.0.1 can be bound for both TCP and UDP now.
func portFree(port int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	_ = u.Close()
	return true
}
