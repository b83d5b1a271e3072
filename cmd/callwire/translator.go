package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/callwire/callwire/plugins"
	"github.com/callwire/callwire/plugins/agent"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/translators/asterisk"
	"github.com/callwire/callwire/translators/ringcentral"
	"github.com/callwire/callwire/translators/sip"
)

// builtin is a translator built into this binary.
type builtin struct {
	about string
	new   func() translator.Translator
	// check reports every problem with a configuration block, and reads the secrets it names
	// and checks the addresses it listens on (the translator runs on this machine, as this
	// user, with this environment), so that the agent refuses it at start rather than
	// restarting the translator on it forever. For a valid block it returns the files the block
	// keeps for its translator alone, by their keys: two translators of one agent may not name
	// the same file.
	check func(json.RawMessage) (held map[string]string, err error)
}

// builtins are the translators built into this binary, by the name an agent configuration gives
// as `builtin:`.
func builtins() map[string]builtin {
	return map[string]builtin{
		asterisk.Name: {"Asterisk AMI: calls from the Asterisk Manager Interface; see docs/asterisk.md", func() translator.Translator { return asterisk.New() },
			checkWith(asterisk.ParseConfig, func(c asterisk.Config) error { _, err := c.ReadSecret(os.Getenv); return err }, nil)},
		sip.Name: {"SIP observer: a record-routing proxy or a HEPv3 tap; see docs/sip-observer.md", func() translator.Translator { return sip.New() },
			checkWith(sip.ParseConfig, func(c sip.Config) error {
				_, err := c.ReadHEPPassword()
				return errors.Join(err, c.CheckListeners(net.InterfaceAddrs))
			}, nil)},
		ringcentral.Name: {"RingCentral: live telephony-session notifications and the call log; see docs/ringcentral.md", func() translator.Translator { return ringcentral.New() },
			checkWith(ringcentral.ParseConfig, func(c ringcentral.Config) error { _, err := c.LoadSecrets(); return err },
				func(c ringcentral.Config) map[string]string { return map[string]string{"cursor_file": c.CursorFile} })},
	}
}

// checkWith is a builtin's check: parse reports every problem with the block; when there is
// none, secrets reads the secrets the block names, and holds (when not nil) names the files it
// keeps for itself.
func checkWith[C any](parse func(json.RawMessage) (C, error), secrets func(C) error, holds func(C) map[string]string) func(json.RawMessage) (map[string]string, error) {
	return func(raw json.RawMessage) (map[string]string, error) {
		c, err := parse(raw)
		if err != nil {
			return nil, err
		}
		if err := secrets(c); err != nil {
			return nil, err
		}
		if holds == nil {
			return nil, nil
		}
		return holds(c), nil
	}
}

// newTranslator is `callwire translator [NAME]`, hidden. Without a name it lists the translators
// built into this binary. With one, the agent runs it (through plugins.BuiltinCommand) to serve
// that translator in its own process: it needs no configuration, and it writes nothing to stdout
// before serving, because stdout carries the plugin handshake.
func newTranslator() *cobra.Command {
	return &cobra.Command{
		Use:    plugins.BuiltinSubcommand + " [NAME]",
		Short:  "List the built-in translators, or serve one to the agent (run by `callwire agent`, not by hand)",
		Hidden: true,
		Args:   cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			all := builtins()
			if len(args) == 0 {
				for _, name := range slices.Sorted(maps.Keys(all)) {
					fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", name, all[name].about)
				}
				return nil
			}
			serve := make(map[string]translator.Translator, len(all))
			for name, b := range all {
				serve[name] = b.new()
			}
			return plugins.ServeBuiltin(args[0], serve)
		},
	}
}

// checkBuiltins reports every translator of c whose builtin this binary does not have, every
// problem with the configuration block of those it has, and every file that two of them would
// each keep for their own.
func checkBuiltins(c agent.Config) error {
	all := builtins()
	var errs []error
	held := map[string]string{} // absolute path → the key that first named it
	for i, t := range c.Translators {
		if t.Builtin == "" {
			continue
		}
		b, ok := all[t.Builtin]
		if !ok {
			errs = append(errs, fmt.Errorf("translators[%d].builtin: no built-in translator %q (built in: %s)",
				i, t.Builtin, strings.Join(slices.Sorted(maps.Keys(all)), ", ")))
			continue
		}
		raw, err := t.ConfigJSON()
		if err != nil {
			errs = append(errs, fmt.Errorf("translators[%d].config: %w", i, err))
			continue
		}
		files, err := b.check(raw)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				errs = append(errs, fmt.Errorf("translators[%d].config.%s", i, line))
			}
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(files)) {
			name := fmt.Sprintf("translators[%d].config.%s", i, key)
			abs, err := filepath.Abs(files[key])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
			if first, ok := held[abs]; ok {
				errs = append(errs, fmt.Errorf("%s: %s is already %s: each translator needs its own", name, files[key], first))
				continue
			}
			held[abs] = name
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
	}
	return nil
}
