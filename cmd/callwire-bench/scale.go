package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/internal/haproxy"
)

// The scale run (-scale) measures what one `callwire serve` replica holds and what replicas
// carry together, on real processes: the server built from this tree, a redis-server and an
// HAProxy the bench starts, and the PostgreSQL of -database-url. See docs/scaling.md, "Sizing".

// scaleLocations are the locations the desks of each organization are spread over.
var scaleLocations = [...]string{"front-desk", "lab", "surgery", "pharmacy"}

// scaleOrg is one organization of the scale run, with a desk's key and a reporter's.
type scaleOrg struct {
	id             string
	desk, reporter auth.Credential
}

// scaleReport is what a scale run measured (-json prints it).
type scaleReport struct {
	Machine  machine        `json:"machine"`
	Settings scaleSettings  `json:"settings"`
	Streams  []streamRun    `json:"streams"`
	Replicas []replicaRun   `json:"replicas"`
	Storage  *storageReport `json:"storage,omitempty"`
}

type scaleSettings struct {
	Orgs         int      `json:"orgs"`
	Locations    []string `json:"locations"`
	Heartbeat    string   `json:"heartbeat"`
	HoldSeconds  float64  `json:"holdSeconds"`
	PopupRate    float64  `json:"popupRate"`
	PopupCalls   int      `json:"popupCalls"`
	Workers      int      `json:"workers"`
	PhaseSeconds float64  `json:"phaseSeconds"`
	MaxConns     int      `json:"maxConns"`
	NoFileLimit  uint64   `json:"noFileLimit"`
	MemoryLimit  string   `json:"memoryLimit"`
}

// streamRun is the streams one server held on one broker, level by level, and the popups at
// the highest level.
type streamRun struct {
	Broker string         `json:"broker"`
	Levels []streamLevel  `json:"levels"`
	Slopes []streamSlope  `json:"slopes"`
	Popups *streamPopups  `json:"popups,omitempty"`
	OpenMs latencySummary `json:"openMs"` // from dialling to the ready event, per stream
	// Refused counts the 503s desks met while opening their streams, each followed by a retry.
	Refused int64 `json:"refused"`
}

// streamPopups is the popup latency with the highest level of streams open: from the POST of a
// call_received to its arrival at each desk of the call's location.
type streamPopups struct {
	Streams    int            `json:"streams"`
	Calls      int            `json:"calls"`
	Rate       float64        `json:"rate"`
	Deliveries int            `json:"deliveries"`
	Missing    int            `json:"missing"`
	Repeats    int            `json:"repeats"`
	Latency    latencySummary `json:"latency"`
	PostP99ms  float64        `json:"postP99Ms"`
	// PostRetries counts the POSTs sent again after a 503.
	PostRetries int64 `json:"postRetries"`
}

// replicaRun is the realistic mix through HAProxy onto a number of replicas.
type replicaRun struct {
	Replicas     int     `json:"replicas"`
	Seconds      float64 `json:"seconds"`
	Calls        int64   `json:"calls"`
	Events       int64   `json:"events"`
	EventsPerSec float64 `json:"eventsPerSec"`
	P50ms        float64 `json:"p50Ms"`
	P99ms        float64 `json:"p99Ms"`
	// CPU time per event, in microseconds, of each kind of process: the replicas together,
	// HAProxy, the PostgreSQL backends serving the replicas' connections, the redis-server, and
	// the bench itself; PostgresAllUs is every postgres process of the machine's, the other
	// clients' backends and the server's own writers included.
	ServerUs      float64 `json:"serverUsPerEvent"`
	HAProxyUs     float64 `json:"haproxyUsPerEvent"`
	PostgresUs    float64 `json:"postgresUsPerEvent"`
	PostgresAllUs float64 `json:"postgresAllUsPerEvent"`
	RedisUs       float64 `json:"redisUsPerEvent"`
	BenchUs       float64 `json:"benchUsPerEvent"`
	// ServerCores are the cores the replicas used together; HostShare as in the other reports.
	ServerCores float64  `json:"serverCores"`
	HostShare   *float64 `json:"hostShare,omitempty"`
}

// storageReport is what PostgreSQL holds for a known number of calls of the realistic mix.
type storageReport struct {
	Calls  int64 `json:"calls"`
	Events int64 `json:"events"`
	// Bytes are pg_total_relation_size of each tenant table (rows, indexes and TOAST) as
	// written; Compacted after VACUUM FULL.
	Bytes     map[string]int64 `json:"bytes"`
	Compacted map[string]int64 `json:"compactedBytes"`
}

func (s *storageReport) total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// raiseNoFile raises this process's soft limit on open files to its hard limit, which the
// processes it starts inherit, and returns the limit in force.
func raiseNoFile() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("getrlimit: %w", err)
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return 0, fmt.Errorf("setrlimit: %w", err)
		}
	}
	return l.Cur, nil
}

