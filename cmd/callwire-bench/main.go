// Command callwire-bench measures how close the ingest service comes to its database.
//
// It makes a fresh schema in the PostgreSQL database named by -database-url,
// CALLWIRE_BENCH_DATABASE_URL or CALLWIRE_TEST_DATABASE_URL (in that order), builds and starts
// the real `callwire serve` on a free port of 127.0.0.1 against that schema, and creates an
// organization and a key through the store. Then, for each request mix (-mix), it alternates
// three kinds of phase, each with the same number of concurrent workers. In the realistic mix
// each worker reports whole calls the way a phone system does: a lone call_received, then
// call_answered, then one batch of call_ended, call_recorded and call_transcribed. In the bulk
// mix each request is a batch of ten whole calls, 50 events of about 400 bytes.
//
//   - service: the requests go over HTTP to the server (keep-alive connections).
//   - ceiling: the same bodies go straight to the write pipeline in this process: the body is
//     decoded and validated with event.ParseBody and handed to ingest.Service.Ingest on a store
//     of the same pool size, with no caller lookup and no popup broker, which is the server's own
//     configuration. That is all the database work of a request minus HTTP and the key lookup.
//   - raw: the fewest statements that store the same rows: one SQL statement per request (an
//     upsert of its calls chained to an insert of its events, payloads verbatim), its parameters
//     cut from the same bodies without decoding them, on a pool of the same size.
//
// It prints events per second for each phase, the medians over the rounds, the ratios of the
// service median to the two ceilings' medians, and request latency percentiles; -json prints
// the same as JSON. Every request must succeed (200 or 201): the first failure stops the bench
// with an error. The server is stopped with SIGTERM and the schema dropped at the end.
//
// With -growth (and -preload) it measures the cost as the store grows in one run: two stores,
// each with its own schema (or file) and server, one empty and one preloaded, their rounds
// interleaved, and it reports each round's rate on the full store ÷ the empty one's.
//
// With -scale it measures past one replica instead (make bench-scale): the popup streams one
// server holds, the popup latency with them open, events through replicas behind HAProxy with
// each process's CPU per event, and PostgreSQL's size per call (see docs/scaling.md, "Sizing").
//
// Usage:
//
//	make bench                                # after sourcing .ci/services.sh
//	go run ./cmd/callwire-bench [flags]
//
// See docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/store"
)

// Environment variables naming the database, the first set wins.
const (
	envBenchURL = "CALLWIRE_BENCH_DATABASE_URL"
	envTestURL  = "CALLWIRE_TEST_DATABASE_URL"
)

// Environment variables naming the Redis of the popup phases' second pass, the first set wins.
const (
	envBenchRedisURL = "CALLWIRE_BENCH_REDIS_URL"
	envTestRedisURL  = "CALLWIRE_TEST_REDIS_URL"
)

// noRedis is the -redis-url that skips the popup phases' pass through Redis.
const noRedis = "none"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == serveProfiledCmd {
		if err := serveProfiled(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "callwire-bench:", err)
			os.Exit(1)
		}
		return
	}
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "callwire-bench:", err)
		os.Exit(2)
	}
	runner := run
	switch {
	case opts.read:
		runner = runRead
	case opts.scale:
		runner = runScale
	}
	if err := runner(ctx, opts, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "callwire-bench: FAILED:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	databaseURL string
	workers     int
	duration    time.Duration
	warmup      time.Duration
	rounds      int
	maxCalls    int64
	maxConns    int
	serverBin   string
	jsonOut     bool
	cpuProfile  string
	minRatio    float64
	keepSchema  bool
	popupPhase  time.Duration
	popupRate   float64
	popupLight  int64
	redisURL    string // the popup phases' second pass, through the Redis broker; "" for none
	preload     int64
	growth      bool
	analyze     bool
	client      string
	mixes       []string
	stores      []string // postgres, sqlite: each store is a run of its own, in this order
	store       string   // the store of the run in progress

	// The read bench (-read; see read.go).
	read             bool
	readPGEvents     int64
	readSQLiteEvents int64
	readDir          string
	readDatabase     string
	readRefill       bool
	readRequests     int
	readConcurrency  int
	readKinds        []string // the kinds to time; all when empty

	// The scale run (-scale; see scale.go).
	scale             bool
	scaleStreams      []int // popup streams held by one server on the in-process broker, level by level
	scaleRedisStreams []int // the same on the Redis broker
	scaleReplicas     []int // replicas behind HAProxy, one run each
	scaleOrgs         int
	scaleHold         time.Duration
	scalePopupRate    float64
	scalePopupCalls   int
}

