// Package translator is what a translator's author writes against: implement Translator, call
// Serve from main. The agent launches the executable, hands Run its configuration, takes each
// event Run emits, and restarts the translator with backoff if it crashes or returns.
//
// # Writing a translator
//
// A translator is an executable named callwire-translator-<name> whose main calls Serve:
//
//	package main
//
//	import (
//		"context"
//		"encoding/json"
//		"log/slog"
//		"time"
//
//		"github.com/callwire/callwire/sdk/event"
//		"github.com/callwire/callwire/sdk/translator"
//	)
//
//	type pbx struct{}
//
//	func (pbx) Run(ctx context.Context, config json.RawMessage, out translator.Emitter) error {
//		var cfg struct{ Trunk string }
//		if err := json.Unmarshal(config, &cfg); err != nil {
//			return err
//		}
//		slog.Info("listening", "trunk", cfg.Trunk) // forwarded into the agent's log
//		e := event.New(event.CallReceived, "call-1", time.Now(), event.Call{
//			Direction: event.Inbound, From: event.E164("+442071234567"), To: event.E164("+442071234500"),
//		})
//		if err := out.Emit(ctx, e); err != nil { // returns once the agent has stored e
//			return err
//		}
//		<-ctx.Done() // run until the agent stops the translator
//		return nil
//	}
//
//	func main() { translator.Serve(pbx{}) }
//
// A translator logs through log/slog's default logger and never writes to stdout. Package
// translatortest checks a translator against this contract in its own tests, with no agent.
//
// # The protocol
//
// Translators speak hashicorp/go-plugin over gRPC: the host sets the environment variable
// wire.MagicCookieKey to wire.MagicCookieValue and offers wire.ProtocolVersion; the translator
// answers on stdout with go-plugin's handshake line and serves the callwire.plugins.v1.Translator
// service (package wire). Events cross the wire as canonical JSON (what event.Event marshals
// to), each acknowledged by the host once it has stored or refused it. A translator in another
// language implements the same handshake and service.
package translator

import (
	"context"
	"encoding/json"

	"github.com/callwire/callwire/sdk/event"
)

// Translator turns one phone system's traffic into canonical events.
type Translator interface {
	// Run translates until ctx ends, handing each event to out. config is the translator's own
	// block from the agent's configuration, as JSON (an empty object when none was given).
	// Returning ends the translator; a non-nil error is logged by the agent, which restarts the
	// translator with backoff. The error's text reaches the agent with every run of bytes that
	// is not UTF-8 replaced by U+FFFD. Run must not write to stdout: its logs go through the
	// standard library's log/slog default logger (or stderr), which the agent forwards.
	Run(ctx context.Context, config json.RawMessage, out Emitter) error
}

// Emitter hands events to the agent.
type Emitter interface {
	// Emit returns nil once the agent has stored e durably: from then on the agent delivers it,
	// even if the translator or the agent dies. An error means the event was not taken (it was
	// invalid, or the agent is shutting down or its outbox is full); the translator decides
	// whether to retry it. The one exception: when ctx ends or the agent goes away before it
	// answers, Emit cannot know whether the event was taken, and its error says so; emitting the
	// event again is safe, because the core deduplicates it.
	Emit(ctx context.Context, e event.Event) error
}

// JSONEmitter is implemented by the Emitter a translator's Run is given, for a translator that
// encodes its events itself: to reuse its buffers, or to write them with
// event.Event.AppendJSONTrustingRaw when it wrote their raw in canonical form.
type JSONEmitter interface {
	// EmitJSON is Emit for an event already encoded: data must be the event's canonical JSON,
	// the bytes its AppendJSON writes. It answers as Emit does (the agent checks data as it
	// checks any event) and does not keep data after it returns.
	EmitJSON(ctx context.Context, data []byte) error
}

// HealthChecker may be implemented by a Translator to report its health, for example whether it
// still hears from its phone system. The agent asks periodically and logs and exports the answer.
type HealthChecker interface {
	// Health returns nil when the translator is healthy, or why it is not; that text reaches the
	// agent with every run of bytes that is not UTF-8 replaced by U+FFFD.
	Health(ctx context.Context) error
}