// runScale is the scale run: streams held by one server on each broker, then events through
// 1, 2 and 3 replicas behind HAProxy, then the store's size per call.
func runScale(ctx context.Context, o options, stdout, stderr io.Writer) (err error) {
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	nofile, err := raiseNoFile()
	if err != nil {
		return err
	}
	logf("open files limit %d", nofile)
	// A stream is a connection at each end; on the Redis broker the server also holds a
	// connection to Redis for each.
	for _, n := range o.scaleStreams {
		if need := uint64(n) + 200; need > nofile {
			return fmt.Errorf("-scale-streams %d needs about %d open files in this process and the server; the limit is %d", n, need, nofile)
		}
	}
	for _, n := range o.scaleRedisStreams {
		if need := 2*uint64(n) + 200; need > nofile {
			return fmt.Errorf("-scale-redis-streams %d needs about %d open files in the server (a connection to the desk and one to Redis "+
				"for each stream); the limit is %d", n, need, nofile)
		}
	}
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i]())
		}
	}()
	tmp, err := os.MkdirTemp("", "callwire-bench-scale-")
	if err != nil {
		return err
	}
	closers = append(closers, func() error { return os.RemoveAll(tmp) })

	schema, schemaURL, pgVersion, err := createSchema(ctx, o.databaseURL)
	if err != nil {
		return err
	}
	logf("schema %s created (PostgreSQL %s)", schema, pgVersion)
	closers = append(closers, func() error {
		if o.keepSchema {
			logf("schema %s kept (-keep-schema)", schema)
			return nil
		}
		return dropSchema(ctx, o.databaseURL, schema)
	})
	serverURL, err := serverDatabaseURL(schemaURL)
	if err != nil {
		return err
	}
	// The servers' connections carry the schema's name, so that the CPU of their backends can be
	// told from that of the machine's other PostgreSQL clients.
	if serverURL, err = withApplicationName(serverURL, schema); err != nil {
		return err
	}
	pgConn, err := pgx.Connect(ctx, schemaURL)
	if err != nil {
		return err
	}
	closers = append(closers, func() error { return pgConn.Close(context.WithoutCancel(ctx)) })
	backends := func() map[int]time.Duration { return backendsCPU(ctx, pgConn, schema) }
	st, err := postgres.Open(ctx, schemaURL, postgres.Options{MaxConns: 4, AcquireTimeout: config.Defaults().Database.AcquireTimeout})
	if err != nil {
		return err
	}
	closers = append(closers, st.Close)
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	orgs, err := makeScaleOrgs(ctx, st, o.scaleOrgs)
	if err != nil {
		return err
	}
	logf("%d organizations, each with a desk's key and a reporter's", len(orgs))

	bin := o.serverBin
	if bin == "" {
		logf("building cmd/callwire")
		if bin, err = buildServer(ctx, tmp); err != nil {
			return err
		}
	}
	redisSrv, redisURL, err := startRedis(ctx, tmp, int(nofile)-100)
	if err != nil {
		return err
	}
	closers = append(closers, func() error { return stopProc(redisSrv) })
	logf("redis-server ready at %s (pid %d)", redisURL, redisSrv.cmd.Process.Pid)

	co := childOptions{argv: []string{bin, "serve"}, databaseURL: serverURL, maxConns: o.maxConns, dir: tmp,
		extraEnv: []string{config.EnvPrefix + "SERVER_MEMORY_LIMIT=0"}}
	rep := scaleReport{
		Machine: machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Memory: memTotal(), GOOS: runtime.GOOS,
			GOARCH: runtime.GOARCH, Go: runtime.Version(), Postgres: pgVersion},
		Settings: scaleSettings{Orgs: len(orgs), Locations: scaleLocations[:], Heartbeat: config.Defaults().Popups.Heartbeat.String(),
			HoldSeconds: o.scaleHold.Seconds(), PopupRate: o.scalePopupRate, PopupCalls: o.scalePopupCalls, Workers: o.workers,
			PhaseSeconds: o.duration.Seconds(), MaxConns: o.maxConns, NoFileLimit: nofile, MemoryLimit: "0 (off)"},
	}

	brokers := []struct {
		name   string
		redis  string
		levels []int
	}{{brokerInProcess, "", o.scaleStreams}, {brokerRedis, redisURL, o.scaleRedisStreams}}
	for _, b := range brokers {
		if len(b.levels) == 0 {
			continue
		}
		bo := co
		bo.redisURL = b.redis
		run, err := streamBench(ctx, o, bo, b.name, b.levels, orgs, redisSrv, logf)
		if err != nil {
			return fmt.Errorf("streams (%s broker): %w", b.name, err)
		}
		rep.Streams = append(rep.Streams, run)
	}

	if len(o.scaleReplicas) > 0 {
		// The storage figure counts only the replicas' calls, all of the realistic mix.
		if err := truncateTenantTables(ctx, schemaURL); err != nil {
			return err
		}
		ro := co
		ro.redisURL = redisURL
		for _, n := range o.scaleReplicas {
			r, err := replicaBench(ctx, o, ro, n, orgs[0], redisSrv, backends, tmp, logf)
			if err != nil {
				return fmt.Errorf("%d replicas: %w", n, err)
			}
			rep.Replicas = append(rep.Replicas, r)
		}
		if rep.Storage, err = measureStorage(ctx, schemaURL, logf); err != nil {
			return err
		}
	}

	if o.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printScale(stdout, rep)
	return nil
}

