package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/callwire/callwire/core/config"
	"github.com/callwire/callwire/core/server"
	"github.com/callwire/callwire/core/store"
	"github.com/callwire/callwire/internal/confload"
)

// What the commands share: their configuration, the store, JSON output and argument checks. Each
// command is a file of its own: serve.go, migrate.go, orgs.go, keys.go, agent.go, translator.go.

// loadConfig reads the configuration for cmd: --config, the environment, and the flags of cmd
// that map to configuration keys. It returns the logger the configuration asks for, on which it
// has warned of every CALLWIRE_ variable that sets nothing; when the configuration is wrong, those
// warnings go to a logger with the default settings before the error is returned.
func loadConfig(cmd *cobra.Command, flagKeys map[string]string) (config.Config, *slog.Logger, error) {
	path, _ := cmd.Flags().GetString("config")
	c, unknown, err := config.Load(path, os.Environ(), cmd.Flags(), flagKeys)
	if err != nil {
		warnUnknown(server.NewLogger(config.Defaults().Log, os.Stderr), unknown)
		return config.Config{}, nil, err
	}
	log := server.NewLogger(c.Log, os.Stderr)
	warnUnknown(log, unknown)
	return c, log, nil
}

// warnUnknown logs a warning on log for each variable of vars.
func warnUnknown(log *slog.Logger, vars []confload.UnknownVariable) {
	for _, v := range vars {
		v.Warn(log)
	}
}

// withStore loads the configuration, opens (and migrates) the store, and runs fn with it.
func withStore(cmd *cobra.Command, fn func(st store.Store) error) error {
	c, _, err := loadConfig(cmd, nil)
	if err != nil {
		return err
	}
	st, err := server.OpenStore(cmd.Context(), c.Database)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	return fn(st)
}

func outputFlag(cmd *cobra.Command) {
	cmd.Flags().StringP("output", "o", "text", "output format: text or json")
}

func jsonOutput(cmd *cobra.Command) (bool, error) {
	o, _ := cmd.Flags().GetString("output")
	switch o {
	case "text":
		return false, nil
	case "json":
		return true, nil
	}
	return false, usageError{fmt.Errorf("--output must be text or json, got %q", o)}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// maxLookupTimeout is the longest lookup timeout an organization may set: the phone is ringing.
const maxLookupTimeout = 10 * time.Second

func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s takes %d argument(s), got %d", cmd.Name(), n, len(args))}
		}
		return nil
	}
}