// The stores the bench can measure.
const (
	storePostgres = "postgres"
	storeSQLite   = "sqlite"
)

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("callwire-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL database to make the bench schema in (default $"+envBenchURL+", else $"+envTestURL+")")
	fs.IntVar(&o.workers, "workers", 32, "concurrent calls in every phase")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured phase")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "length of the unmeasured warm-up of each kind")
	fs.IntVar(&o.rounds, "rounds", 5, "measured rounds; each runs one service and one ceiling phase")
	fs.Int64Var(&o.maxCalls, "max-calls", 1_000_000, "most calls one phase may start")
	fs.IntVar(&o.maxConns, "max-conns", config.Defaults().Database.MaxConns, "database pool size of the server and of the ceiling")
	fs.StringVar(&o.serverBin, "server-bin", "", "a built callwire binary to run (default: go build ./cmd/callwire)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "directory for CPU profiles of the first measured round: server.pprof (the server, "+
		"run as this program's copy of `callwire serve` with pprof), loadgen.pprof and ceiling.pprof (this process)")
	fs.DurationVar(&o.popupPhase, "popup-phase", 10*time.Second, "length of the full-load popup latency phase after the rounds, which follows the light-load one (0 skips both)")
	fs.Int64Var(&o.preload, "preload", 0, "events to store before the rounds (in calls of five; PostgreSQL's with COPY), to measure a full store; 0 for none")
	fs.BoolVar(&o.growth, "growth", false, "with -preload: measure the cost as the store grows, in one run on two stores side by side, an empty one and "+
		"one preloaded, their rounds interleaved; reports each kind's rate on the full store ÷ on the empty one (no popup phases)")
	fs.Float64Var(&o.popupRate, "popup-rate", 20, "calls started per second, open loop, in the light-load popup phase (0 skips it)")
	fs.StringVar(&o.redisURL, "redis-url", "", "Redis for a second pass of the popup phases, the server publishing through the Redis broker as replicas do "+
		"(default $"+envBenchRedisURL+", else $"+envTestRedisURL+"; "+noRedis+" skips it)")
	fs.Int64Var(&o.popupLight, "popup-light-calls", 600, "calls of the light-load popup phase, started at -popup-rate (600 at 20 a second: 30 s, and the p99 is the sixth slowest popup)")
	fs.BoolVar(&o.keepSchema, "keep-schema", false, "leave the bench schema in place at the end, for inspection")
	fs.BoolVar(&o.analyze, "analyze", true, "refresh the planner's statistics before each round, as autovacuum does on a production database (this machine runs PostgreSQL with autovacuum off)")
	fs.StringVar(&o.client, "client", "wire", "HTTP client of the load generator: wire (a lean HTTP/1.1 keep-alive client, as wrk) or net (Go's net/http)")
	fs.BoolVar(&o.read, "read", false, "measure the read side instead of the writes: fill (once) a store of -read-postgres-events or -read-sqlite-events, "+
		"then time the history's requests over HTTP (see docs/benchmarks.md, \"Reading the history\")")
	fs.Int64Var(&o.readPGEvents, "read-postgres-events", 10_000_000, "with -read: events in PostgreSQL's store")
	fs.Int64Var(&o.readSQLiteEvents, "read-sqlite-events", 1_000_000, "with -read: events in the embedded store")
	fs.StringVar(&o.readDir, "read-dir", "", "with -read: directory of the embedded store's filled files (default the user's cache directory, callwire-bench)")
	fs.StringVar(&o.readDatabase, "read-database", "callwire_readbench", "with -read: PostgreSQL database of the filled stores, created on the server of -database-url when missing")
	fs.BoolVar(&o.readRefill, "read-refill", false, "with -read: fill the store again even when a finished fill is on file")
	fs.IntVar(&o.readRequests, "read-requests", 500, "with -read: requests of each kind, at each concurrency")
	fs.IntVar(&o.readConcurrency, "read-concurrency", 4, "with -read: concurrent clients of the second pass (the first has one)")
	readKindsFlag := fs.String("read-kinds", "", "with -read: the kinds of request to time, comma-separated (default all; see docs/benchmarks.md)")
	fs.BoolVar(&o.scale, "scale", false, "measure past one replica instead (see docs/scaling.md, \"Sizing\"): popup streams one server holds, level by level, "+
		"and the popup latency at the highest; then events through -scale-replicas replicas behind HAProxy with each process's CPU per event; "+
		"then PostgreSQL's size per call. Uses -database-url, -workers, -duration, -warmup, -max-conns, -server-bin, -json, -keep-schema")
	scaleStreams := fs.String("scale-streams", "1000,5000,10000", "with -scale: the levels of popup streams one server holds on the in-process broker, increasing (empty: none)")
	scaleRedisStreams := fs.String("scale-redis-streams", "1000,5000,9000", "with -scale: the same on the Redis broker, where each stream also holds a connection to Redis (empty: none)")
	scaleReplicas := fs.String("scale-replicas", "1,2,3", "with -scale: the numbers of replicas behind HAProxy to run the events through, one run each (empty: none)")
	fs.IntVar(&o.scaleOrgs, "scale-orgs", 100, "with -scale: organizations the desks are spread over, each with four locations")
	fs.DurationVar(&o.scaleHold, "scale-hold", 6*time.Second, "with -scale: how long each level of streams is held and sampled")
	fs.Float64Var(&o.scalePopupRate, "scale-popup-rate", 20, "with -scale: calls posted per second, open loop, with the highest level of streams open")
	fs.IntVar(&o.scalePopupCalls, "scale-popup-calls", 400, "with -scale: calls posted with the highest level of streams open (0: none)")
	mixFlag := fs.String("mix", "both", "the request mix: realistic (one call in three requests), bulk (batches of 10 whole calls, 50 events) or both")
	storeFlag := fs.String("store", "both", "the store the server writes: postgres, sqlite (the embedded store, a file in a temporary directory) or both, one after the other")
	fs.Float64Var(&o.minRatio, "min-ratio", 0, "fail when the service/ceiling ratio is below this (0: report only)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case o.workers < 1 || o.workers > 4096:
		return o, errors.New("-workers must be from 1 to 4096")
	case o.duration < 100*time.Millisecond || o.duration > time.Hour:
		return o, errors.New("-duration must be from 100ms to 1h")
	case o.warmup < 0 || o.warmup > time.Hour:
		return o, errors.New("-warmup must be from 0 to 1h")
	case o.rounds < 1 || o.rounds > 100:
		return o, errors.New("-rounds must be from 1 to 100")
	case o.maxCalls < 1:
		return o, errors.New("-max-calls must be at least 1")
	case o.maxConns < 1:
		return o, errors.New("-max-conns must be at least 1")
	case o.client != "wire" && o.client != "net":
		return o, errors.New("-client must be wire or net")
	case o.popupPhase < 0 || o.popupPhase > time.Hour:
		return o, errors.New("-popup-phase must be from 0 to 1h")
	case !(o.popupRate >= 0 && o.popupRate <= 1000):
		return o, errors.New("-popup-rate must be from 0 to 1000")
	case o.popupLight < 1 || o.popupLight > 1_000_000:
		return o, errors.New("-popup-light-calls must be from 1 to 1000000")
	case o.read && (o.readPGEvents < 1000 || o.readSQLiteEvents < 1000):
		return o, errors.New("-read-postgres-events and -read-sqlite-events must be at least 1000")
	case o.read && (o.readRequests < 1 || o.readConcurrency < 1 || o.readConcurrency > 64):
		return o, errors.New("-read-requests must be at least 1 and -read-concurrency from 1 to 64")
	case o.growth && o.preload <= 0:
		return o, errors.New("-growth needs -preload: the events to store in the full store")
	case o.growth && o.cpuProfile != "":
		return o, errors.New("-growth and -cpuprofile cannot be used together")
	}
	if o.growth {
		o.popupPhase = 0 // the popup phases measure the server, not its store's size
	}
	if o.scale {
		for _, l := range []struct {
			flag string
			s    string
			max  int
			dst  *[]int
		}{{"-scale-streams", *scaleStreams, 1_000_000, &o.scaleStreams}, {"-scale-redis-streams", *scaleRedisStreams, 1_000_000, &o.scaleRedisStreams},
			{"-scale-replicas", *scaleReplicas, 16, &o.scaleReplicas}} {
			if strings.TrimSpace(l.s) == "" {
				continue
			}
			v, err := parseLevels(l.s, l.max)
			if err != nil {
				return o, fmt.Errorf("%s: %w", l.flag, err)
			}
			*l.dst = v
		}
		switch {
		case o.scaleOrgs < 1 || o.scaleOrgs > 10_000:
			return o, errors.New("-scale-orgs must be from 1 to 10000")
		case o.scaleHold < time.Second || o.scaleHold > 10*time.Minute:
			return o, errors.New("-scale-hold must be from 1s to 10m")
		case !(o.scalePopupRate > 0 && o.scalePopupRate <= 1000):
			return o, errors.New("-scale-popup-rate must be above 0 and at most 1000")
		case o.scalePopupCalls < 0 || o.scalePopupCalls > 100_000:
			return o, errors.New("-scale-popup-calls must be from 0 to 100000")
		case o.read:
			return o, errors.New("-scale and -read cannot be used together")
		}
	}
	if *readKindsFlag != "" {
		for _, k := range strings.Split(*readKindsFlag, ",") {
			if !slices.ContainsFunc(readKinds, func(rk readKind) bool { return rk.name == k }) {
				return o, fmt.Errorf("-read-kinds: no kind %q", k)
			}
			o.readKinds = append(o.readKinds, k)
		}
	}
	switch *mixFlag {
	case "both":
		o.mixes = []string{mixRealistic, mixBulk}
	case mixRealistic, mixBulk:
		o.mixes = []string{*mixFlag}
	default:
		return o, errors.New("-mix must be realistic, bulk or both")
	}
	switch *storeFlag {
	case "both":
		o.stores = []string{storePostgres, storeSQLite}
	case storePostgres, storeSQLite:
		o.stores = []string{*storeFlag}
	default:
		return o, errors.New("-store must be postgres, sqlite or both")
	}
	if o.databaseURL == "" {
		o.databaseURL = os.Getenv(envBenchURL)
	}
	if o.databaseURL == "" {
		o.databaseURL = os.Getenv(envTestURL)
	}
	if o.redisURL == "" {
		o.redisURL = os.Getenv(envBenchRedisURL)
	}
	if o.redisURL == "" {
		o.redisURL = os.Getenv(envTestRedisURL)
	}
	if o.redisURL == noRedis || o.popupPhase == 0 {
		o.redisURL = ""
	}
	if o.databaseURL == "" && (slices.Contains(o.stores, storePostgres) || o.scale) {
		return o, errors.New("no PostgreSQL named: the bench needs one. Start PostgreSQL on 127.0.0.1:5432 and run `make bench` " +
			"(.ci/services.sh sets " + envTestURL + "), or set " + envBenchURL + "='postgres://user@host:5432/db?sslmode=disable', " +
			"or pass -database-url")
	}
	return o, nil
}

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