// makeScaleOrgs creates n organizations, each with a desk's key (org.popups.read and
// org.calls.read, as the desk page's) and a reporter's (org.calls.events).
func makeScaleOrgs(ctx context.Context, st store.Store, n int) ([]scaleOrg, error) {
	now := time.Now().UTC()
	stamp := now.Format("20060102T150405")
	orgs := make([]scaleOrg, n)
	for i := range orgs {
		org := store.Org{ID: fmt.Sprintf("scale-%04d-%s", i, stamp), Name: fmt.Sprintf("Clinic %d", i), CreatedAt: now}
		if err := st.CreateOrg(ctx, org); err != nil {
			return nil, fmt.Errorf("create organization: %w", err)
		}
		orgs[i].id = org.ID
		for _, k := range []struct {
			cred   *auth.Credential
			scopes []string
		}{{&orgs[i].desk, []string{auth.ScopePopupsRead, auth.ScopeCallsRead}}, {&orgs[i].reporter, []string{"org.calls.events"}}} {
			*k.cred = auth.NewCredential()
			if err := st.CreateKey(ctx, store.Key{ClientID: k.cred.ClientID, OrgID: org.ID, Scopes: k.scopes,
				SecretHash: k.cred.SecretHash, SecretLast8: k.cred.SecretLast8, CreatedAt: now}); err != nil {
				return nil, fmt.Errorf("create key: %w", err)
			}
		}
	}
	return orgs, nil
}

// deskPlace is where desk i sits: its organization and location, spread so that every
// organization's locations get desks alike.
func deskPlace(i, orgs int) (org, loc int) {
	return i % orgs, (i / orgs) % len(scaleLocations)
}

// startRedis starts a redis-server of the bench's own on a free loopback port, without
// persistence, taking up to maxClients clients, and returns it with its URL once it answers.
func startRedis(ctx context.Context, dir string, maxClients int) (*child, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	c, err := startProc(dir, "redis.log", "redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--maxclients", strconv.Itoa(min(maxClients, 100000)))
	if err != nil {
		return nil, "", fmt.Errorf("start redis-server (Debian package redis-server): %w", err)
	}
	url := "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := pingRedis(ctx, url); err == nil {
			return c, url, nil
		} else if time.Now().After(deadline) || c.running() != nil {
			return nil, "", errors.Join(fmt.Errorf("redis-server not answering: %w", err), c.stop())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startProc starts argv in dir, its output into the file logName there, as a child the bench
// stops with SIGTERM.
func startProc(dir, logName string, argv ...string) (*child, error) {
	logFile, err := os.Create(filepath.Join(dir, logName))
	if err != nil {
		return nil, err
	}
	c := &child{cmd: exec.Command(argv[0], argv[1:]...), exited: make(chan struct{})}
	c.cmd.Dir = dir
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	setChildAttrs(c.cmd)
	if err := c.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		logFile.Close()
		close(c.exited)
	}()
	return c, nil
}

// stopProc stops a child that startProc started: an exit on the SIGTERM is a clean one.
func stopProc(c *child) error {
	err := c.stop()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return err
}

// metricsClient reads the servers' /metrics.
var metricsClient = &http.Client{Timeout: 10 * time.Second}

// readGauges reads the server's /metrics at addr.
func readGauges(ctx context.Context, addr string) (serverGauges, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return serverGauges{}, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return serverGauges{}, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return serverGauges{}, fmt.Errorf("metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return serverGauges{}, fmt.Errorf("metrics: HTTP %d", resp.StatusCode)
	}
	return parseGauges(body)
}

