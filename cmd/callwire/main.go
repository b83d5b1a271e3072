// Command callwire is the one callwire binary: the ingest server, its migrations, and the
// operator commands for organizations and API keys. Every command reads the same configuration
// (defaults, --config FILE, CALLWIRE_* variables, flags), so the commands act on whichever store
// the server uses.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	// The IANA time zone database, built in: an organization's time zone (orgs update
	// --timezone) must read the same on every machine, with or without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "callwire:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "callwire:", err)
		os.Exit(1)
	}
}

// usageError marks a mistake in the command line (exit status 2).
type usageError struct{ error }

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "callwire",
		Short:         "One door for a clinic's call history",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().String("config", "", "configuration file (YAML)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServe(), newMigrate(), newOrgs(), newKeys(), newAgent(), newTranslator(), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), "callwire", version)
			return nil
		},
	})
	return root
}
