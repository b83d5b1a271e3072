package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// OpenTraced is Open with tracer installed on every connection of the store's pools, so that a
// test sees every statement the store runs.
func OpenTraced(ctx context.Context, url string, opts Options, tracer pgx.QueryTracer) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	cfg.ConnConfig.Tracer = tracer
	return openConfig(ctx, cfg, opts)
}
