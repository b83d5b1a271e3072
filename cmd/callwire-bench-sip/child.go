package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/translators/netaddr"
	"github.com/callwire/callwire/translators/sip"
	"github.com/callwire/callwire/translators/sip/proxy"
)

// A proxy under test runs in a process of its own, as the agent runs a translator: the two
// proxies then share neither a heap nor a garbage collector, and the idle one costs the other
// nothing but its timers. The bench re-executes itself with -serve; the child prints "ready" on
// stdout once it listens, runs until its standard input closes, and then prints the number of
// events it emitted and, as a JSON line, how it spent its CPU time (cpuClasses).

// childOptions configure a proxy process.
type childOptions struct {
	serve      string // "off": the proxy alone; "on": the whole sip translator
	listen     int
	pbx, trunk string
	cpuprofile string
	memprofile string
}

// serveChild runs one proxy until stdin closes, and reports on stdout.
func serveChild(ctx context.Context, o childOptions) error {
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if o.memprofile != "" {
		defer func() {
			if f, err := os.Create(o.memprofile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the parent closes our stdin to stop us
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	listen := fmt.Sprintf("udp://127.0.0.1:%d", o.listen)
	done := make(chan error, 1)
	em := &countingEmitter{}
	switch o.serve {
	case "off":
		ls, err := netaddr.ParseListens("listen", []string{listen}, 5060)
		if err != nil {
			return err
		}
		pbx, err := netaddr.ParseHostPort(o.pbx, 5060)
		if err != nil {
			return fmt.Errorf("pbx: %w", err)
		}
		trunk, err := netaddr.ParseHostPort(o.trunk, 5060)
		if err != nil {
			return fmt.Errorf("trunk: %w", err)
		}
		p, err := proxy.New(proxy.Config{Listen: ls, PBX: pbx, Trunk: trunk, Logger: quiet})
		if err != nil {
			return err
		}
		go func() { done <- p.Run(ctx) }()
		select {
		case <-p.Ready():
		case err := <-done:
			return fmt.Errorf("proxy: %w", err)
		}
	case "on":
		cfg, _ := json.Marshal(map[string]any{
			"mode": "proxy", "listen": []string{listen},
			"pbx": o.pbx, "trunk": o.trunk, "numbers": []string{"+15551230100"}, "default_country": "US",
		})
		tr := sip.New()
		tr.Logger = quiet
		go func() { done <- tr.Run(ctx, cfg, em) }()
		time.Sleep(300 * time.Millisecond) // the translator's proxy binds; UDP cannot be probed
	default:
		return fmt.Errorf("-serve %q: want off or on", o.serve)
	}
	fmt.Println("ready")
	if err := <-done; err != nil && ctx.Err() == nil {
		return err
	}
	fmt.Println(em.n.Load())
	out, _ := json.Marshal(readCPUClasses())
	fmt.Println(string(out))
	return nil
}

// cpuClasses is how a proxy process spent its CPU time, from runtime/metrics: all of it and the
// garbage collector's share (marking, assists, pauses).
type cpuClasses struct {
	Total float64 `json:"total"`
	GC    float64 `json:"gc"`
	// Switches counts the context switches of the process's threads (Linux): how often a
	// thread was put to sleep and woken, which handing work between goroutines costs.
	Switches uint64 `json:"switches"`
}

func readCPUClasses() cpuClasses {
	s := []metrics.Sample{{Name: "/cpu/classes/total:cpu-seconds"}, {Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/idle:cpu-seconds"}}
	metrics.Read(s)
	v := func(i int) float64 {
		if s[i].Value.Kind() != metrics.KindFloat64 {
			return 0
		}
		return s[i].Value.Float64()
	}
	// total counts the idle time of every P; what the process used is the rest.
	return cpuClasses{Total: v(0) - v(2), GC: v(1), Switches: contextSwitches()}
}

// contextSwitches sums the voluntary and involuntary context switches of this process's
// threads, from /proc/self/task/*/status; 0 where there is no such file.
func contextSwitches() uint64 {
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	var n uint64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
	}
	return n
}

// countingEmitter takes every event at once and counts it, as an agent with a fast outbox would.
// Like the emitter translator.Serve gives a translator's Run, it is a translator.JSONEmitter: the
// sip translator then encodes each event itself, and that encoding is counted in the translating
// proxy's cost; the write to the agent's socket is not.
type countingEmitter struct {
	n    atomic.Uint64
	bufs sync.Pool // *[]byte
}

// Emit encodes e, as the agent's emitter does, and counts it.
func (c *countingEmitter) Emit(ctx context.Context, e event.Event) error {
	buf, _ := c.bufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	data, err := e.AppendJSON((*buf)[:0])
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	err = c.EmitJSON(ctx, data)
	*buf = data
	c.bufs.Put(buf)
	return err
}

// EmitJSON counts an encoded event.
func (c *countingEmitter) EmitJSON(_ context.Context, data []byte) error {
	if len(data) == 0 {
		return errors.New("empty event")
	}
	c.n.Add(1)
	return nil
}

// child is a running proxy process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startChild runs this program again with -serve and waits until the proxy listens.
func startChild(ctx context.Context, o childOptions) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-serve", o.serve, "-listen", strconv.Itoa(o.listen), "-pbx", o.pbx, "-trunk", o.trunk}
	if o.cpuprofile != "" {
		args = append(args, "-cpuprofile", o.cpuprofile)
	}
	if o.memprofile != "" {
		args = append(args, "-memprofile", o.memprofile)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	if !c.out.Scan() || c.out.Text() != "ready" {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("proxy %s did not start", o.serve)
	}
	return c, nil
}

// cpu returns the CPU time (user and system) the process has used so far; false where it cannot
// be read (not Linux).
func (c *child) cpu() (time.Duration, bool) { return procCPU(c.cmd.Process.Pid) }

// procCPU returns the CPU time (user and system) process pid has used so far, read from
// /proc/<pid>/stat; false where there is no such file (not Linux).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces: count from its end.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseUint(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// stop ends the process and returns the events it emitted and how it spent its CPU time.
func (c *child) stop() (uint64, cpuClasses, error) {
	_ = c.stdin.Close()
	var n uint64
	var cpu cpuClasses
	if c.out.Scan() {
		n, _ = strconv.ParseUint(strings.TrimSpace(c.out.Text()), 10, 64)
	}
	if c.out.Scan() {
		_ = json.Unmarshal(c.out.Bytes(), &cpu)
	}
	return n, cpu, c.cmd.Wait()
}