// holdLevel samples the server every half second for hold and returns the level's figures: its
// settled gauges, the redis-server's resident memory (when redisPID is not 0), and the cores
// the server and PostgreSQL used meanwhile.
func holdLevel(ctx context.Context, srv *child, redisPID int, streams int, hold time.Duration) (streamLevel, error) {
	pid := srv.cmd.Process.Pid
	before := sampleCPU(pid)
	var samples []serverGauges
	end := time.Now().Add(hold)
	for {
		g, err := readGauges(ctx, srv.addr)
		if err != nil {
			return streamLevel{}, err
		}
		samples = append(samples, g)
		if time.Now().After(end) {
			break
		}
		select {
		case <-ctx.Done():
			return streamLevel{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	after := sampleCPU(pid)
	g, err := settled(samples)
	if err != nil {
		return streamLevel{}, err
	}
	// The level is what the server holds by its own count: a stream whose subscription ended
	// (its broker stopped answering) is gone from it, though the bench opened it.
	lv := streamLevel{Streams: int(g.Streams), Opened: streams, Server: g}
	if wall := after.at.Sub(before.at).Seconds(); wall > 0 {
		lv.ServerCores = (after.server - before.server).Seconds() / wall
		lv.PostgresCores = (after.postgres - before.postgres).Seconds() / wall
	}
	if redisPID > 0 {
		rss, _, _ := procMemory(strconv.Itoa(redisPID))
		lv.RedisRSS = float64(rss)
	}
	return lv, nil
}

// streamBench starts a server with co, opens the levels of streams one after the other, holds
// each for -scale-hold while sampling the server, then with the highest level open posts calls
// at -scale-popup-rate and times their popups to every desk of their location.
func streamBench(ctx context.Context, o options, co childOptions, broker string, levels []int, orgs []scaleOrg, redisSrv *child, logf func(string, ...any)) (run streamRun, err error) {
	run.Broker = broker
	srv, err := startServer(ctx, co)
	if err != nil {
		return run, err
	}
	var desks []*deskStream
	defer func() {
		for _, d := range desks {
			d.close()
		}
		if serr := srv.stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop server: %w", serr))
		}
	}()
	logf("streams (%s broker): server ready on %s", broker, srv.addr)
	redisPID := 0
	if co.redisURL != "" {
		redisPID = redisSrv.cmd.Process.Pid
	}
	// The first sample is of the server holding no stream, once it has settled.
	time.Sleep(2 * time.Second)
	base, err := holdLevel(ctx, srv, redisPID, 0, o.scaleHold)
	if err != nil {
		return run, err
	}
	run.Levels = append(run.Levels, base)
	got := newDeliveries()
	var openTimes []time.Duration
	var refused atomic.Int64
	defer func() { run.Refused = refused.Load() }()
	for _, n := range levels {
		start := time.Now()
		opened, times, err := openDesks(ctx, srv.addr, orgs, len(desks), n-len(desks), got.sink, &refused)
		desks = append(desks, opened...)
		openTimes = append(openTimes, times...)
		if err != nil {
			return run, err
		}
		logf("streams (%s broker): %d open (%d in %.1fs); holding %v", broker, len(desks), len(opened), time.Since(start).Seconds(), o.scaleHold)
		lv, err := holdLevel(ctx, srv, redisPID, len(desks), o.scaleHold)
		if err != nil {
			return run, err
		}
		run.Levels = append(run.Levels, lv)
		logf("streams (%s broker): %d streams held of %d opened: rss %.0f MiB, heap %.0f MiB, goroutines %.0f, fds %.0f, server %.2f cores",
			broker, lv.Streams, n, lv.Server.RSS/(1<<20), lv.Server.HeapAlloc/(1<<20), lv.Server.Goroutines, lv.Server.OpenFDs, lv.ServerCores)
	}
	run.Slopes = slopes(run.Levels)
	run.OpenMs = summarize(openTimes)
	if o.scalePopupCalls > 0 {
		p, err := popupsAtLevel(ctx, o, srv.addr, broker, orgs, desks, got, logf)
		if err != nil {
			return run, err
		}
		run.Popups = &p
	}
	return run, nil
}

// deskTries is how many times a desk asks for its stream while the server answers 503.
const deskTries = 30

// openDesks opens n desks, numbered from first, on the server at addr, 64 at a time, and
// returns them with the time each took to open (its refusals and pauses included), counting
// each 503 into refused.
func openDesks(ctx context.Context, addr string, orgs []scaleOrg, first, n int, sink deskSink, refused *atomic.Int64) ([]*deskStream, []time.Duration, error) {
	out := make([]*deskStream, n)
	times := make([]time.Duration, n)
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				mu.Lock()
				failed := firstErr != nil
				mu.Unlock()
				if failed {
					return
				}
				i := first + k
				org, loc := deskPlace(i, len(orgs))
				t0 := time.Now()
				d, err := openDesk(ctx, addr, orgs[org].desk.ClientID, orgs[org].desk.Secret, scaleLocations[loc], i, sink)
				// A desk refused with 503 comes back, as the desk page does, a second later.
				for try := 1; errors.Is(err, errUnavailable) && try < deskTries && ctx.Err() == nil; try++ {
					refused.Add(1)
					time.Sleep(time.Second)
					d, err = openDesk(ctx, addr, orgs[org].desk.ClientID, orgs[org].desk.Secret, scaleLocations[loc], i, sink)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				times[k] = time.Since(t0)
				out[k] = d
			}
		})
	}
	wg.Wait()
	var opened []*deskStream
	var ts []time.Duration
	for k, d := range out {
		if d != nil {
			opened = append(opened, d)
			ts = append(ts, times[k])
		}
	}
	return opened, ts, firstErr
}

