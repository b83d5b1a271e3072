//go:build !linux

package main

import (
	"os/exec"
	"time"
)

// setChildAttrs does nothing here; the bench stops the server itself.
func setChildAttrs(cmd *exec.Cmd) {}

// cpuSample is not available on this system.
type cpuSample struct {
	ok                                bool
	bench, server, postgres           time.Duration
	serverRSS, serverPeak, serverFile int64
	benchIO, serverIO                 ioCount
}

// hostShare is not available on this system.
func hostShare(a, b cpuSample, cpus int) (untold, steal float64, ok bool) { return 0, 0, false }

// sampleCPU is not available on this system; the report leaves CPU use out.
func sampleCPU(serverPID int) cpuSample { return cpuSample{} }

// memTotal is not available on this system.
func memTotal() string { return "" }

// loadAvg is not available on this system.
func loadAvg() float64 { return -1 }
