package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/callwire/callwire/plugins"
	"github.com/callwire/callwire/plugins/agent"
)

// newAgent is `callwire agent`: the translators beside a clinic's phone system, and the durable
// outbox that delivers their events to the core.
func newAgent() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run translators and deliver their events to the core",
		Long: "Run the configured translators and deliver every event they emit to the core: each " +
			"event is stored in a durable local outbox (data/agent-outbox.db) before the translator " +
			"is told it was taken, and leaves it once the core acknowledged it. Configure it with " +
			"--config agent.yaml and CALLWIRE_AGENT_* variables; see docs/agent.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, _ := cmd.Flags().GetString("config")
			c, unknown, err := agent.Load(path, os.Environ(), cmd.Flags(), map[string]string{
				"core-url":       "core.url",
				"metrics-listen": "metrics.listen",
				"outbox":         "outbox.path",
			})
			if err != nil {
				warnUnknown(agent.NewLogger(agent.Defaults().Log, os.Stderr), unknown)
				return err
			}
			log := agent.NewLogger(c.Log, os.Stderr)
			warnUnknown(log, unknown)
			if err := checkBuiltins(c); err != nil {
				return err
			}
			err = agent.Run(cmd.Context(), c, agent.RunOptions{Logger: log})
			if fe := (*plugins.FailingError)(nil); errors.As(err, &fe) {
				return fmt.Errorf("%w\nthe agent stopped rather than restart translator %s again; fix what the last error names and start it again (docs/agent.md, \"When a translator keeps failing\")", err, fe.Name)
			}
			return err
		},
	}
	cmd.Flags().String("core-url", "", "the core's base URL (core.url)")
	cmd.Flags().String("metrics-listen", "", "where /metrics is served, host:port; empty turns it off (default 127.0.0.1:9464)")
	cmd.Flags().String("outbox", "", "the outbox file (default data/agent-outbox.db)")
	return cmd
}