// popupsAtLevel posts -scale-popup-calls lone call_received events, open loop at
// -scale-popup-rate, spread over the organizations and locations, each to the server with its
// organization's reporter key, and times each popup from its POST to its arrival at every desk
// of the call's location.
func popupsAtLevel(ctx context.Context, o options, addr, broker string, orgs []scaleOrg, desks []*deskStream, got *deliveries, logf func(string, ...any)) (streamPopups, error) {
	mix, err := newMix(mixRealistic)
	if err != nil {
		return streamPopups{}, err
	}
	// A call is owed to the desks of its place whose stream is still open.
	perPlace := map[[2]int]int{}
	open := 0
	for i, d := range desks {
		select {
		case <-d.done:
			continue
		default:
		}
		org, loc := deskPlace(i, len(orgs))
		perPlace[[2]int{org, loc}]++
		open++
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	place := map[string][2]int{}
	var posts []time.Duration
	var retries atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.scalePopupRate))
	defer tick.Stop()
	start := time.Now()
	label := "scale-" + strings.ReplaceAll(broker, "-", "")
	for j := range o.scalePopupCalls {
		org, loc := j%len(orgs), (j/len(orgs)+j)%len(scaleLocations)
		id := unitID(label, 0, j)
		place[id] = [2]int{org, loc}
		num := "+44207" + strconv.Itoa(1000000+j)
		body := mix.reqs[reqReceived].tmpl.render(id, time.Now().UTC().Format(time.RFC3339Nano), num, nil)
		body = bytes.Replace(body, []byte(`"locations":["front-desk"]`), []byte(`"locations":["`+scaleLocations[loc]+`"]`), 1)
		do := httpDoer(client, "http://"+addr+"/api/v1/calls/events", orgs[org].reporter.ClientID, orgs[org].reporter.Secret)
		wg.Go(func() {
			t0 := time.Now()
			got.posted(id, t0)
			err := do(ctx, request{kind: reqReceived, body: body})
			// A 503 asks the reporter to send again, as the SDK does; the popup is timed from
			// the first POST.
			for try := 1; err != nil && strings.HasPrefix(err.Error(), "HTTP 503") && try < 5 && ctx.Err() == nil; try++ {
				retries.Add(1)
				time.Sleep(time.Second)
				err = do(ctx, request{kind: reqReceived, body: body})
			}
			mu.Lock()
			defer mu.Unlock()
			posts = append(posts, time.Since(t0))
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("post call %d: %w", j, err)
			}
		})
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	wg.Wait()
	if firstErr != nil {
		return streamPopups{}, firstErr
	}
	elapsed := time.Since(start)
	time.Sleep(2 * time.Second) // popups of the last calls may still be on their way
	ds, missing, dups := got.latencies(func(id string) int { return perPlace[place[id]] })
	s := summarize(ds)
	p := streamPopups{Streams: open, Calls: o.scalePopupCalls, Rate: float64(o.scalePopupCalls) / elapsed.Seconds(),
		Deliveries: len(ds), Missing: missing, Repeats: dups, Latency: s, PostP99ms: summarize(posts).P99ms, PostRetries: retries.Load()}
	logf("popups (%s broker, %d streams): %d calls, %d deliveries (%d missing), p50 %.2fms p99 %.2fms", broker, open,
		p.Calls, p.Deliveries, p.Missing, s.P50ms, s.P99ms)
	return p, nil
}

// startHAProxy starts HAProxy in front of the servers, configured as the cluster topology's
// (internal/haproxy), and returns it with its address once a
// request through it is answered.
func startHAProxy(ctx context.Context, dir string, servers []*child) (*child, string, error) {
	bin := haproxy.Path()
	if bin == "" {
		return nil, "", errors.New("haproxy not found: apt-get install -y -q haproxy")
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	backends := make([]haproxy.Server, len(servers))
	for i, s := range servers {
		backends[i] = haproxy.Server{Name: "serve" + strconv.Itoa(i+1), Addr: s.addr}
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxy.Config(addr, backends, "")), 0o600); err != nil {
		return nil, "", err
	}
	if out, err := exec.CommandContext(ctx, bin, "-c", "-q", "-f", cfg).CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("haproxy -c: %w: %s", err, bytes.TrimSpace(out))
	}
	c, err := startProc(dir, "haproxy.log", bin, "-db", "-f", cfg)
	if err != nil {
		return nil, "", err
	}
	c.addr = addr
	if err := c.waitReady(ctx, 20*time.Second); err != nil {
		return nil, "", errors.Join(err, c.stop())
	}
	// Every replica passes its first checks (two, 500ms apart) before the load starts.
	time.Sleep(1500 * time.Millisecond)
	return c, addr, nil
}