// run is the whole bench: a run on each store in turn. Progress goes to stderr, the reports to
// stdout.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	if o.redisURL != "" {
		// Found now rather than after the rounds, whose report a failed popup phase would lose.
		if err := pingRedis(ctx, o.redisURL); err != nil {
			return fmt.Errorf("-redis-url: %w (-redis-url %s skips the popup phases' pass through Redis)", err, noRedis)
		}
	}
	for i, st := range o.stores {
		o.store = st
		if i > 0 {
			o.popupPhase = 0 // the popup phases measure the server, not its store: once is enough
		}
		if err := runStore(ctx, o, stdout, stderr); err != nil {
			return fmt.Errorf("%s: %w", st, err)
		}
	}
	return nil
}

// benchStore is the store of a run as the bench drives it.
type benchStore interface {
	store.Store
	Migrate(ctx context.Context) error
	Close() error
}

// runStore is the bench on the store o.store: on one store, or with -growth on an empty store
// and a preloaded one, their rounds interleaved.
func runStore(ctx context.Context, o options, stdout, stderr io.Writer) (err error) {
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }

	names := []string{""}
	if o.growth {
		names = []string{"empty", "full"}
	}
	var targets []*target
	defer func() {
		for i := len(targets) - 1; i >= 0; i-- {
			err = errors.Join(err, targets[i].close())
		}
	}()
	for _, name := range names {
		t, err := openTarget(ctx, o, name, logf)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	for _, t := range targets {
		t.report = report{
			Store: o.store,
			Machine: machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Memory: memTotal(),
				GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version(), Postgres: t.pgVersion, SQLite: t.liteVersion},
			Settings: settings{Workers: o.workers, PhaseSeconds: o.duration.Seconds(), WarmupSecs: o.warmup.Seconds(),
				Rounds: o.rounds, MaxConns: o.maxConns, Server: t.serverDesc, Client: o.client, Mixes: o.mixes, Growth: t.name},
		}
		if o.preload > 0 && t.name != "empty" {
			logf("%spreloading %d events", t.logName(), o.preload)
			if err := t.preload(ctx, o.preload, logf); err != nil {
				return err
			}
		}
	}

	for _, mixName := range o.mixes {
		mix, err := newMix(mixName)
		if err != nil {
			return err
		}
		if o.warmup > 0 {
			for _, t := range targets {
				for _, kind := range phaseKinds() {
					logf("%swarm-up %s %s %v", t.logName(), mixName, kind, o.warmup)
					if err := warmUp(ctx, o, t, mixName+"-"+kind, kind, mix, t.doers[kind]); err != nil {
						return err
					}
				}
			}
		}
		accs := make([]*mixAcc, len(targets))
		for i := range targets {
			accs[i] = newMixAcc(mixName, mix)
		}
		for round := 1; round <= o.rounds; round++ {
			// The kind that goes first alternates (service, ceiling, raw, then the reverse), so a
			// database that slows as it fills weighs on all alike; so, in a growth run, does the
			// store that goes first. A growth run measures each kind on both stores one after
			// the other, so that the two phases its ratio compares are next to each other in
			// time, and the machine drifts between them as little as it can.
			order := phaseKinds()
			tOrder := make([]int, len(targets)) // indexes into targets and accs
			for i := range tOrder {
				tOrder[i] = i
			}
			if round%2 == 0 {
				slices.Reverse(order)
				slices.Reverse(tOrder)
			}
			if o.analyze && o.store == storePostgres {
				for _, ti := range tOrder {
					if err := analyze(ctx, targets[ti].schemaURL); err != nil {
						return err
					}
				}
			}
			for _, kind := range order {
				for _, ti := range tOrder {
					if err := measurePhase(ctx, o, targets[ti], accs[ti], mix, round, kind, logf); err != nil {
						return err
					}
				}
			}
		}
		for i, t := range targets {
			t.report.Mixes = append(t.report.Mixes, accs[i].finish())
		}
	}

	if o.popupPhase > 0 {
		if err := runPopups(ctx, o, targets[0], logf); err != nil {
			return err
		}
	}

	for _, t := range targets {
		calls, events, err := t.countOnFile(ctx)
		if err != nil {
			return err
		}
		if calls != t.sentCalls || events != t.sentEvents {
			return fmt.Errorf("%sthe database holds %d calls and %d events; the bench reported %d calls and %d events",
				t.logName(), calls, events, t.sentCalls, t.sentEvents)
		}
		logf("%schecked: %d calls and %d events on file, as reported", t.logName(), calls, events)
		t.report.ServerPeakRSSMiB, t.report.ServerFileRSSMiB = t.peakRSS, t.peakFile
	}
	if o.growth {
		full := targets[1]
		full.report.Growth = growthOf(targets[0].report.Mixes, full.report.Mixes)
	}

	for _, t := range targets {
		if o.jsonOut {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(t.report); err != nil {
				return err
			}
		} else {
			printReport(stdout, t.report)
		}
	}
	for _, t := range targets {
		for _, m := range t.report.Mixes {
			if o.minRatio > 0 && m.Ratio < o.minRatio {
				return fmt.Errorf("%s%s mix: ratio service/ceiling %.2f is below -min-ratio %.2f", t.logName(), m.Mix, m.Ratio, o.minRatio)
			}
		}
	}
	return nil
}

