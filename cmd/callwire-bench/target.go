package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/callwire/callwire/core/auth"
	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/ingest"
	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/core/store/sqlite"
)

// target is one store under test: its database (a PostgreSQL schema or an embedded store's
// file), the organization and key the bench reports with, the server writing it, and what each
// kind of phase sends its requests through. A run measures one target, or two in a growth run
// (-growth), an empty store and a preloaded one side by side.
type target struct {
	name      string // "" alone; "empty" or "full" in a growth run
	st        benchStore
	schemaURL string     // postgres
	lite      *sqliteRaw // sqlite
	dbPath    string     // sqlite
	pool      *pgxpool.Pool
	orgID     string
	cred      auth.Credential // the key of orgID the service's requests carry
	srv       *child
	srvOpts   childOptions // how srv was started
	client    *http.Client
	doers     map[string]doer
	newPhase  func() // closes idle connections, so that each phase dials afresh

	pgVersion, liteVersion, serverDesc string

	// What the target's phases did: every call and event reported, to check against what is on
	// file at the end, the server's peak memory, and the report being written.
	sentCalls, sentEvents int64
	peakRSS, peakFile     float64 // MiB
	report                report

	closers []func() error // run in reverse order by close
}

// logName is how the bench's log names the target: "" alone, "empty " or "full " in a growth run.
func (t *target) logName() string {
	if t.name == "" {
		return ""
	}
	return t.name + " "
}

// defers adds f to what close runs.
func (t *target) defers(f func() error) { t.closers = append(t.closers, f) }

// close releases what openTarget acquired, last first: the server stopped with SIGTERM, the
// pools closed, the schema dropped (unless -keep-schema), the temporary directory removed.
func (t *target) close() error {
	var err error
	for i := len(t.closers) - 1; i >= 0; i-- {
		err = errors.Join(err, t.closers[i]())
	}
	t.closers = nil
	return err
}

// openTarget makes a fresh store of kind o.store, migrates it, creates the organization and key,
// and starts the server on it. On an error it releases what it had acquired.
func openTarget(ctx context.Context, o options, name string, logf func(string, ...any)) (_ *target, err error) {
	t := &target{name: name}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.close())
		}
	}()
	tmp, err := os.MkdirTemp("", "callwire-bench-")
	if err != nil {
		return nil, err
	}
	t.defers(func() error { return os.RemoveAll(tmp) })
	co := childOptions{maxConns: o.maxConns, dir: tmp}

	// The store of the ceiling, sized like the server's pool, and the raw-SQL ceiling's writer.
	// The first also migrates the schema and makes the organization and key.
	var rawDo doer
	switch o.store {
	case storePostgres:
		var schema string
		schema, t.schemaURL, t.pgVersion, err = createSchema(ctx, o.databaseURL)
		if err != nil {
			return nil, err
		}
		logf("%sschema %s created (PostgreSQL %s)", t.logName(), schema, t.pgVersion)
		t.defers(func() error {
			if o.keepSchema {
				logf("%sschema %s kept (-keep-schema); drop it with DROP SCHEMA %s CASCADE", t.logName(), schema, schema)
				return nil
			}
			if err := dropSchema(ctx, o.databaseURL, schema); err != nil {
				return err
			}
			logf("%sschema %s dropped", t.logName(), schema)
			return nil
		})
		if co.databaseURL, err = serverDatabaseURL(t.schemaURL); err != nil {
			return nil, err
		}
		pst, err := postgres.Open(ctx, t.schemaURL, postgres.Options{
			MaxConns: int32(o.maxConns), AcquireTimeout: config.Defaults().Database.AcquireTimeout,
		})
		if err != nil {
			return nil, err
		}
		t.st = pst
		t.defers(pst.Close)
		pcfg, err := pgxpool.ParseConfig(t.schemaURL)
		if err != nil {
			return nil, fmt.Errorf("raw ceiling: %w", err)
		}
		pcfg.MaxConns = int32(o.maxConns)
		if t.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
			return nil, fmt.Errorf("raw ceiling: %w", err)
		}
		t.defers(func() error { t.pool.Close(); return nil })
		rawDo = rawDoer(t.pool)
	case storeSQLite:
		// One file, written in turn by the server, by the ceiling's store in this process and by
		// the raw ceiling, as several processes may share the embedded store's file.
		t.dbPath = filepath.Join(tmp, "callwire.db")
		co.databasePath = t.dbPath
		sst, err := sqlite.Open(ctx, t.dbPath)
		if err != nil {
			return nil, err
		}
		t.st = sst
		t.defers(sst.Close)
		if t.lite, err = openSQLiteRaw(t.dbPath); err != nil {
			return nil, err
		}
		t.defers(func() error { return t.lite.close() })
		if err := t.lite.db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&t.liteVersion); err != nil {
			return nil, fmt.Errorf("raw ceiling: %w", err)
		}
		logf("%sembedded store %s (SQLite %s)", t.logName(), t.dbPath, t.liteVersion)
		rawDo = sqliteRawDoer(t.lite)
	default:
		return nil, fmt.Errorf("unknown store %q", o.store)
	}
	// A server binary given by -server-bin may be of another commit than the bench. It migrates
	// the store first, and the bench's own migrations must then find nothing to apply: a bench
	// newer than the server would otherwise leave the server on a schema it was not built for,
	// whose indexes its statements do not expect, and measure that instead of the server.
	var serverSchema int64
	if o.serverBin != "" {
		if err := migrateWith(ctx, o.serverBin, co); err != nil {
			return nil, err
		}
		if serverSchema, err = t.schemaVersion(ctx); err != nil {
			return nil, err
		}
	}
	if err := t.st.Migrate(ctx); err != nil {
		return nil, err
	}
	if o.serverBin != "" {
		v, err := t.schemaVersion(ctx)
		if err != nil {
			return nil, err
		}
		if v != serverSchema {
			return nil, fmt.Errorf("%s migrates the store to version %d and this bench to %d: "+
				"measure a server with the bench built from the same commit (docs/benchmarks.md)", o.serverBin, serverSchema, v)
		}
	}
	orgID, cred, err := makeOrgAndKey(ctx, t.st)
	if err != nil {
		return nil, err
	}
	t.orgID, t.cred = orgID, cred

	t.serverDesc = "callwire serve"
	switch {
	case o.cpuProfile != "":
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(o.cpuProfile, 0o755); err != nil {
			return nil, err
		}
		co.argv, co.profiled = []string{self, serveProfiledCmd}, true
		t.serverDesc = "callwire serve wiring + pprof (callwire-bench " + serveProfiledCmd + ")"
	case o.serverBin != "":
		co.argv = []string{o.serverBin, "serve"}
	default:
		logf("building cmd/callwire")
		bin, err := buildServer(ctx, tmp)
		if err != nil {
			return nil, err
		}
		co.argv = []string{bin, "serve"}
	}
	t.srvOpts = co
	if t.srv, err = startServer(ctx, co); err != nil {
		return nil, err
	}
	t.defers(func() error {
		if err := t.srv.stop(); err != nil {
			return fmt.Errorf("stop server: %w", err)
		}
		return nil
	})
	logf("%sserver ready on %s (%s)", t.logName(), t.srv.addr, t.serverDesc)

	svc, err := ingest.New(ingest.Options{Writer: t.st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		Proxy:               nil, // 127.0.0.1 only
		MaxIdleConns:        2 * o.workers,
		MaxIdleConnsPerHost: 2 * o.workers,
		IdleConnTimeout:     2 * time.Minute,
		DisableCompression:  true,
	}
	t.defers(func() error { transport.CloseIdleConnections(); return nil })
	t.client = &http.Client{Transport: transport, Timeout: 30 * time.Second}
	service, closeIdle, err := t.serviceDoer(o.client, t.srv.addr)
	if err != nil {
		return nil, err
	}
	t.defers(func() error { closeIdle(); return nil })
	t.doers = map[string]doer{
		"service": service,
		"ceiling": storeDoer(svc, orgID),
		"raw":     rawDo,
	}
	t.newPhase = func() {
		closeIdle()
		transport.CloseIdleConnections()
	}
	return t, nil
}