// replicaBench starts n servers with co, HAProxy in front, and runs the realistic mix through
// HAProxy with -workers workers for -duration after a -warmup, reporting events per second and
// each kind of process's CPU per event.
func replicaBench(ctx context.Context, o options, co childOptions, n int, org scaleOrg, redisSrv *child,
	backends func() map[int]time.Duration, dir string, logf func(string, ...any)) (r replicaRun, err error) {
	r.Replicas = n
	var servers []*child
	defer func() {
		for _, s := range servers {
			if serr := s.stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("stop server: %w", serr))
			}
		}
	}()
	for range n {
		s, err := startServer(ctx, co)
		if err != nil {
			return r, err
		}
		servers = append(servers, s)
	}
	lb, addr, err := startHAProxy(ctx, dir, servers)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, stopProc(lb)) }()
	logf("%d replicas behind HAProxy at %s", n, addr)
	mix, err := newMix(mixRealistic)
	if err != nil {
		return r, err
	}
	wc, err := newWireClient(addr, "/api/v1/calls/events", []string{
		"Content-Type: application/json", "Client-ID: " + org.reporter.ClientID, "Client-Secret: " + org.reporter.Secret,
	}, 30*time.Second)
	if err != nil {
		return r, err
	}
	defer wc.CloseIdle()
	do := wireDoer(wc)
	label := "scale-r" + strconv.Itoa(n)
	if o.warmup > 0 {
		if _, err := runPhase(ctx, phaseSpec{label: label + "-warm", workers: o.workers, duration: o.warmup, maxCalls: o.maxCalls}, mix, do); err != nil {
			return r, fmt.Errorf("warm-up: %w", err)
		}
	}
	pids := func() (srvCPU, lbCPU, redisCPU time.Duration) {
		for _, s := range servers {
			t, _ := procCPU(strconv.Itoa(s.cmd.Process.Pid))
			srvCPU += t
		}
		lbCPU, _ = procCPU(strconv.Itoa(lb.cmd.Process.Pid))
		redisCPU, _ = procCPU(strconv.Itoa(redisSrv.cmd.Process.Pid))
		return srvCPU, lbCPU, redisCPU
	}
	before := sampleCPU(0)
	s0, l0, r0 := pids()
	b0 := backends()
	pr, err := runPhase(ctx, phaseSpec{label: label, workers: o.workers, duration: o.duration, maxCalls: o.maxCalls}, mix, do)
	b1 := backends()
	s1, l1, r1 := pids()
	after := sampleCPU(0)
	if err != nil {
		return r, err
	}
	var all []time.Duration
	for _, l := range pr.Lat {
		all = append(all, l...)
	}
	lat := summarize(all)
	r.Seconds, r.Calls, r.Events, r.EventsPerSec, r.P50ms, r.P99ms = pr.Elapsed.Seconds(), pr.Calls, pr.Events, pr.EventsPerSec(), lat.P50ms, lat.P99ms
	r.ServerUs = perEvent((s1 - s0).Seconds(), pr.Events)
	r.HAProxyUs = perEvent((l1 - l0).Seconds(), pr.Events)
	r.RedisUs = perEvent((r1 - r0).Seconds(), pr.Events)
	r.PostgresUs = perEvent(cpuGrowth(b0, b1).Seconds(), pr.Events)
	r.PostgresAllUs = perEvent((after.postgres - before.postgres).Seconds(), pr.Events)
	r.BenchUs = perEvent((after.bench - before.bench).Seconds(), pr.Events)
	if wall := after.at.Sub(before.at).Seconds(); wall > 0 {
		r.ServerCores = (s1 - s0).Seconds() / wall
	}
	if untold, steal, ok := hostShare(before, after, runtime.NumCPU()); ok {
		h := untold + steal
		r.HostShare = &h
	}
	logf("%d replicas: %.0f events/s, p99 %.1fms; CPU per event: replicas %.0fµs, haproxy %.0fµs, postgres backends %.0fµs (all postgres %.0fµs), redis %.0fµs",
		n, r.EventsPerSec, r.P99ms, r.ServerUs, r.HAProxyUs, r.PostgresUs, r.PostgresAllUs, r.RedisUs)
	return r, nil
}

