package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/callwire/callwire/core/store/postgres"
	"github.com/callwire/callwire/core/store/sqlite"
	"github.com/callwire/callwire/internal/pgurl"
)

// A read bench's store is filled once and kept: a PostgreSQL schema events_<N> in a database of
// the bench's own (-read-database), or a file readbench-<N>.db in -read-dir, N being the events
// asked for. The table readbench_fill beside the store's records what the fill wrote and the
// schema version it wrote under. A later run reuses the store when that row is there and the
// store's migrations had nothing to apply; otherwise (an interrupted fill, or a newer schema,
// whose migrations would not bring old rows to what the new write path makes) it empties the
// store and fills it again. A fill interrupted under the same schema is resumed (see
// fillReadStore).

// readFillTable records a finished fill.
const readFillTable = `CREATE TABLE readbench_fill (events bigint NOT NULL, calls bigint NOT NULL,
	schema_version bigint NOT NULL, seconds double precision NOT NULL, filled_at text NOT NULL)`

// readStore is a read bench's store, open and filled.
type readStore struct {
	kind   string // storePostgres or storeSQLite
	st     benchStore
	where  string       // the schema or file, for the report
	co     childOptions // how a server is started on it
	fill   readFillInfo
	reused bool
	close  func() error
}

// readFillInfo is the readbench_fill row.
type readFillInfo struct {
	Events        int64   `json:"events"`
	Calls         int64   `json:"calls"`
	SchemaVersion int64   `json:"schemaVersion"`
	Seconds       float64 `json:"fillSeconds"`
	FilledAt      string  `json:"filledAt"`
}

// rowScanner runs query and scans its one row into dest: either database's, as readFillState
// asks.
type rowScanner func(ctx context.Context, query string, dest ...any) error