// preload stores events before the rounds (-preload), PostgreSQL's with COPY.
func (t *target) preload(ctx context.Context, events int64, logf func(string, ...any)) error {
	var (
		calls, stored int64
		err           error
	)
	if t.lite != nil {
		calls, stored, err = preloadSQLite(ctx, t.dbPath, t.orgID, events, logf)
	} else {
		calls, stored, err = preloadPostgres(ctx, t.pool, t.orgID, events, logf)
	}
	if err != nil {
		return err
	}
	t.sentCalls += calls
	t.sentEvents += stored
	t.report.Settings.Preloaded = stored
	return nil
}

// countOnFile returns the calls and events the target's store holds.
func (t *target) countOnFile(ctx context.Context) (calls, events int64, err error) {
	if t.lite != nil {
		return countSQLite(ctx, t.lite)
	}
	return countEvents(ctx, t.schemaURL)
}

// serviceDoer returns the doer that posts the service's requests, with t's key, to the server
// at addr through the load generator's client (-client: wire or net), and the function that
// closes its idle connections.
func (t *target) serviceDoer(client, addr string) (doer, func(), error) {
	if client == "net" {
		return httpDoer(t.client, "http://"+addr+"/api/v1/calls/events", t.cred.ClientID, t.cred.Secret), func() {}, nil
	}
	wc, err := newWireClient(addr, "/api/v1/calls/events", []string{
		"Content-Type: application/json", "Client-ID: " + t.cred.ClientID, "Client-Secret: " + t.cred.Secret,
	}, 30*time.Second)
	if err != nil {
		return nil, nil, err
	}
	return wireDoer(wc), wc.CloseIdle, nil
}

// startRedisServer starts a second server on t's store, as t's was started but publishing its
// popups through the Redis broker at redisURL, and returns it with a doer that posts the
// service's requests to it (-client). The caller stops the server, then calls the returned
// function, which closes the doer's idle connections.
func (t *target) startRedisServer(ctx context.Context, redisURL, client string) (*child, doer, func(), error) {
	co := t.srvOpts
	co.redisURL = redisURL
	srv, err := startServer(ctx, co)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("server with the redis broker: %w", err)
	}
	service, closeIdle, err := t.serviceDoer(client, srv.addr)
	if err != nil {
		return nil, nil, nil, errors.Join(err, srv.stop())
	}
	return srv, service, closeIdle, nil
}

// schemaVersion returns the version of the latest migration applied to the store.
func (t *target) schemaVersion(ctx context.Context) (int64, error) {
	const q = `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`
	var v int64
	var err error
	if t.pool != nil {
		err = t.pool.QueryRow(ctx, q).Scan(&v)
	} else {
		err = t.lite.db.QueryRowContext(ctx, q).Scan(&v)
	}
	if err != nil {
		return 0, fmt.Errorf("read the schema's version: %w", err)
	}
	return v, nil
}
