// Command callwire-bench-sip measures the SIP observer.
//
// Proxy: it runs two proxies side by side, each in a process of its own (this program run again
// with -serve), between the same sipp PBX (a UAS answering every call) and the same sipp trunk (a
// UAC placing calls at -rate, at most -limit at once): one with translation off (the proxy alone)
// and one with translation on (the whole `sip` translator: proxy, call model, and an emitter that
// takes every event at once, as an agent with a fast outbox would). Phases alternate between the
// two, -calls calls each, -rounds rounds; each phase reports completed calls per second. It
// prints the medians and their ratio, on ÷ off.
//
// Tap: HEP datagrams per second decoded and translated (the call model included), in process, on
// the datagrams of -hep-calls basic calls with distinct Call-IDs; and the call model's memory per
// 1,000 calls in progress.
//
// Usage:
//
//	make bench-sip
//	go run ./cmd/callwire-bench-sip [flags]
//
// See docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"
)

type options struct {
	rounds, calls, rate, limit int
	hepCalls                   int
	scenarios, sipp            string
	json                       bool
	cpuprofile, memprofile     string
	child                      childOptions
}

type result struct {
	Rounds        int       `json:"rounds"`
	CallsPerPhase int       `json:"callsPerPhase"`
	Rate          int       `json:"rate"`
	Limit         int       `json:"limit"`
	Off           []float64 `json:"offCallsPerSecond"`
	On            []float64 `json:"onCallsPerSecond"`
	OffMedian     float64   `json:"offMedian"`
	OnMedian      float64   `json:"onMedian"`
	Ratio         float64   `json:"ratio"`
	OffCPU        []float64 `json:"offCPUMicrosPerCall"`
	OnCPU         []float64 `json:"onCPUMicrosPerCall"`
	// SippCPU is both sipps' CPU (the caller and the PBX) per completed call, each phase.
	SippCPU       []float64 `json:"sippCPUMicrosPerCall"`
	SippCPUMedian float64   `json:"sippCPUMedian"`
	OffCPUMedian  float64   `json:"offCPUMedian"`
	OnCPUMedian   float64   `json:"onCPUMedian"`
	// The garbage collector's share of each proxy process's CPU time over the whole run.
	OffGCShare float64 `json:"offGCShare"`
	OnGCShare  float64 `json:"onGCShare"`
	// Context switches of each proxy process's threads per call, over the whole run.
	OffSwitchesPerCall float64 `json:"offSwitchesPerCall"`
	OnSwitchesPerCall  float64 `json:"onSwitchesPerCall"`
	// UDP datagrams the host dropped for a full receive buffer during each kind of phase, any
	// socket's (sipp's or the proxy's): a dropped datagram costs its call a 500 ms retransmission.
	DropsOff  uint64 `json:"udpDropsOff"`
	DropsOn   uint64 `json:"udpDropsOn"`
	FailedOff int    `json:"failedCallsOff"`
	FailedOn  int    `json:"failedCallsOn"`
	Events    uint64 `json:"eventsEmitted"`
	// EventsExpected is three per call completed through the translating proxy (call_received,
	// call_answered, call_ended): a run that emits any other number fails.
	EventsExpected uint64    `json:"eventsExpected"`
	HEP            []float64 `json:"hepDatagramsPerSecond"`
	HEPMedian      float64   `json:"hepMedian"`
	BytesPer1000   float64   `json:"modelBytesPer1000Calls"`
	// EndedBytesPer1000 is the same for calls that ended and are held for their grace.
	EndedBytesPer1000 float64 `json:"modelBytesPer1000EndedCalls"`
	CPUs              int     `json:"cpus"`
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 15, "rounds; each runs one phase with translation off and one with it on")
	flag.IntVar(&o.calls, "calls", 6000, "calls per phase")
	flag.IntVar(&o.rate, "rate", 8000, "calls per second sipp tries to place (-r)")
	flag.IntVar(&o.limit, "limit", 1000, "calls sipp keeps in progress at most (-l)")
	flag.IntVar(&o.hepCalls, "hep-calls", 20000, "basic calls in the HEP stream")
	flag.StringVar(&o.scenarios, "scenarios", "translators/sip/testdata/sipp", "directory of basic_uac.xml and basic_uas.xml")
	flag.StringVar(&o.sipp, "sipp", "sipp", "the sipp program")
	flag.BoolVar(&o.json, "json", false, "print the result as JSON")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the proxy with translation on (its own process) to this file, and of the proxy alone to this file with .off added")
	flag.StringVar(&o.memprofile, "memprofile", "", "write an allocation profile of the proxy with translation on to this file, and of the proxy alone to this file with .off added")
	flag.StringVar(&o.child.serve, "serve", "", "internal: run one proxy under test (off or on) until stdin closes")
	flag.IntVar(&o.child.listen, "listen", 0, "internal: -serve's UDP port")
	flag.StringVar(&o.child.pbx, "pbx", "", "internal: -serve's PBX")
	flag.StringVar(&o.child.trunk, "trunk", "", "internal: -serve's trunk")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.child.serve != "" {
		o.child.cpuprofile, o.child.memprofile = o.cpuprofile, o.memprofile
		if err := serveChild(ctx, o.child); err != nil {
			fmt.Fprintln(os.Stderr, "callwire-bench-sip -serve:", err)
			os.Exit(1)
		}
		return
	}
	r, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "callwire-bench-sip:", err)
		os.Exit(1)
	}
	if r.FailedOn == 0 && r.Events != r.EventsExpected {
		// Printed, then failed: the figures of a run that lost events are not the translator's.
		defer func() {
			fmt.Fprintf(os.Stderr, "callwire-bench-sip: the translating proxy emitted %d events, want %d (three per call)\n", r.Events, r.EventsExpected)
			os.Exit(1)
		}()
	}
	if o.json {
		_ = json.NewEncoder(os.Stdout).Encode(r)
		return
	}
	fmt.Printf("proxy, %d rounds of %d calls per phase (sipp -r %d -l %d), %d CPUs\n", r.Rounds, r.CallsPerPhase, r.Rate, r.Limit, r.CPUs)
	fmt.Printf("  translation off: %s calls/s (median %.0f), %d failed calls\n", fmtRates(r.Off), r.OffMedian, r.FailedOff)
	fmt.Printf("  translation on:  %s calls/s (median %.0f), %d failed calls, %d events emitted of %d expected\n",
		fmtRates(r.On), r.OnMedian, r.FailedOn, r.Events, r.EventsExpected)
	fmt.Printf("  ratio on/off: %.3f\n", r.Ratio)
	fmt.Printf("  UDP datagrams dropped for a full receive buffer: off %d, on %d\n", r.DropsOff, r.DropsOn)
	if r.OffCPUMedian > 0 {
		fmt.Printf("  proxy process CPU per call: off %s µs (median %.0f), on %s µs (median %.0f); on/off %.2f\n",
			fmtRates(r.OffCPU), r.OffCPUMedian, fmtRates(r.OnCPU), r.OnCPUMedian, r.OnCPUMedian/r.OffCPUMedian)
		fmt.Printf("  the two sipps' CPU per call (caller and PBX, every phase): median %.0f µs\n", r.SippCPUMedian)
		fmt.Printf("  garbage collector's share of that CPU: off %.0f%%, on %.0f%%; context switches per call: off %.1f, on %.1f\n",
			100*r.OffGCShare, 100*r.OnGCShare, r.OffSwitchesPerCall, r.OnSwitchesPerCall)
	}
	fmt.Printf("tap: HEP datagrams decoded and translated per second: %s (median %.0f)\n", fmtRates(r.HEP), r.HEPMedian)
	fmt.Printf("call model memory: %.0f KiB per 1,000 calls in progress, %.0f KiB per 1,000 ended calls in their grace\n", r.BytesPer1000/1024, r.EndedBytesPer1000/1024)
}

