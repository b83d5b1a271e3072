package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// What a run reports: the report's shape, which -json prints as it is, and its printed form.

// report is the outcome of a bench run on one store (-json prints it).
type report struct {
	Store    string      `json:"store"` // postgres or sqlite
	Machine  machine     `json:"machine"`
	Settings settings    `json:"settings"`
	Mixes    []mixReport `json:"mixes"`
	// Popup is the popup phase's latency at full load, and PopupLight at -popup-rate calls a
	// second, when they ran.
	Popup      *popupReport `json:"popup,omitempty"`
	PopupLight *popupReport `json:"popupLight,omitempty"`
	// PopupRedis and PopupLightRedis are the same phases run again on a second server of the
	// same store whose popups go through the Redis broker (-redis-url), when they ran.
	PopupRedis      *popupReport `json:"popupRedis,omitempty"`
	PopupLightRedis *popupReport `json:"popupLightRedis,omitempty"`
	// ServerPeakRSSMiB is the highest resident memory of the server over the run (VmHWM),
	// where the system tells.
	ServerPeakRSSMiB float64 `json:"serverPeakRssMiB,omitempty"`
	// ServerFileRSSMiB is the most of the server's resident memory at a phase's end that was
	// file pages (RssFile): mapped files, nearly all of them the program's own code and
	// read-only data (the C library's are about 1 MiB), which every process running them
	// shares and the system can reclaim. The rest is the server's own.
	ServerFileRSSMiB float64 `json:"serverFileRssMiB,omitempty"`
	// Growth is, in a growth run's report of its full store, what the full store delivered of
	// the empty one's rates, per mix.
	Growth []growthReport `json:"growth,omitempty"`
}

// phaseKinds returns the kinds of phase each round runs, in the order of odd rounds: the
// service, the in-process ceiling and the raw-SQL ceiling.
func phaseKinds() []string { return []string{"service", "ceiling", "raw"} }

// mixReport is what the rounds of one mix measured.
type mixReport struct {
	Mix         string        `json:"mix"`
	Description string        `json:"description"`
	Phases      []phaseReport `json:"phases"`
	// Medians of events per second over the rounds, per kind of phase, and their ratios.
	ServiceEventsPerSec float64 `json:"serviceEventsPerSec"`
	CeilingEventsPerSec float64 `json:"ceilingEventsPerSec"`
	RawEventsPerSec     float64 `json:"rawEventsPerSec"`
	Ratio               float64 `json:"ratio"`           // service ÷ in-process ceiling
	RawRatio            float64 `json:"rawRatio"`        // service ÷ raw-SQL ceiling
	CeilingRawRatio     float64 `json:"ceilingRawRatio"` // in-process ceiling ÷ raw-SQL ceiling
	// Latencies over every measured phase of the kind (service per HTTP request, ceiling per
	// parse and pipeline call, raw per statement), overall and by request of the mix.
	Latency          map[string]latencySummary            `json:"latency"`
	LatencyByRequest map[string]map[string]latencySummary `json:"latencyByRequest"`
	requestNames     []string
}

// mixDescription says in a line what one unit of the mix is.
func mixDescription(m callMix) string {
	if m.name == mixBulk {
		return fmt.Sprintf("each request: a batch of %d whole calls (call_received, call_answered, call_ended, call_recorded, call_transcribed), %d events",
			bulkCalls, m.eventsPerUnit())
	}
	return "each call: call_received, call_answered, then a batch of call_ended+call_recorded+call_transcribed (5 events, 3 requests)"
}

// ratio is a ÷ b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

type machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Memory     string `json:"memory,omitempty"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	Go         string `json:"go"`
	Postgres   string `json:"postgres,omitempty"`
	SQLite     string `json:"sqlite,omitempty"`
}

type settings struct {
	Workers      int      `json:"workers"`
	PhaseSeconds float64  `json:"phaseSeconds"`
	WarmupSecs   float64  `json:"warmupSeconds"`
	Rounds       int      `json:"rounds"`
	MaxConns     int      `json:"maxConns"`
	Server       string   `json:"server"`
	Client       string   `json:"client"`              // the load generator's HTTP client: wire or net
	Preloaded    int64    `json:"preloaded,omitempty"` // events stored before the rounds (-preload)
	Growth       string   `json:"growth,omitempty"`    // in a growth run (-growth), which store: empty or full
	Mixes        []string `json:"mixes"`
}

type phaseReport struct {
	Kind         string  `json:"kind"` // service, ceiling or raw
	Round        int     `json:"round"`
	Calls        int64   `json:"calls"`
	Requests     int64   `json:"requests"`
	Events       int64   `json:"events"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"eventsPerSec"`
	P50ms        float64 `json:"p50Ms"`
	P99ms        float64 `json:"p99Ms"`
	// Cores used during the phase (CPU seconds per second), where the system tells.
	BenchCores    *float64 `json:"benchCores,omitempty"`
	ServerCores   *float64 `json:"serverCores,omitempty"`
	PostgresCores *float64 `json:"postgresCores,omitempty"`
	// ServerRSSMiB is the server's resident memory at the end of the phase, where the system
	// tells.
	ServerRSSMiB *float64 `json:"serverRssMiB,omitempty"`
	// ServerBytesPerEvent and ServerGCsPer10kEvents are what the server's runtime allocated per
	// event stored, and how many collections it ran per 10,000, during a service phase (read
	// from its /metrics).
	ServerBytesPerEvent   *float64 `json:"serverBytesPerEvent,omitempty"`
	ServerGCsPer10kEvents *float64 `json:"serverGcsPer10kEvents,omitempty"`
	// Database is what PostgreSQL did during the phase, where it tells.
	Database *dbDelta `json:"database,omitempty"`
	// WriterIO is, on the embedded store, the I/O system calls per event of the process that
	// wrote the store (see ioDelta), where the system tells.
	WriterIO *ioDelta `json:"writerIo,omitempty"`
	// HostShare is the share of the machine's CPU time its host took during the phase, where
	// the system tells: the time the machine's kernel never accounted plus what it reported as
	// steal (see hostShare).
	HostShare *float64 `json:"hostShare,omitempty"`
}

// printReport writes the human-readable report.
func printReport(w io.Writer, r report) {
	m, s := r.Machine, r.Settings
	db, raw := "PostgreSQL "+m.Postgres, "one SQL statement per request"
	if r.Store == storeSQLite {
		db, raw = "the embedded store (SQLite "+m.SQLite+", WAL, synchronous=FULL)", "one transaction of two SQL statements per request"
	}
	fmt.Fprintf(w, "\ncallwire bench on %s: %d workers, %d rounds of %gs per phase (warm-up %gs), pool %d connections\n",
		r.Store, s.Workers, s.Rounds, s.PhaseSeconds, s.WarmupSecs, s.MaxConns)
	fmt.Fprintf(w, "machine: %d CPUs, %s memory, %s/%s, %s, %s\n", m.CPUs, orDash(m.Memory), m.GOOS, m.GOARCH, m.Go, db)
	client := "a lean HTTP/1.1 keep-alive client"
	if s.Client == "net" {
		client = "Go's net/http client"
	}
	fmt.Fprintf(w, "server: %s; load generator: %s; the load generator, the server and the database share the machine\n", s.Server, client)
	fmt.Fprintf(w, "phases: service (HTTP), ceiling (parse + write pipeline in process), raw (%s, no decoding)\n", raw)
	switch {
	case s.Growth == "empty":
		fmt.Fprintf(w, "store: the empty store of a growth run (-growth), its rounds interleaved with the preloaded store's\n")
	case s.Growth == "full":
		fmt.Fprintf(w, "store: the full store of a growth run (-growth), %d events preloaded, its rounds interleaved with the empty store's\n", s.Preloaded)
	case s.Preloaded > 0:
		fmt.Fprintf(w, "store: %d events preloaded before the rounds (-preload)\n", s.Preloaded)
	}
	for _, mr := range r.Mixes {
		printMix(w, mr)
	}
	if r.ServerPeakRSSMiB > 0 {
		verdict := "met"
		if r.ServerPeakRSSMiB > maxServerRSSMiB {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "\nserver memory: peak resident %.1f MiB over the run (VmHWM; target at most %d MiB: %s)\n",
			r.ServerPeakRSSMiB, maxServerRSSMiB, verdict)
		if r.ServerFileRSSMiB > 0 {
			fmt.Fprintf(w, "  of it file pages, at most %.1f MiB at a phase's end (RssFile: mostly the program's own code and read-only data, shared and reclaimable)\n",
				r.ServerFileRSSMiB)
		}
	}
	printGrowth(w, s.Preloaded, r.Growth)
	printPopups(w, r.PopupLight, r.Popup, "")
	printPopups(w, r.PopupLightRedis, r.PopupRedis, "; the server publishing through Redis")
}

// printPopups writes the popup latencies one broker gave at light load and at full load, either
// of which may be nil; through ends the heading of each, naming the broker.
func printPopups(w io.Writer, light, full *popupReport, through string) {
	if p := light; p != nil {
		verdict := "met"
		if p.Latency.P99ms > maxLightPopupP99ms || p.Missing > 0 {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "\npopup latency at light load (%g calls/s open loop; POST of call_received to its arrival on a subscribed /api/v1/popups/stream, lookup adapter answering at once%s):\n",
			p.Rate, through)
		fmt.Fprintf(w, "  p50 %.2f ms, p99 %.2f ms (target at most %g ms: %s), max %.2f ms over %d popups in %.0fs (%d missing; %d lookups served)\n",
			p.Latency.P50ms, p.Latency.P99ms, maxLightPopupP99ms, verdict, p.Latency.MaxMs, p.Received, p.Seconds, p.Missing, p.Lookups)
		printPopupHost(w, p)
		printStalls(w, p)
	}
	if p := full; p != nil {
		fmt.Fprintf(w, "\npopup latency at full load (POST of call_received to its arrival on a subscribed /api/v1/popups/stream, lookup adapter answering at once%s):\n",
			through)
		fmt.Fprintf(w, "  p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d popups in %.0fs (%d missing; %d lookups served)\n",
			p.Latency.P50ms, p.Latency.P99ms, p.Latency.MaxMs, p.Received, p.Seconds, p.Missing, p.Lookups)
		printPopupHost(w, p)
	}
}

// printPopupHost writes how much of the machine its host took during a popup run, and a warning
// when the latencies are the host's rather than the service's.
func printPopupHost(w io.Writer, p *popupReport) {
	if p.HostShare == nil {
		return
	}
	fmt.Fprintf(w, "  the host took %.0f%% of the machine's CPU time during the run", *p.HostShare*100)
	if *p.HostShare > maxHostShare {
		fmt.Fprint(w, " (WARNING: over 5%; the latencies include the pauses it imposed)")
	}
	fmt.Fprintln(w)
}

// printStalls writes what the timer probe saw during a popup run, and a warning when the machine
// stalled often enough to set the p99 by itself.
func printStalls(w io.Writer, p *popupReport) {
	s := p.Stalls
	if s == nil {
		return
	}
	fmt.Fprintf(w, "  stalls: a goroutine of the bench sleeping %v at a time woke %d times, %d of them over %v late (latest %.2f ms)",
		stallPeriod, s.Wakeups, s.Stalls, stallThreshold, s.LatestMs)
	// A stall delays whatever was running or waiting to run, a popup in flight included: once
	// there are 1% as many stalls as popups, they can be the p99 on their own.
	if p.Received > 0 && s.Stalls*100 >= p.Received {
		fmt.Fprint(w, " (WARNING: enough stalls to set the p99 alone; the p99 measures the machine)")
	}
	fmt.Fprintln(w)
}

// rawTarget is the least service ÷ raw-ceiling ratio aimed at for a mix.
func rawTarget(mix string) float64 {
	if mix == mixBulk {
		return 0.85
	}
	return 0.9
}

// printBudget writes the CPU each process spent per event stored, the median over the rounds of
// each kind of phase: where the time per event goes, and so what a ratio can reach.
func printBudget(w io.Writer, phases []phaseReport) {
	per := func(kind string, cores func(phaseReport) *float64) (float64, bool) {
		var v []float64
		for _, p := range phases {
			if c := cores(p); p.Kind == kind && c != nil && p.EventsPerSec > 0 {
				v = append(v, *c/p.EventsPerSec*1e6)
			}
		}
		return median(v), len(v) > 0
	}
	fmt.Fprintf(w, "\nCPU per event stored, µs (median over rounds):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tbench\tserver\tpostgres\ttotal\t")
	for _, kind := range phaseKinds() {
		b, ok := per(kind, func(p phaseReport) *float64 { return p.BenchCores })
		if !ok {
			continue
		}
		sv, _ := per(kind, func(p phaseReport) *float64 { return p.ServerCores })
		pg, _ := per(kind, func(p phaseReport) *float64 { return p.PostgresCores })
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t\n", kind, b, sv, pg, b+sv+pg)
	}
	tw.Flush()
}

// printMix writes the part of the report about one mix.
func printMix(w io.Writer, r mixReport) {
	fmt.Fprintf(w, "\n== %s mix: %s\n\n", r.Mix, r.Description)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tround\tcalls\trequests\tevents\tseconds\tevents/s\tp50 ms\tp99 ms\tcores: bench\tserver\tpostgres\tserver RSS MiB\tbytes/event\tGCs/10k events\thost took\t")
	worst := 0.0
	for _, p := range r.Phases {
		rss := "-"
		if p.ServerRSSMiB != nil && p.Kind == "service" {
			rss = fmt.Sprintf("%.1f", *p.ServerRSSMiB)
		}
		host := "-"
		if p.HostShare != nil {
			host = fmt.Sprintf("%.0f%%", *p.HostShare*100)
			worst = max(worst, *p.HostShare)
		}
		alloc, gcs := "-", "-"
		if p.ServerBytesPerEvent != nil && p.ServerGCsPer10kEvents != nil {
			alloc, gcs = fmt.Sprintf("%.0f", *p.ServerBytesPerEvent), fmt.Sprintf("%.2f", *p.ServerGCsPer10kEvents)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.2f\t%.0f\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.Kind, p.Round, p.Calls, p.Requests,
			p.Events, p.Seconds, p.EventsPerSec, p.P50ms, p.P99ms, cores(p.BenchCores), cores(p.ServerCores), cores(p.PostgresCores), rss,
			alloc, gcs, host)
	}
	tw.Flush()
	if worst > maxHostShare {
		fmt.Fprintf(w, "\nWARNING: the machine's host took up to %.0f%% of its CPU time during a phase (time its kernel never\n"+
			"accounted, or reported as steal). The processes' CPU times below include what they lost to it, and the\n"+
			"throughput is what the host let through, unevenly from phase to phase: this run's figures are not\n"+
			"comparable with a run on a machine that had its CPUs (host took under %.0f%%).\n", worst*100, maxHostShare*100)
	}
	printDatabase(w, r.Phases)
	printWriterIO(w, r.Phases)
	printBudget(w, r.Phases)
	verdict := "met"
	if r.Ratio < 0.8 {
		verdict = "NOT met"
	}
	rawVerdict := "met"
	if r.RawRatio < rawTarget(r.Mix) {
		rawVerdict = "NOT met"
	}
	fmt.Fprintf(w, "\nmedian events/s: service %.0f, ceiling %.0f, raw %.0f\n", r.ServiceEventsPerSec, r.CeilingEventsPerSec, r.RawEventsPerSec)
	fmt.Fprintf(w, "ratio service/raw ceiling: %.3f (target at least %.2f: %s)\n", r.RawRatio, rawTarget(r.Mix), rawVerdict)
	fmt.Fprintf(w, "ratio service/ceiling: %.3f (target at least 0.80: %s); ceiling/raw ceiling: %.3f\n", r.Ratio, verdict, r.CeilingRawRatio)
	for _, c := range []struct{ kind, what string }{
		{"service", "service request latency (HTTP, all rounds)"},
		{"ceiling", "ceiling write latency (parse + pipeline, all rounds)"},
		{"raw", "raw ceiling statement latency (all rounds)"},
	} {
		l := r.Latency[c.kind]
		fmt.Fprintf(w, "%s: p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d requests\n", c.what, l.P50ms, l.P99ms, l.MaxMs, l.Count)
	}
	if len(r.requestNames) < 2 {
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "by request\tservice p50\tp99\tceiling p50\tp99\traw p50\tp99\t")
	for _, n := range r.requestNames {
		sv, ce, rw := r.LatencyByRequest["service"][n], r.LatencyByRequest["ceiling"][n], r.LatencyByRequest["raw"][n]
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", n, sv.P50ms, sv.P99ms, ce.P50ms, ce.P99ms, rw.P50ms, rw.P99ms)
	}
	tw.Flush()
}

func cores(c *float64) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *c)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printDatabase writes, per phase, what PostgreSQL did for each event stored, when it told.
func printDatabase(w io.Writer, phases []phaseReport) {
	if !slices.ContainsFunc(phases, func(p phaseReport) bool { return p.Database != nil }) {
		return
	}
	fmt.Fprintln(w, "\nPostgreSQL per phase (WAL, pages read into its buffers and commits per event stored; checkpoints started during the phase):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tround\tWAL bytes/event\tfull pages/event\tpages read/event\tcommits/event\tcommits/WAL flush\tcheckpoints\t")
	for _, p := range phases {
		if d := p.Database; d != nil {
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.2f\t%d\t\n", p.Kind, p.Round, d.WALBytesPerEvent, d.FPIPerEvent,
				d.BlocksReadPerEvent, d.CommitsPerEvent, d.CommitsPerSync, d.Checkpoints)
		}
	}
	tw.Flush()
}

// printWriterIO writes, per phase, the I/O system calls per event stored of the process that
// wrote the embedded store, when the system told.
func printWriterIO(w io.Writer, phases []phaseReport) {
	if !slices.ContainsFunc(phases, func(p phaseReport) bool { return p.WriterIO != nil }) {
		return
	}
	fmt.Fprintln(w, "\nThe embedded store's writing process per phase (the server in a service phase, the bench in the others;\n"+
		"read and write system calls and their bytes per event stored, files and sockets alike):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tround\treads/event\twrites/event\tread bytes/event\twritten bytes/event\t")
	for _, p := range phases {
		if d := p.WriterIO; d != nil {
			fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.0f\t%.0f\t\n", p.Kind, p.Round, d.ReadCallsPerEvent, d.WriteCallsPerEvent,
				d.ReadBytesPerEvent, d.WriteBytesPerEvent)
		}
	}
	tw.Flush()
}