// withApplicationName returns the postgres:// URL u with its application_name parameter set
// to name.
func withApplicationName(u, name string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("database url: %w", err)
	}
	q := pu.Query()
	q.Set("application_name", name)
	pu.RawQuery = q.Encode()
	return pu.String(), nil
}

// backendsCPU returns the CPU time so far of each PostgreSQL backend whose connection is named
// name (application_name), by process id; none when PostgreSQL does not tell.
func backendsCPU(ctx context.Context, conn *pgx.Conn, name string) map[int]time.Duration {
	out := map[int]time.Duration{}
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", name)
	if err != nil {
		return out
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return out
	}
	for _, pid := range pids {
		t, _ := procCPU(strconv.Itoa(int(pid)))
		out[int(pid)] = t
	}
	return out
}

// cpuGrowth is the CPU time the processes of after spent since before: a process absent from
// before started since, from nothing; one absent from after ended, and its last part is lost.
func cpuGrowth(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		d += max(0, t-before[pid])
	}
	return d
}

// tenantTables returns the tables of the schema of conn that carry org_id, but for the
// organizations and their keys: the tables that grow with the calls.
func tenantTables(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT c.table_name FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = current_schema() AND c.column_name = 'org_id' AND t.table_type = 'BASE TABLE'
		AND c.table_name NOT IN ('orgs', 'api_keys') ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list tenant tables: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list tenant tables: %w", err)
	}
	if len(names) == 0 {
		return nil, errors.New("no tenant tables in the schema")
	}
	return names, nil
}

// truncateTenantTables empties the tenant tables, so that what the store holds afterwards is
// what the runs after it wrote.
func truncateTenantTables(ctx context.Context, schemaURL string) error {
	conn, err := pgx.Connect(ctx, schemaURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	names, err := tenantTables(ctx, conn)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "TRUNCATE "+strings.TrimPrefix(joinIdents(names), ", ")); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	return nil
}

// joinIdents returns ", " then each name quoted as an identifier, each after ", ".
func joinIdents(names []string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(", ")
		b.WriteString(pgx.Identifier{n}.Sanitize())
	}
	return b.String()
}

// measureStorage counts the calls and events on file and the size of each tenant table, as
// written and after VACUUM FULL.
func measureStorage(ctx context.Context, schemaURL string, logf func(string, ...any)) (*storageReport, error) {
	conn, err := pgx.Connect(ctx, schemaURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	names, err := tenantTables(ctx, conn)
	if err != nil {
		return nil, err
	}
	s := &storageReport{Bytes: map[string]int64{}, Compacted: map[string]int64{}}
	if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM calls), (SELECT count(*) FROM call_events)").Scan(&s.Calls, &s.Events); err != nil {
		return nil, fmt.Errorf("count: %w", err)
	}
	sizes := func(into map[string]int64) error {
		for _, n := range names {
			var b int64
			if err := conn.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)", pgx.Identifier{n}.Sanitize()).Scan(&b); err != nil {
				return fmt.Errorf("size of %s: %w", n, err)
			}
			into[n] = b
		}
		return nil
	}
	if err := sizes(s.Bytes); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, err := conn.Exec(ctx, "VACUUM FULL "+pgx.Identifier{n}.Sanitize()); err != nil {
			return nil, fmt.Errorf("vacuum full %s: %w", n, err)
		}
	}
	if err := sizes(s.Compacted); err != nil {
		return nil, err
	}
	logf("store: %d calls, %d events: %.1f MiB as written, %.1f MiB compacted", s.Calls, s.Events,
		float64(s.total(s.Bytes))/(1<<20), float64(s.total(s.Compacted))/(1<<20))
	return s, nil
}

