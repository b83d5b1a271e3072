package plugins_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/callwire/callwire/plugins"
	"github.com/callwire/callwire/sdk/event"
)

// missedCalls is a translator that reports one missed call and then waits to be stopped.
type missedCalls struct{}

func (missedCalls) Run(ctx context.Context, config json.RawMessage, out plugins.Emitter) error {
	slog.Info("started", "config", string(config))
	e := event.New(event.CallMissed, "call-42", time.Now(), event.Call{
		Direction: event.Inbound,
		From:      event.E164("+442071234567"),
		To:        event.E164("+442071234500"),
	})
	if err := out.Emit(ctx, e); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// A translator's main calls Serve and nothing else; the agent does the rest.
func ExampleServe() {
	plugins.Serve(missedCalls{})
}

// The callwire binary serves its built-in translators from a hidden subcommand,
// `callwire translator <name>`, and launches them with BuiltinCommand.
func ExampleServeBuiltin() {
	builtins := map[string]plugins.Translator{"missed": missedCalls{}}
	// In the `translator <name>` subcommand:
	if err := plugins.ServeBuiltin("missed", builtins); err != nil {
		slog.Error("translator", "error", err)
	}
}
