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

// maxLightPopupP99ms is the popup latency aimed at for the 99th percentile at light load.
const maxLightPopupP99ms = 5.0

// maxHostShare is the most of the machine's CPU time its host may take during a phase before the
// report warns that the run's figures are not comparable.
const maxHostShare = 0.05

// maxServerRSSMiB is the most resident memory the server may use at sustained full load.
const maxServerRSSMiB = 64

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
