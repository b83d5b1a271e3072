// Package plugins is the agent's side of the translator protocol: a Host that launches
// translators as child processes over hashicorp/go-plugin, hands every event they emit to a Sink,
// restarts them with backoff when they end, asks them for their health, and stops them all on
// shutdown. The protocol itself (the generated gRPC code, the handshake) is package
// sdk/translator/wire, and what a translator's author writes against is package sdk/translator,
// both in the SDK's module.
//
// # Built-in translators
//
// Translators built into the callwire binary still run out of process: BuiltinCommand gives the
// command that re-executes the binary as `callwire translator <name>`, and that hidden subcommand
// calls ServeBuiltin.
package plugins

import (
	"context"

	"github.com/callwire/callwire/sdk/event"
)

// Sink is where a Host hands the events its translators emit.
type Sink interface {
	// Accept stores e, emitted by the named translator and validated by the host, durably, and
	// returns nil only once it has; the translator is told the event was taken only then. An
	// error is passed back to the translator's Emit, its text with every run of bytes that is
	// not UTF-8 replaced by U+FFFD.
	Accept(ctx context.Context, translator string, e event.Valid) error
}