// printScale writes the scale report for people.
func printScale(w io.Writer, r scaleReport) {
	m := r.Machine
	fmt.Fprintf(w, "callwire scale run: %d CPUs, %s, %s %s/%s, PostgreSQL %s\n", m.CPUs, m.Memory, m.Go, m.GOOS, m.GOARCH, m.Postgres)
	s := r.Settings
	fmt.Fprintf(w, "%d organizations × %d locations; popup heartbeat %s; server memory limit %s; open files limit %d\n",
		s.Orgs, len(s.Locations), s.Heartbeat, s.MemoryLimit, s.NoFileLimit)
	for _, run := range r.Streams {
		fmt.Fprintf(w, "\npopup streams held by one server (%s broker), each level held %.0fs:\n", run.Broker, s.HoldSeconds)
		fmt.Fprintf(w, "  %8s %9s %9s %9s %11s %6s %10s %10s %9s\n", "streams", "rss MiB", "heap MiB", "stack MiB", "goroutines", "fds", "redis MiB", "srv cores", "pg cores")
		for _, l := range run.Levels {
			ended := ""
			if l.Opened != l.Streams {
				ended = fmt.Sprintf("  (%d opened: %d ended)", l.Opened, l.Opened-l.Streams)
			}
			fmt.Fprintf(w, "  %8d %9.1f %9.1f %9.1f %11.0f %6.0f %10.1f %10.3f %9.3f%s\n", l.Streams, l.Server.RSS/(1<<20), l.Server.HeapAlloc/(1<<20),
				l.Server.StackInuse/(1<<20), l.Server.Goroutines, l.Server.OpenFDs, l.RedisRSS/(1<<20), l.ServerCores, l.PostgresCores, ended)
		}
		fmt.Fprintf(w, "  per stream, the slope between levels:\n")
		fmt.Fprintf(w, "  %13s %9s %10s %11s %11s %5s %11s %16s\n", "levels", "rss KiB", "heap KiB", "stack KiB", "goroutines", "fds", "redis KiB", "cores per 1000")
		for _, sl := range run.Slopes {
			fmt.Fprintf(w, "  %13s %9.1f %10.1f %11.1f %11.2f %5.2f %11.1f %16.3f\n", sl.Span, sl.RSSBytes/1024, sl.HeapBytes/1024, sl.StackBytes/1024,
				sl.Goroutines, sl.FDs, sl.RedisRSSBytes/1024, sl.ServerCoresPer1k)
		}
		fmt.Fprintf(w, "  opening a stream (dial to ready event, 64 at a time, retries after a 503 included): p50 %.1fms, p99 %.1fms; 503s met: %d\n",
			run.OpenMs.P50ms, run.OpenMs.P99ms, run.Refused)
		if p := run.Popups; p != nil {
			fmt.Fprintf(w, "  popups with %d streams open: %d calls at %.1f/s, %d deliveries to the desks of their location (%d missing, %d repeated):\n",
				p.Streams, p.Calls, p.Rate, p.Deliveries, p.Missing, p.Repeats)
			fmt.Fprintf(w, "    POST to arrival p50 %.2fms, p99 %.2fms, max %.2fms; the POSTs' p99 %.2fms, %d sent again after a 503\n",
				p.Latency.P50ms, p.Latency.P99ms, p.Latency.MaxMs, p.PostP99ms, p.PostRetries)
		}
	}
	if len(r.Replicas) > 0 {
		fmt.Fprintf(w, "\nevents through HAProxy onto replicas (realistic mix, %d workers, %.0fs; CPU per event in µs):\n", s.Workers, s.PhaseSeconds)
		fmt.Fprintf(w, "  %8s %9s %8s %9s %9s %9s %8s %9s %7s %6s %12s %10s\n", "replicas", "events/s", "p99 ms", "replicas", "haproxy", "pg (own)", "pg (all)", "redis", "bench", "host", "srv cores", "ev/s/core")
		for _, x := range r.Replicas {
			host := "-"
			if x.HostShare != nil {
				host = fmt.Sprintf("%.0f%%", *x.HostShare*100)
			}
			fmt.Fprintf(w, "  %8d %9.0f %8.1f %9.0f %9.0f %9.0f %8.0f %9.0f %7.0f %6s %12.2f %10.0f\n", x.Replicas, x.EventsPerSec, x.P99ms, x.ServerUs, x.HAProxyUs,
				x.PostgresUs, x.PostgresAllUs, x.RedisUs, x.BenchUs, host, x.ServerCores, eventsPerCore(x.ServerUs))
		}
		fmt.Fprintf(w, "  (ev/s/core: events a second one core of replicas carries at the replicas' CPU per event; pg (own): the backends of the replicas' "+
			"connections; pg (all): every postgres process of the machine, other clients' and the server's writers included)\n")
	}
	if st := r.Storage; st != nil && st.Calls > 0 {
		fmt.Fprintf(w, "\nPostgreSQL after the replica runs: %d calls, %d events (5 a call, the realistic mix's bodies)\n", st.Calls, st.Events)
		fmt.Fprintf(w, "  %-22s %12s %14s\n", "table", "as written", "compacted")
		for _, name := range slices.Sorted(maps.Keys(st.Bytes)) {
			fmt.Fprintf(w, "  %-22s %10.1f MiB %12.1f MiB\n", name, float64(st.Bytes[name])/(1<<20), float64(st.Compacted[name])/(1<<20))
		}
		tw, tc := float64(st.total(st.Bytes)), float64(st.total(st.Compacted))
		fmt.Fprintf(w, "  per call: %.0f bytes as written, %.0f compacted: %.2f and %.2f GiB per million calls\n",
			tw/float64(st.Calls), tc/float64(st.Calls), tw/float64(st.Calls)*1e6/(1<<30), tc/float64(st.Calls)*1e6/(1<<30))
	}
}
