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
	// far (VmRSS and VmHWM), in bytes; 0 when unknown.
	serverRSS, serverPeak int64
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
	if serverPID > 0 {
		s.server, _ = procCPU(strconv.Itoa(serverPID))
		s.serverRSS, s.serverPeak = procMemory(strconv.Itoa(serverPID))
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid := filepath.Base(d)
		if t, name := procCPU(pid); name == "postgres" {
			s.postgres += t
		}
	}
	s.ok = true
	return s
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

// procMemory returns process pid's resident memory now and at its peak (VmRSS and VmHWM of
// /proc/<pid>/status), in bytes; 0 when unknown.
func procMemory(pid string) (rss, peak int64) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0
	}
	for line := range strings.Lines(string(b)) {
		key, v, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			continue
		}
		if key == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak
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
