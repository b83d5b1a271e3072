package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestMachineTime(t *testing.T) {
	tests := []struct {
		name       string
		stat       string
		ran, steal time.Duration
		ok         bool
	}{
		{"ten fields", "cpu  100 2 30 400 5 0 6 7 50 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n", 5500 * time.Millisecond, 70 * time.Millisecond, true},
		{"eight fields", "cpu 1 1 1 1 1 1 1 1", 80 * time.Millisecond, 10 * time.Millisecond, true},
		{"no steal field", "cpu 1 1 1 1 1 1 1\n", 0, 0, false},
		{"per-cpu line first", "cpu0 1 1 1 1 1 1 1 1\n", 0, 0, false},
		{"not a number", "cpu 1 x 1 1 1 1 1 1\n", 0, 0, false},
		{"negative", "cpu 1 -1 1 1 1 1 1 1\n", 0, 0, false},
		{"empty", "", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran, steal, ok := machineTime([]byte(tt.stat))
			if ran != tt.ran || steal != tt.steal || ok != tt.ok {
				t.Errorf("machineTime = %v, %v, %v; want %v, %v, %v", ran, steal, ok, tt.ran, tt.steal, tt.ok)
			}
		})
	}
}

func TestHostShare(t *testing.T) {
	at := time.Unix(1000, 0)
	a := cpuSample{at: at, ran: 10 * time.Second, steal: time.Second, ranOK: true}
	// 2 CPUs for 10 s: 20 s of capacity, of which the kernel accounted 15 s, 1 s of it steal.
	b := cpuSample{at: at.Add(10 * time.Second), ran: 25 * time.Second, steal: 2 * time.Second, ranOK: true}
	untold, steal, ok := hostShare(a, b, 2)
	if !ok || untold != 0.25 || steal != 0.05 {
		t.Errorf("hostShare = %v, %v, %v; want 0.25, 0.05, true", untold, steal, ok)
	}
	// A kernel that accounted more than the wall clock (clock skew) took nothing.
	b.ran = 40 * time.Second
	if untold, _, _ := hostShare(a, b, 2); untold != 0 {
		t.Errorf("hostShare untold = %v with more accounted than elapsed, want 0", untold)
	}
	if _, _, ok := hostShare(a, cpuSample{at: b.at}, 2); ok {
		t.Error("hostShare ok without /proc/stat in a sample")
	}
}

// TestMachineTimeHere reads this machine's /proc/stat, where there is one.
func TestMachineTimeHere(t *testing.T) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Skipf("no /proc/stat: %v", err)
	}
	if ran, _, ok := machineTime(b); !ok || ran <= 0 {
		t.Errorf("machineTime of this machine's /proc/stat = %v, %v", ran, ok)
	}
}

func TestParseMemory(t *testing.T) {
	tests := []struct {
		name             string
		status           string
		rss, peak, files int64
	}{
		{"all three", "Name:\tcallwire\nVmHWM:\t   60000 kB\nVmRSS:\t   57000 kB\nRssAnon:\t   30000 kB\nRssFile:\t   27000 kB\n",
			57000 << 10, 60000 << 10, 27000 << 10},
		{"no RssFile (an old kernel)", "VmHWM:\t2 kB\nVmRSS:\t1 kB\n", 1 << 10, 2 << 10, 0},
		{"unreadable values read 0", "VmHWM:\tmany kB\nVmRSS:\t-1 kB\nRssFile:\n", 0, 0, 0},
		{"a key inside another line", "NotVmRSS:\t5 kB\n", 0, 0, 0},
		{"empty", "", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rss, peak, file := parseMemory(tt.status)
			if rss != tt.rss || peak != tt.peak || file != tt.files {
				t.Errorf("parseMemory = %d, %d, %d; want %d, %d, %d", rss, peak, file, tt.rss, tt.peak, tt.files)
			}
		})
	}
}

// TestProcMemoryHere reads this process's own memory: resident, at most its peak, and partly
// file pages (its program).
func TestProcMemoryHere(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	rss, peak, file := procMemory(strconv.Itoa(os.Getpid()))
	if rss <= 0 || peak < rss || file <= 0 || file > rss {
		t.Errorf("procMemory of this process = rss %d, peak %d, file %d", rss, peak, file)
	}
}

func TestParseIO(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want ioCount
	}{
		{"all four", "rchar: 100\nwchar: 200\nsyscr: 3\nsyscw: 4\nread_bytes: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n",
			ioCount{ok: true, readCalls: 3, writeCalls: 4, readBytes: 100, writeBytes: 200}},
		{"one missing", "rchar: 100\nwchar: 200\nsyscr: 3\n", ioCount{}},
		{"unreadable", "rchar: 100\nwchar: x\nsyscr: 3\nsyscw: 4\n", ioCount{}},
		{"negative", "rchar: -1\nwchar: 2\nsyscr: 3\nsyscw: 4\n", ioCount{}},
		{"empty", "", ioCount{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseIO(tc.text); got != tc.want {
				t.Errorf("parseIO = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestIOPerEvent(t *testing.T) {
	a := ioCount{ok: true, readCalls: 10, writeCalls: 20, readBytes: 1000, writeBytes: 2000}
	b := ioCount{ok: true, readCalls: 30, writeCalls: 60, readBytes: 5000, writeBytes: 10000}
	got := ioPerEvent(a, b, 10)
	want := ioDelta{ReadCallsPerEvent: 2, WriteCallsPerEvent: 4, ReadBytesPerEvent: 400, WriteBytesPerEvent: 800}
	if got == nil || *got != want {
		t.Errorf("ioPerEvent = %+v, want %+v", got, want)
	}
	if got := ioPerEvent(ioCount{}, b, 10); got != nil {
		t.Errorf("ioPerEvent of an unknown sample = %+v, want nil", got)
	}
	if got := ioPerEvent(a, b, 0); got != nil {
		t.Errorf("ioPerEvent of no events = %+v, want nil", got)
	}
}