// runPopups runs the popup phases on t's server, then, with -redis-url, again on a second server
// of t's store that publishes through Redis, and puts what they measured in t's report.
func runPopups(ctx context.Context, o options, t *target, logf func(string, ...any)) error {
	mix, err := newMix(mixRealistic)
	if err != nil {
		return err
	}
	pass := func(broker string, srv *child, service doer) (*popupReport, *popupReport, error) {
		t.newPhase()
		pr, pop, light, err := popupPhase(ctx, t.st, t.orgID, t.client, "http://"+srv.addr, phaseSpecFor(o, t, "popups-"+broker, o.popupPhase, "service"), mix,
			service, o.popupRate, o.popupLight, 6*time.Second, logf)
		if err != nil {
			return nil, nil, fmt.Errorf("popup phase (%s broker): %w", broker, err)
		}
		t.sentCalls += pr.Calls
		t.sentEvents += pr.Events
		logf("popups (%s broker): %d of %d arrived, p50 %.2fms p99 %.2fms", broker, pop.Received, pop.Received+pop.Missing, pop.Latency.P50ms, pop.Latency.P99ms)
		return &pop, light, nil
	}
	if t.report.Popup, t.report.PopupLight, err = pass(brokerInProcess, t.srv, t.doers["service"]); err != nil {
		return err
	}
	if o.redisURL == "" {
		return nil
	}
	srv, service, closeIdle, err := t.startRedisServer(ctx, o.redisURL, o.client)
	if err != nil {
		return err
	}
	logf("server with the redis broker ready on %s", srv.addr)
	// The first server was warmed up by the rounds; this one gets the warm-up every kind gets
	// (connections opened, statements prepared), so that neither pass measures a cold server.
	if o.warmup > 0 {
		logf("warm-up popups-%s %v", brokerRedis, o.warmup)
		err = warmUp(ctx, o, t, "popups-"+brokerRedis, "service", mix, service)
	}
	if err == nil {
		t.report.PopupRedis, t.report.PopupLightRedis, err = pass(brokerRedis, srv, service)
	}
	if serr := srv.stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("stop the server with the redis broker: %w", serr))
	}
	closeIdle()
	return err
}

