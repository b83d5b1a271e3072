package main

import (
	"github.com/spf13/cobra"

	"github.com/callwire/callwire/plugins"
)

// newTranslator is `callwire translator <name>`, hidden: the agent runs it (through
// plugins.BuiltinCommand) to serve a translator built into this binary in its own process. It
// needs no configuration, and it writes nothing to stdout before serving, because stdout carries
// the plugin handshake.
func newTranslator() *cobra.Command {
	return &cobra.Command{
		Use:    plugins.BuiltinSubcommand + " NAME",
		Short:  "Serve a built-in translator to the agent (run by `callwire agent`, not by hand)",
		Hidden: true,
		Args:   exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			// The translators built into this binary, by the name agent.yaml gives as builtin.
			builtins := map[string]plugins.Translator{}
			return plugins.ServeBuiltin(args[0], builtins)
		},
	}
}
