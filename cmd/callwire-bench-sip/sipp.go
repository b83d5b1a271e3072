package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// sippRun is the outcome of one caller-side sipp run.
type sippRun struct {
	successful, failed int
	elapsed            time.Duration
	cpu                time.Duration // the caller-side sipp's CPU time, user and system
}

// callsPerSecond is the rate of calls that completed.
func (r sippRun) callsPerSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.successful) / r.elapsed.Seconds()
}

// sippBuffer is the size sipp asks of its sockets' send and receive buffers (-buff_size). sipp's
// default, 64 KiB, is doubled by Linux to 128 KiB: with a thousand calls in flight a burst
// overflows it, the datagram is dropped and its call waits out a 500 ms retransmission, so the
// measured rate follows the load generator's losses instead of the proxy. Linux caps the request
// at net.core.rmem_max (then doubles it).
const sippBuffer = "8388608"

// startUAS starts sipp as the PBX on 127.0.0.1:port, answering every call of scenario until ctx
// ends. It returns once the UAS is listening.
func startUAS(ctx context.Context, sipp, dir, scenario string, port int) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, sipp, "-sf", scenario, "-i", "127.0.0.1", "-p", strconv.Itoa(port),
		"-t", "u1", "-buff_size", sippBuffer, "-nostdin")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 3 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sipp uas: %w", err)
	}
	// A UDP listener cannot be probed without disturbing it; give sipp the moment it needs and
	// check it is still there.
	time.Sleep(300 * time.Millisecond)
	if cmd.ProcessState != nil {
		return nil, fmt.Errorf("sipp uas exited: %s", out.String())
	}
	return cmd, nil
}

// runUAC places calls through target at rate calls per second, at most limit at once, and
// waits for sipp to finish.
func runUAC(ctx context.Context, sipp, dir, scenario string, port int, target string, calls, rate, limit int) (sippRun, error) {
	stat := filepath.Join(dir, fmt.Sprintf("uac_%d_stat.csv", time.Now().UnixNano()))
	cmd := exec.CommandContext(ctx, sipp, "-sf", scenario, "-i", "127.0.0.1", "-p", strconv.Itoa(port),
		"-t", "u1", "-m", strconv.Itoa(calls), "-r", strconv.Itoa(rate), "-l", strconv.Itoa(limit),
		"-buff_size", sippBuffer, "-nostdin", "-timeout", "120s", "-timeout_error", "-trace_stat", "-stf", stat, "-fd", "1", target)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 3 * time.Second
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return sippRun{}, fmt.Errorf("sipp uac: %w", err)
	}
	r, serr := readStat(stat)
	if serr != nil {
		return sippRun{}, fmt.Errorf("sipp uac: %w (output: %s)", serr, tail(out.String(), 500))
	}
	// sipp's own elapsed time has whole seconds only; the wall time includes its start, the
	// same for every phase.
	r.elapsed = wall
	if cmd.ProcessState != nil {
		r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return r, nil
}

// readStat reads the last row of a sipp statistics file: cumulative successful and failed calls.
func readStat(path string) (sippRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return sippRun{}, err
	}
	defer f.Close()
	rd := csv.NewReader(f)
	rd.Comma = ';'
	rd.FieldsPerRecord = -1
	rows, err := rd.ReadAll()
	if err != nil || len(rows) < 2 {
		return sippRun{}, fmt.Errorf("statistics file %s: %d rows, %v", path, len(rows), err)
	}
	head, last := rows[0], rows[len(rows)-1]
	col := func(name string) string {
		for i, h := range head {
			if h == name && i < len(last) {
				return last[i]
			}
		}
		return ""
	}
	var r sippRun
	r.successful, _ = strconv.Atoi(col("SuccessfulCall(C)"))
	r.failed, _ = strconv.Atoi(col("FailedCall(C)"))
	return r, nil
}

// udpDrops returns the host's count of UDP datagrams dropped because a socket's receive buffer
// was full (RcvbufErrors in /proc/net/snmp), and false where there is no such count.
func udpDrops() (uint64, bool) {
	b, err := os.ReadFile("/proc/net/snmp")
	if err != nil {
		return 0, false
	}
	var head []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if head == nil {
			head = f
			continue
		}
		for i, h := range head {
			if h == "RcvbufErrors" && i < len(f) {
				n, err := strconv.ParseUint(f[i], 10, 64)
				return n, err == nil
			}
		}
		return 0, false
	}
	return 0, false
}

// freePort returns a port on 127.0.0.1 free for UDP at the moment of the call.
func freePort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