// warmUp runs an unmeasured phase of kind on t for o.warmup, its requests sent through do, and
// counts what it stored among what t's store must hold at the end.
func warmUp(ctx context.Context, o options, t *target, label, kind string, mix callMix, do doer) error {
	t.newPhase()
	pr, err := runPhase(ctx, phaseSpecFor(o, t, "warm-"+label, o.warmup, kind), mix, do)
	t.sentCalls += pr.Calls
	t.sentEvents += pr.Events
	if err != nil {
		return fmt.Errorf("warm-up %s: %w", label, err)
	}
	return nil
}

// The popup brokers the popup phases run with.
const (
	brokerInProcess = "in-process"
	brokerRedis     = "redis"
)

// phaseSpecFor is the phase of kind on t.
func phaseSpecFor(o options, t *target, label string, d time.Duration, kind string) phaseSpec {
	ps := phaseSpec{label: label, workers: o.workers, duration: d, maxCalls: o.maxCalls}
	if kind == "raw" {
		ps.rawOrg = t.orgID
	}
	return ps
}

// mixAcc gathers what the rounds of one mix measured on one target.
type mixAcc struct {
	mr    mixReport
	mix   callMix
	lat   map[string][][]time.Duration // per kind, per request of the mix
	rates map[string][]float64         // per kind, events/s of each round
}

