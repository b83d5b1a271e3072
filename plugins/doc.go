// Package plugins is the protocol between the callwire agent and its translators, and the host
// that runs them: a handshake with a protocol version, gRPC adapters over hashicorp/go-plugin,
// and the launching, supervision and shutdown of translator processes.
//
// A translator author sees only plain Go: implement Translator, call Serve from main. The agent
// sees a Host that runs translators as child processes and hands every event they emit to a Sink.
// The wire types are internal.
package plugins

import (
	"context"
	"encoding/json"

	"github.com/callwire/callwire/sdk/event"
)

// ProtocolVersion is the version of the agent–translator protocol. A translator built for another
// version is refused at the handshake with a message naming both.
const ProtocolVersion = 1

// Translator turns one phone system's traffic into canonical events.
type Translator interface {
	// Run translates until ctx ends, handing each event to out. config is the translator's own
	// block from the agent's configuration, as JSON (an empty object when none was given).
	// Returning ends the translator; a non-nil error is logged by the agent, which restarts the
	// translator with backoff. Run must not write to stdout: its logs go through the standard
	// library's log/slog default logger (or stderr), which the agent forwards.
	Run(ctx context.Context, config json.RawMessage, out Emitter) error
}

// Emitter hands events to the agent.
type Emitter interface {
	// Emit returns nil once the agent has stored e durably: from then on the agent delivers it,
	// even if the translator or the agent dies. An error means the event was not taken (it was
	// invalid, or the agent is shutting down or its outbox is full); the translator decides
	// whether to retry it.
	Emit(ctx context.Context, e event.Event) error
}

// HealthChecker may be implemented by a Translator to report its health, for example whether it
// still hears from its phone system. The agent asks periodically and logs and exports the answer.
type HealthChecker interface {
	// Health returns nil when the translator is healthy, or why it is not.
	Health(ctx context.Context) error
}

// Sink is where a Host hands the events its translators emit.
type Sink interface {
	// Accept stores e, emitted by the named translator, durably, and returns nil only once it
	// has; the translator is told the event was taken only then. An error is passed back to the
	// translator's Emit.
	Accept(ctx context.Context, translator string, e event.Event) error
}
