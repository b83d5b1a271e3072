package plugins_test

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/callwire/callwire/plugins"
	"github.com/callwire/callwire/sdk/translator"
)

// idle is a translator that waits to be stopped.
type idle struct{}

func (idle) Run(ctx context.Context, _ json.RawMessage, _ translator.Emitter) error {
	<-ctx.Done()
	return nil
}

// The callwire binary serves its built-in translators from a hidden subcommand,
// `callwire translator <name>`, and launches them with BuiltinCommand.
func ExampleServeBuiltin() {
	builtins := map[string]translator.Translator{"idle": idle{}}
	// In the `translator <name>` subcommand:
	if err := plugins.ServeBuiltin("idle", builtins); err != nil {
		slog.Error("translator", "error", err)
	}
}