func newMixAcc(name string, mix callMix) *mixAcc {
	a := &mixAcc{
		mr: mixReport{Mix: name, Description: mixDescription(mix), LatencyByRequest: map[string]map[string]latencySummary{},
			Latency: map[string]latencySummary{}},
		mix:   mix,
		lat:   map[string][][]time.Duration{},
		rates: map[string][]float64{},
	}
	for _, kind := range phaseKinds() {
		a.lat[kind] = make([][]time.Duration, len(mix.reqs))
	}
	return a
}

// finish returns the mix's report: medians over the rounds, their ratios and the latencies.
func (a *mixAcc) finish() mixReport {
	mr := a.mr
	mr.ServiceEventsPerSec = median(a.rates["service"])
	mr.CeilingEventsPerSec = median(a.rates["ceiling"])
	mr.RawEventsPerSec = median(a.rates["raw"])
	mr.Ratio = ratio(mr.ServiceEventsPerSec, mr.CeilingEventsPerSec)
	mr.RawRatio = ratio(mr.ServiceEventsPerSec, mr.RawEventsPerSec)
	mr.CeilingRawRatio = ratio(mr.CeilingEventsPerSec, mr.RawEventsPerSec)
	for _, kind := range phaseKinds() {
		var all []time.Duration
		byReq := map[string]latencySummary{}
		for k := range a.mix.reqs {
			all = append(all, a.lat[kind][k]...)
			byReq[a.mix.reqs[k].name] = summarize(a.lat[kind][k])
		}
		mr.Latency[kind] = summarize(all)
		mr.LatencyByRequest[kind] = byReq
	}
	mr.requestNames = make([]string, len(a.mix.reqs))
	for k := range a.mix.reqs {
		mr.requestNames[k] = a.mix.reqs[k].name
	}
	return mr
}

