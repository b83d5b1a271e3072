package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// setChildAttrs makes the kernel stop the server if the bench dies without cleaning up.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// cpuSample is the CPU time used so far by the bench itself, the server child and the local
// PostgreSQL processes.
type cpuSample struct {
	ok                      bool
	bench, server, postgres time.Duration
	// serverRSS and serverPeak are the server's resident memory now and at its highest so
	// far (VmRSS and VmHWM), and serverFile the part of serverRSS that is mapped files
	// (RssFile: mostly the program's code and read-only data), in bytes; 0 when unknown.
	serverRSS, serverPeak, serverFile int64
	// at is when the sample was taken. ran is the time the machine's kernel accounted to its
	// CPUs so far (busy, idle and steal alike, summed over the CPUs), and steal the part of it
	// the hypervisor reported as stolen; ranOK says whether /proc/stat told.
	at         time.Time
	ran, steal time.Duration
	ranOK      bool
	// benchIO and serverIO are the I/O system calls this process and the server child made so
	// far (/proc/<pid>/io); their ok is false where the system did not tell.
	benchIO, serverIO ioCount
}

// sampleCPU reads the CPU times of this process, of the process serverPID (0 for none) and of
// every process named postgres on this machine.
func sampleCPU(serverPID int) cpuSample {
	var s cpuSample
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return s
	}
	s.bench = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	s.benchIO = procIO("self")
	if serverPID > 0 {
		s.server, _ = procCPU(strconv.Itoa(serverPID))
		s.serverRSS, s.serverPeak, s.serverFile = procMemory(strconv.Itoa(serverPID))
		s.serverIO = procIO(strconv.Itoa(serverPID))
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid := filepath.Base(d)
		if t, name := procCPU(pid); name == "postgres" {
			s.postgres += t
		}
	}
	s.at = time.Now()
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		s.ran, s.steal, s.ranOK = machineTime(b)
	}
	s.ok = true
	return s
}

// machineTime reads /proc/stat's first line, the time all CPUs spent in each state since boot
// in USER_HZ: user, nice, system, idle, iowait, irq, softirq and steal (guest time is already
// in user). It returns their sum and the steal.
func machineTime(stat []byte) (ran, steal time.Duration, ok bool) {
	line, _, _ := bytes.Cut(stat, []byte{'\n'})
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, false
	}
	var ticks [8]int64
	for i := range ticks {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil || v < 0 {
			return 0, 0, false
		}
		ticks[i] = v
	}
	var sum int64
	for _, v := range ticks {
		sum += v
	}
	return time.Duration(sum) * time.Second / clockTicks, time.Duration(ticks[7]) * time.Second / clockTicks, true
}

// hostShare is the part of the CPUs' time between samples a and b that the machine's kernel
// never accounted (the host ran something else on them and did not report it as steal), plus
// the part it reported as steal: the share of the machine its host took. Process CPU times
// include the untold part (the process was on a CPU while the CPU was not running), so they
// grow with it. ok is false when /proc/stat did not tell.
func hostShare(a, b cpuSample, cpus int) (untold, steal float64, ok bool) {
	wall := b.at.Sub(a.at)
	if !a.ranOK || !b.ranOK || wall <= 0 || cpus <= 0 {
		return 0, 0, false
	}
	capacity := float64(wall) * float64(cpus)
	untold = max(0, 1-float64(b.ran-a.ran)/capacity)
	return untold, float64(b.steal-a.steal) / capacity, true
}

// procCPU returns the user+system CPU time and the command name of process pid.
func procCPU(pid string) (time.Duration, string) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, ""
	}
	// pid (comm) state ppid ... utime(14) stime(15); comm may hold spaces and parentheses.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return 0, ""
	}
	name := string(b[open+1 : end])
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return 0, name
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTicks, name
}

// procMemory returns process pid's resident memory now, at its peak, and the part of it now that
// is file pages (VmRSS, VmHWM and RssFile of /proc/<pid>/status), in bytes; 0 when unknown.
func procMemory(pid string) (rss, peak, file int64) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0, 0
	}
	return parseMemory(string(b))
}

// parseMemory reads VmRSS, VmHWM and RssFile, in bytes, from the text of /proc/<pid>/status;
// a line that is missing or unreadable reads 0.
func parseMemory(status string) (rss, peak, file int64) {
	for line := range strings.Lines(status) {
		key, v, _ := strings.Cut(line, ":")
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &rss
		case "VmHWM":
			dst = &peak
		case "RssFile":
			dst = &file
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil || kb < 0 {
			continue
		}
		*dst = kb << 10
	}
	return rss, peak, file
}

// procIO returns the I/O system calls process pid ("self" for this one) made so far, from
// /proc/<pid>/io; its ok is false when unknown.
func procIO(pid string) ioCount {
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		return ioCount{}
	}
	return parseIO(string(b))
}

// parseIO reads syscr, syscw, rchar and wchar from the text of /proc/<pid>/io; ok is false
// unless all four are there.
func parseIO(text string) ioCount {
	var c ioCount
	seen := 0
	for line := range strings.Lines(text) {
		key, v, _ := strings.Cut(line, ":")
		var dst *int64
		switch key {
		case "syscr":
			dst = &c.readCalls
		case "syscw":
			dst = &c.writeCalls
		case "rchar":
			dst = &c.readBytes
		case "wchar":
			dst = &c.writeBytes
		default:
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return ioCount{}
		}
		*dst = n
		seen++
	}
	if seen != 4 {
		return ioCount{}
	}
	c.ok = true
	return c
}

// memTotal returns the machine's memory as /proc/meminfo states it, or "".
func memTotal() string {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return ""
			}
			return strconv.FormatFloat(float64(kb)/(1<<20), 'f', 1, 64) + " GiB"
		}
	}
	return ""
}

// loadAvg returns the machine's load average over the last minute, as /proc/loadavg states it,
// or -1.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return -1
	}
	return v
}