// readFillState returns the fill's row (ok false when there is none) and the schema version the
// store's migrations reached (0 when none ran).
func readFillState(ctx context.Context, scan rowScanner) (info readFillInfo, ok bool, version int64) {
	if err := scan(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version`, &version); err != nil {
		version = 0
	}
	err := scan(ctx, `SELECT events, calls, schema_version, seconds, filled_at FROM readbench_fill`,
		&info.Events, &info.Calls, &info.SchemaVersion, &info.Seconds, &info.FilledAt)
	return info, err == nil, version
}

// readFillPlan is what to do with a store found on file.
type readFillPlan int

const (
	readReuse  readFillPlan = iota // a finished fill under the current schema
	readResume                     // an unfinished fill under the current schema
	readAfresh                     // nothing, a newer schema, or -read-refill: empty it and fill
)

// planReadFill decides what to do with a store whose fill row was found (filled) and whose
// schema version was before before its migrations ran and after after.
func planReadFill(filled bool, before, after int64, refill bool) readFillPlan {
	switch {
	case refill || before == 0 || before != after:
		return readAfresh
	case filled:
		return readReuse
	}
	return readResume
}

// openReadStore opens (creating it when needed) the read bench's store of kind holding events
// events, fills it unless a finished fill under the current schema is on file, and returns it.
func openReadStore(ctx context.Context, o options, kind string, events int64, logf func(string, ...any)) (*readStore, error) {
	if kind == storePostgres {
		return openReadPostgres(ctx, o, events, logf)
	}
	return openReadSQLite(ctx, o, events, logf)
}

func openReadSQLite(ctx context.Context, o options, events int64, logf func(string, ...any)) (rs *readStore, err error) {
	dir := o.readDir
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("-read-dir: %w", err)
		}
		dir = filepath.Join(cache, "callwire-bench")
	}
	path := filepath.Join(dir, "readbench-"+strconv.FormatInt(events, 10)+".db")
	open := func() (*sqlite.Store, readFillInfo, bool, int64, error) {
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			return nil, readFillInfo{}, false, 0, err
		}
		raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			st.Close()
			return nil, readFillInfo{}, false, 0, err
		}
		defer raw.Close()
		scan := func(ctx context.Context, q string, dest ...any) error {
			return raw.QueryRowContext(ctx, q).Scan(dest...)
		}
		info, ok, before := readFillState(ctx, scan)
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, readFillInfo{}, false, 0, err
		}
		_, _, after := readFillState(ctx, scan)
		return st, info, ok && before == after && !o.readRefill, after, nil
	}
	st, info, ok, _, err := open()
	if err != nil {
		return nil, err
	}
	rs = &readStore{kind: storeSQLite, where: path, co: childOptions{databasePath: path}, fill: info, reused: ok}
	if !ok {
		st.Close()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
		logf("embedded store %s: filling with %d events", path, events)
		var version int64
		if st, _, _, version, err = open(); err != nil {
			return nil, err
		}
		res, err := fillReadStore(ctx, st, events, 2, logf)
		if err != nil {
			return nil, errors.Join(err, st.Close())
		}
		rs.fill = readFillInfo{Events: res.events, Calls: res.calls, SchemaVersion: version, Seconds: res.took.Seconds(),
			FilledAt: time.Now().UTC().Format(time.RFC3339)}
		if err := st.Close(); err != nil {
			return nil, err
		}
		// The fill's own connection, as the preload's: checkpointed and synced, so that the
		// reads meet a file whose write-ahead log is empty, as a store of a year has.
		db, err := sql.Open("sqlite", sqliteDSN(path, "FULL"))
		if err != nil {
			return nil, err
		}
		_, err = db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
		if err == nil {
			_, err = db.ExecContext(ctx, readFillTable)
		}
		if err == nil {
			_, err = db.ExecContext(ctx, `INSERT INTO readbench_fill VALUES (?, ?, ?, ?, ?)`, rs.fill.Events, rs.fill.Calls,
				rs.fill.SchemaVersion, rs.fill.Seconds, rs.fill.FilledAt)
		}
		if err = errors.Join(err, db.Close()); err != nil {
			return nil, fmt.Errorf("fill: %w", err)
		}
		if err := syncFile(path); err != nil {
			return nil, err
		}
		if st, err = sqlite.Open(ctx, path); err != nil {
			return nil, err
		}
	} else {
		logf("embedded store %s: reusing its fill of %d events (%d calls, schema %d, filled %s in %.0f s)", path,
			info.Events, info.Calls, info.SchemaVersion, info.FilledAt, info.Seconds)
	}
	rs.st, rs.close = st, st.Close
	return rs, nil
}

func openReadPostgres(ctx context.Context, o options, events int64, logf func(string, ...any)) (rs *readStore, err error) {
	dbURL, err := readDatabaseURL(ctx, o.databaseURL, o.readDatabase, logf)
	if err != nil {
		return nil, err
	}
	schema := "events_" + strconv.FormatInt(events, 10)
	schemaURL, err := pgurl.WithSearchPath(dbURL, schema)
	if err != nil {
		return nil, err
	}
	// The bench's own connection, with the store's schema first on its search path.
	conn, err := pgx.Connect(ctx, schemaURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", o.readDatabase, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
		return nil, err
	}
	open := func() (*postgres.Store, readFillInfo, readFillPlan, int64, error) {
		// A write of the fill may wait long for its turn while the machine is busy: the fill has
		// no reporter waiting on it.
		st, err := postgres.Open(ctx, schemaURL, postgres.Options{MaxConns: int32(o.maxConns), AcquireTimeout: time.Minute})
		if err != nil {
			return nil, readFillInfo{}, 0, 0, err
		}
		q := func(ctx context.Context, query string, dest ...any) error {
			return conn.QueryRow(ctx, query).Scan(dest...)
		}
		info, filled, before := readFillState(ctx, q)
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, readFillInfo{}, 0, 0, err
		}
		_, _, after := readFillState(ctx, q)
		return st, info, planReadFill(filled, before, after, o.readRefill), after, nil
	}
	st, info, plan, version, err := open()
	if err != nil {
		return nil, err
	}
	co := childOptions{}
	if co.databaseURL, err = serverDatabaseURL(schemaURL); err != nil {
		st.Close()
		return nil, err
	}
	rs = &readStore{kind: storePostgres, where: o.readDatabase + "." + schema, co: co, fill: info, reused: plan == readReuse}
	if plan != readReuse {
		if plan == readAfresh {
			st.Close()
			if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE; CREATE SCHEMA "+schema); err != nil {
				return nil, err
			}
			if st, _, _, version, err = open(); err != nil {
				return nil, err
			}
			logf("PostgreSQL %s.%s: filling with %d events", o.readDatabase, schema, events)
		} else {
			logf("PostgreSQL %s.%s: resuming its fill of %d events", o.readDatabase, schema, events)
		}
		res, err := fillReadStore(ctx, st, events, 4, logf)
		if err != nil {
			st.Close()
			return nil, err
		}
		rs.fill = readFillInfo{Events: res.events, Calls: res.calls, SchemaVersion: version, Seconds: res.took.Seconds(),
			FilledAt: time.Now().UTC().Format(time.RFC3339)}
		// What autovacuum would have done to a store of a year: the planner's statistics and the
		// visibility map. Then a checkpoint, so that no read meets the fill still being written out.
		start := time.Now()
		for _, stmt := range []string{"VACUUM ANALYZE", "CHECKPOINT", readFillTable} {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				st.Close()
				return nil, fmt.Errorf("fill: %s: %w", stmt, err)
			}
		}
		if _, err := conn.Exec(ctx, `INSERT INTO readbench_fill VALUES ($1, $2, $3, $4, $5)`, rs.fill.Events, rs.fill.Calls,
			rs.fill.SchemaVersion, rs.fill.Seconds, rs.fill.FilledAt); err != nil {
			st.Close()
			return nil, fmt.Errorf("fill: %w", err)
		}
		logf("fill: VACUUM ANALYZE and CHECKPOINT in %v", time.Since(start).Round(time.Second))
	} else {
		logf("PostgreSQL %s.%s: reusing its fill of %d events (%d calls, schema %d, filled %s in %.0f s)", o.readDatabase, schema,
			info.Events, info.Calls, info.SchemaVersion, info.FilledAt, info.Seconds)
	}
	rs.st, rs.close = st, func() error { st.Close(); return nil }
	return rs, nil
}

// readDatabaseURL returns the URL of the database named name on the server of base, creating
// the database when it does not exist.
func readDatabaseURL(ctx context.Context, base, name string, logf func(string, ...any)) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("the read bench needs a postgres:// URL (-database-url)")
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
		logf("database %s created", name)
	}
	u.Path = "/" + name
	return u.String(), nil
}