// measurePhase runs one measured phase of kind on t and adds what it measured to acc.
func measurePhase(ctx context.Context, o options, t *target, acc *mixAcc, mix callMix, round int, kind string, logf func(string, ...any)) error {
	if err := t.srv.running(); err != nil {
		return err
	}
	mixName := acc.mr.Mix
	label := fmt.Sprintf("%s-r%d-%s", mixName, round, kind)
	stopProfile, err := startProfiles(ctx, o, mixName, round, kind, t.srv)
	if err != nil {
		return err
	}
	t.newPhase()
	var dbBefore, dbAfter dbSample
	if o.store == storePostgres {
		dbBefore = sampleDB(ctx, t.schemaURL)
	}
	base := "http://" + t.srv.addr
	rtBefore := sampleRuntime(ctx, t.client, base)
	before := sampleCPU(t.srv.cmd.Process.Pid)
	pr, err := runPhase(ctx, phaseSpecFor(o, t, label, o.duration, kind), mix, t.doers[kind])
	after := sampleCPU(t.srv.cmd.Process.Pid)
	rtAfter := sampleRuntime(ctx, t.client, base)
	if o.store == storePostgres {
		dbAfter = sampleDB(ctx, t.schemaURL)
	}
	if perr := stopProfile(); perr != nil {
		logf("profile: %v", perr)
	}
	if err != nil {
		return err
	}
	t.sentCalls += pr.Calls
	t.sentEvents += pr.Events
	var all []time.Duration
	for k := range pr.Lat {
		all = append(all, pr.Lat[k]...)
		acc.lat[kind][k] = append(acc.lat[kind][k], pr.Lat[k]...)
	}
	ls := summarize(all)
	p := phaseReport{Kind: kind, Round: round, Calls: pr.Calls, Requests: pr.Requests, Events: pr.Events,
		Seconds: pr.Elapsed.Seconds(), EventsPerSec: pr.EventsPerSec(), P50ms: ls.P50ms, P99ms: ls.P99ms,
		Database: dbBefore.delta(dbAfter, pr.Events)}
	if before.ok && after.ok {
		cores := func(a, b time.Duration) *float64 {
			c := (b - a).Seconds() / pr.Elapsed.Seconds()
			return &c
		}
		p.BenchCores = cores(before.bench, after.bench)
		p.ServerCores = cores(before.server, after.server)
		p.PostgresCores = cores(before.postgres, after.postgres)
	}
	if untold, steal, ok := hostShare(before, after, runtime.NumCPU()); ok {
		h := untold + steal
		p.HostShare = &h
	}
	if o.store == storeSQLite {
		if kind == "service" {
			p.WriterIO = ioPerEvent(before.serverIO, after.serverIO, pr.Events)
		} else {
			p.WriterIO = ioPerEvent(before.benchIO, after.benchIO, pr.Events)
		}
	}
	if after.serverRSS > 0 {
		m := float64(after.serverRSS) / (1 << 20)
		p.ServerRSSMiB = &m
	}
	if kind == "service" {
		p.ServerBytesPerEvent, p.ServerGCsPer10kEvents = runtimeDelta(rtBefore, rtAfter, pr.Events)
	}
	if after.serverPeak > 0 {
		t.peakRSS = max(t.peakRSS, float64(after.serverPeak)/(1<<20))
	}
	if after.serverFile > 0 {
		t.peakFile = max(t.peakFile, float64(after.serverFile)/(1<<20))
	}
	acc.mr.Phases = append(acc.mr.Phases, p)
	acc.rates[kind] = append(acc.rates[kind], p.EventsPerSec)
	logf("%s%s round %d %-7s %8.0f events/s  p50 %6.2fms  p99 %6.2fms", t.logName(), mixName, round, kind, p.EventsPerSec, p.P50ms, p.P99ms)
	return nil
}

