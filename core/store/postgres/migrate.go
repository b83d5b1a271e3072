package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/callwire/callwire/core/store"
)

// migrations holds the schema, one goose SQL file per version.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Migrate brings the schema up to date by applying the embedded migrations that have not been
// applied yet, each in its own transaction. It works in the first schema of the connection's
// search_path, which must exist; goose's version table lives there too.
//
// Concurrent Migrate calls against the same schema, from any number of processes, are safe: they
// take turns under a session advisory lock specific to the database and schema, held on one
// extra connection outside the pool for the duration. Connection failures wrap
// store.ErrUnavailable.
func (s *Store) Migrate(ctx context.Context) error {
	// The lock is held on a connection of its own, outside the pool, while goose works on pooled
	// ones: holding a pooled connection would starve a pool of one. (goose's own session locker
	// is not used: goose checks for pending migrations before taking it, racing other processes
	// to create its version table.)
	cctx, cancel := context.WithTimeout(ctx, s.acquireTimeout)
	conn, err := pgx.ConnectConfig(cctx, s.pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("postgres: migrate: %w", ctxError(cerr))
		}
		return fmt.Errorf("postgres: migrate: %w: %w", store.ErrUnavailable, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var database, schema *string
	err = conn.QueryRow(ctx, `SELECT current_database(), current_schema()`).Scan(&database, &schema)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", classifyConn(ctx, conn, err))
	}
	if schema == nil {
		return errors.New("postgres: migrate: no schema of the search_path exists")
	}
	// Closing the connection releases the lock, so there is no unlock.
	h := fnv.New64a()
	fmt.Fprintf(h, "callwire migrate %s.%s", *database, *schema)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(h.Sum64()>>1)); err != nil {
		return fmt.Errorf("postgres: migrate: lock: %w", classifyConn(ctx, conn, err))
	}

	db := stdlib.OpenDBFromPool(s.pool)
	defer db.Close()
	p, err := migrationProvider(db)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: %w", classify(ctx, nil, err))
	}
	return nil
}

// migrationProvider returns a goose provider of the embedded migrations working through db.
func migrationProvider(db *sql.DB) (*goose.Provider, error) {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
}