func fmtRates(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.0f", x)
	}
	return s
}

func run(ctx context.Context, o options) (result, error) {
	r := result{Rounds: o.rounds, CallsPerPhase: o.calls, Rate: o.rate, Limit: o.limit, CPUs: runtime.NumCPU()}
	sippPath, err := exec.LookPath(o.sipp)
	if err != nil {
		return r, fmt.Errorf("sipp (Debian package sip-tester) is needed: %w", err)
	}
	uacScenario, _ := filepath.Abs(filepath.Join(o.scenarios, "basic_uac.xml"))
	uasScenario, _ := filepath.Abs(filepath.Join(o.scenarios, "basic_uas.xml"))
	dir, err := os.MkdirTemp("", "callwire-bench-sip")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)

	var ports [4]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return r, err
		}
	}
	pbxPort, trunkPort, offPort, onPort := ports[0], ports[1], ports[2], ports[3]
	pbx, trunk := fmt.Sprintf("127.0.0.1:%d", pbxPort), fmt.Sprintf("127.0.0.1:%d", trunkPort)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	uas, err := startUAS(ctx, sippPath, dir, uasScenario, pbxPort)
	if err != nil {
		return r, err
	}
	defer func() { cancel(); _ = uas.Wait() }()

	offProfile, offMem := "", ""
	if o.cpuprofile != "" {
		offProfile = o.cpuprofile + ".off"
	}
	if o.memprofile != "" {
		offMem = o.memprofile + ".off"
	}
	off, err := startChild(ctx, childOptions{serve: "off", listen: offPort, pbx: pbx, trunk: trunk, cpuprofile: offProfile, memprofile: offMem})
	if err != nil {
		return r, err
	}
	onProc, err := startChild(ctx, childOptions{serve: "on", listen: onPort, pbx: pbx, trunk: trunk, cpuprofile: o.cpuprofile, memprofile: o.memprofile})
	if err != nil {
		_, _, _ = off.stop()
		return r, err
	}

	for i := range o.rounds {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, on := range order {
			target, proc := fmt.Sprintf("127.0.0.1:%d", offPort), off
			if on {
				target, proc = fmt.Sprintf("127.0.0.1:%d", onPort), onProc
			}
			cpu0, cpuOK := proc.cpu()
			uas0, uasOK := procCPU(uas.Process.Pid)
			drops0, dropsOK := udpDrops()
			res, err := runUAC(ctx, sippPath, dir, uacScenario, trunkPort, target, o.calls, o.rate, o.limit)
			if err != nil {
				return r, err
			}
			// The process's CPU per completed call over the phase: steadier than the rate, which
			// moves with whatever else the two cores run.
			var perCall float64
			if cpu1, ok := proc.cpu(); ok && cpuOK && res.successful > 0 {
				perCall = float64((cpu1-cpu0)/time.Microsecond) / float64(res.successful)
			}
			var drops uint64
			if drops1, ok := udpDrops(); ok && dropsOK {
				drops = drops1 - drops0
			}
			if uas1, ok := procCPU(uas.Process.Pid); ok && uasOK && res.successful > 0 {
				r.SippCPU = append(r.SippCPU, float64((uas1-uas0+res.cpu)/time.Microsecond)/float64(res.successful))
			}
			if on {
				r.On = append(r.On, res.callsPerSecond())
				r.OnCPU = append(r.OnCPU, perCall)
				r.FailedOn += res.failed
				r.DropsOn += drops
				r.EventsExpected += 3 * uint64(res.successful)
			} else {
				r.Off = append(r.Off, res.callsPerSecond())
				r.OffCPU = append(r.OffCPU, perCall)
				r.FailedOff += res.failed
				r.DropsOff += drops
			}
			if !o.json {
				fmt.Fprintf(os.Stderr, "round %d, translation on=%v: %.0f calls/s, %d ok, %d failed, %.0f µs CPU per call, %d UDP datagrams dropped\n",
					i+1, on, res.callsPerSecond(), res.successful, res.failed, perCall, drops)
			}
		}
	}
	r.OffMedian, r.OnMedian = median(r.Off), median(r.On)
	if r.OffMedian > 0 {
		r.Ratio = r.OnMedian / r.OffMedian
	}
	time.Sleep(time.Second) // the last events leave the call model
	r.OffCPUMedian, r.OnCPUMedian, r.SippCPUMedian = median(r.OffCPU), median(r.OnCPU), median(r.SippCPU)
	var offCPU, onCPU cpuClasses
	if _, offCPU, err = off.stop(); err != nil {
		return r, fmt.Errorf("proxy off: %w", err)
	}
	if r.Events, onCPU, err = onProc.stop(); err != nil {
		return r, fmt.Errorf("proxy on: %w", err)
	}
	if offCPU.Total > 0 && onCPU.Total > 0 {
		r.OffGCShare, r.OnGCShare = offCPU.GC/offCPU.Total, onCPU.GC/onCPU.Total
	}
	if calls := float64(o.rounds * o.calls); calls > 0 {
		r.OffSwitchesPerCall, r.OnSwitchesPerCall = float64(offCPU.Switches)/calls, float64(onCPU.Switches)/calls
	}

	if r.HEP, err = benchHEP(o.hepCalls, o.rounds); err != nil {
		return r, err
	}
	r.HEPMedian = median(r.HEP)
	if r.BytesPer1000, err = modelMemory(10000, false); err != nil {
		return r, err
	}
	if r.EndedBytesPer1000, err = modelMemory(10000, true); err != nil {
		return r, err
	}
	return r, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