// makeOrgAndKey creates the organization the bench reports for and a key federated to it with
// the org.calls.events scope, as `callwire orgs create` and `callwire keys create` do.
func makeOrgAndKey(ctx context.Context, st store.Store) (string, auth.Credential, error) {
	now := time.Now().UTC()
	org := store.Org{ID: "bench-" + now.Format("20060102T150405.000000000"), Name: "Bench Clinic", CreatedAt: now}
	if err := st.CreateOrg(ctx, org); err != nil {
		return "", auth.Credential{}, fmt.Errorf("create organization: %w", err)
	}
	cred := auth.NewCredential()
	key := store.Key{ClientID: cred.ClientID, OrgID: org.ID, Scopes: []string{"org.calls.events"},
		SecretHash: cred.SecretHash, SecretLast8: cred.SecretLast8, CreatedAt: now}
	if err := st.CreateKey(ctx, key); err != nil {
		return "", auth.Credential{}, fmt.Errorf("create key: %w", err)
	}
	return org.ID, cred, nil
}

// startProfiles starts the CPU profiles of the first round's phase of kind of a mix when
// -cpuprofile is set, and returns the function that stops and saves them: server-MIX.pprof and
// loadgen-MIX.pprof for the service phase, ceiling-MIX.pprof and raw-MIX.pprof (this process)
// for the others.
func startProfiles(ctx context.Context, o options, mix string, round int, kind string, srv *child) (func() error, error) {
	if o.cpuProfile == "" || round != 1 {
		return func() error { return nil }, nil
	}
	name := kind + "-" + mix + ".pprof"
	if kind == "service" {
		name = "loadgen-" + mix + ".pprof"
	}
	f, err := os.Create(filepath.Join(o.cpuProfile, name))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	serverDone := make(chan error, 1)
	if kind == "service" {
		go func() {
			serverDone <- srv.fetchProfile(ctx, o.duration, filepath.Join(o.cpuProfile, "server-"+mix+".pprof"))
		}()
	} else {
		serverDone <- nil
	}
	return func() error {
		pprof.StopCPUProfile()
		return errors.Join(f.Close(), <-serverDone)
	}, nil
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

// maxLightPopupP99ms is the popup latency aimed at for the 99th percentile at light load.
const maxLightPopupP99ms = 5.0

// maxHostShare is the most of the machine's CPU time its host may take during a phase before the
// report warns that the run's figures are not comparable.
const maxHostShare = 0.05

// maxServerRSSMiB is the most resident memory the server may use at sustained full load.
const maxServerRSSMiB = 64

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

// pingRedis checks that the Redis at url answers a PING within a few seconds.
func pingRedis(ctx context.Context, url string) error {
	ro, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	c := redis.NewClient(ro)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s does not answer: %w", ro.Addr, err)
	}
	return nil
}
