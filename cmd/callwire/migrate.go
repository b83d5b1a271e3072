package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/callwire/callwire/core/server"
)

func newMigrate() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := loadConfig(cmd, nil)
			if err != nil {
				return err
			}
			if err := server.Migrate(cmd.Context(), c.Database); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "migrations applied")
			return nil
		},
	}
}
