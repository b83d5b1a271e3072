package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"

	fiberlog "github.com/gofiber/fiber/v2/log"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/callwire/callwire/core/httpapi"
	"github.com/callwire/callwire/core/popup"
	"github.com/callwire/callwire/core/server"
)

func newServe() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the ingest server",
		Long: "Run the ingest server. With no configuration it keeps data in the embedded store " +
			"(data/callwire.db); set database.url (CALLWIRE_DATABASE_URL) for PostgreSQL.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, log, err := loadConfig(cmd, map[string]string{"listen": "server.listen"})
			if err != nil {
				return err
			}
			// The Redis client and Fiber log through process-wide loggers of their own, plain
			// text on stderr by default: route them into the structured log.
			redisLog, err := popup.NewRedisLogger(log)
			if err != nil {
				return err
			}
			redis.SetLogger(redisLog)
			fiberLog, err := httpapi.NewFiberLogger(log)
			if err != nil {
				return err
			}
			fiberlog.SetLogger(fiberLog)
			ctx := cmd.Context()
			st, err := server.OpenStore(ctx, c.Database)
			if err != nil {
				return fmt.Errorf("open store: %w", err)
			}
			defer st.Close()
			limit := server.ApplyMemoryLimit(c.Server, st, os.Getenv)
			// Requests keep their context through a graceful shutdown; only the listener follows
			// the signal.
			srv, err := server.New(context.WithoutCancel(ctx), c, server.Options{Store: st, Logger: log})
			if err != nil {
				return err
			}
			storeName := "embedded (" + c.Database.Path + ")"
			if c.Database.URL != "" {
				storeName = "postgres"
			}
			return srv.Run(ctx, c.Server.Listen, func(a net.Addr) {
				log.Info("callwire listening", "addr", a.String(), "store", storeName, "version", version, "memory_limit", memoryLimitText(limit))
			})
		},
	}
	cmd.Flags().String("listen", "", "address to listen on, host:port (default :8080)")
	return cmd
}

// memoryLimitText is a soft memory limit as the start-up log shows it.
func memoryLimitText(limit int64) string {
	if limit == math.MaxInt64 {
		return "none"
	}
	return strconv.FormatInt(limit>>20, 10) + " MiB"
}
