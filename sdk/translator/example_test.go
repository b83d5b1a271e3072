package translator_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
)

// missedCalls is a translator that reports one missed call and then waits to be stopped.
type missedCalls struct{}

func (missedCalls) Run(ctx context.Context, config json.RawMessage, out translator.Emitter) error {
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
	translator.Serve(missedCalls{})
}
