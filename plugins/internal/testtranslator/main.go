// Command testtranslator is a translator for the plugins package's tests. Its configuration says
// what to do: how many events to emit, when to crash, what to log, whether to report itself
// unhealthy, and how to behave when asked to stop. With -protocol N it answers the handshake with
// protocol version N and serves nothing; with -hang-health its health check never answers (it
// returns only when the host gives up on it).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/callwire/callwire/sdk/event"
	"github.com/callwire/callwire/sdk/translator"
	"github.com/callwire/callwire/sdk/translator/wire"
)

// config is the translator's configuration. The texts of fail and unhealthy are read with Go's
// string escapes, so that a test can put bytes that are not UTF-8 in them ("\\xff").
type config struct {
	Events     int      `json:"events"`     // how many events to emit, sequence 1..Events
	CallID     string   `json:"callId"`     // the providerCallId of every event
	CrashAfter int      `json:"crashAfter"` // exit with status 3 after this many events were taken
	Invalid    []int    `json:"invalid"`    // sequences emitted with an invalid direction
	Logs       []string `json:"logs"`       // logged at info when Run starts
	Stdout     string   `json:"stdout"`     // printed to stdout when Run starts
	Unhealthy  string   `json:"unhealthy"`  // the health check's error
	Connecting string   `json:"connecting"` // the health check's error from Run's start until every event was emitted
	Exit       bool     `json:"exit"`       // return nil once every event was emitted
	Fail       string   `json:"fail"`       // return this error once every event was emitted
	IgnoreStop bool     `json:"ignoreStop"` // keep running after the context ends
	Farewell   bool     `json:"farewell"`   // emit one more event after the context ends
	AfterIll   int      `json:"afterIll"`   // emit this many more events once Health has reported unhealthy
	RawBad     []int    `json:"rawBad"`     // sequences emitted with a raw record that is not UTF-8
}

type testTranslator struct {
	hang       bool          // Health never answers
	connecting atomic.Value  // string; reported before unhealthy, and not as ill
	unhealthy  atomic.Value  // string
	ill        chan struct{} // closed once Health has reported unhealthy
	illOnce    sync.Once
}

func (t *testTranslator) Health(ctx context.Context) error {
	if t.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if s, _ := t.connecting.Load().(string); s != "" {
		return errors.New(s)
	}
	if s, _ := t.unhealthy.Load().(string); s != "" {
		t.illOnce.Do(func() { close(t.ill) })
		return errors.New(s)
	}
	return nil
}

// unescape reads s with Go's string escapes; s is taken as it is when it has none that parse.
func unescape(s string) string {
	if u, err := strconv.Unquote(`"` + s + `"`); err == nil {
		return u
	}
	return s
}

func (t *testTranslator) Run(ctx context.Context, raw json.RawMessage, out translator.Emitter) error {
	var cfg config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cfg.Fail, cfg.Unhealthy = unescape(cfg.Fail), unescape(cfg.Unhealthy)
	t.connecting.Store(cfg.Connecting)
	t.unhealthy.Store(cfg.Unhealthy)
	slog.Info("run started", "pid", os.Getpid(), "events", cfg.Events)
	for _, l := range cfg.Logs {
		slog.Info(l, "pid", os.Getpid())
	}
	if cfg.Stdout != "" {
		fmt.Println(cfg.Stdout)
	}
	taken := 0
	for seq := 1; seq <= cfg.Events; seq++ {
		if err := emit(ctx, out, cfg, seq); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		taken++
		if cfg.CrashAfter > 0 && taken >= cfg.CrashAfter {
			slog.Warn("crashing on purpose", "after", taken)
			os.Exit(3)
		}
	}
	t.connecting.Store("")
	if cfg.AfterIll > 0 {
		select {
		case <-t.ill:
		case <-ctx.Done():
			return ctx.Err()
		}
		for seq := cfg.Events + 1; seq <= cfg.Events+cfg.AfterIll; seq++ {
			if emit(ctx, out, cfg, seq) == nil {
				taken++
			}
		}
	}
	slog.Info("all events emitted", "taken", taken)
	switch {
	case cfg.Fail != "":
		return errors.New(cfg.Fail)
	case cfg.Exit:
		return nil
	}
	<-ctx.Done()
	slog.Info("asked to stop", "reason", context.Cause(ctx).Error())
	if cfg.Farewell {
		_ = emit(context.WithoutCancel(ctx), out, cfg, cfg.Events+1)
	}
	if cfg.IgnoreStop {
		select {}
	}
	return ctx.Err()
}

func emit(ctx context.Context, out translator.Emitter, cfg config, seq int) error {
	e := event.New(event.CallReceived, cfg.CallID, time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC), event.Call{
		Direction: event.Inbound,
		From:      event.E164("+442071234567"),
		To:        event.E164("+442071234500"),
	})
	e.Sequence = int64(seq)
	for _, s := range cfg.Invalid {
		if s == seq {
			e.Call.Direction = "sideways"
		}
	}
	for _, s := range cfg.RawBad {
		if s == seq {
			e.Raw = json.RawMessage("{\"line\": \"\xff\xfe\"}")
		}
	}
	err := out.Emit(ctx, e)
	switch ve, invalid := event.AsValidationError(err); {
	case err == nil:
		slog.Info("emitted", "seq", seq)
	case invalid:
		slog.Warn("emit refused as invalid", "seq", seq, "field", ve.Problems[0].Field, "problem", ve.Problems[0].Message)
	default:
		var refused *translator.RefusedError
		slog.Warn("emit failed", "seq", seq, "error", err.Error(), "refused", errors.As(err, &refused))
	}
	return err
}

// nothing is a gRPC plugin serving no service, for the protocol mismatch test.
type nothing struct{ plugin.NetRPCUnsupportedPlugin }

func (nothing) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return nil }
func (nothing) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("not a client")
}

func main() {
	protocol := flag.Int("protocol", wire.ProtocolVersion, "protocol version to answer the handshake with")
	hang := flag.Bool("hang-health", false, "never answer a health check")
	flag.Parse()
	if *protocol != wire.ProtocolVersion {
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig: plugin.HandshakeConfig{
				ProtocolVersion:  uint(*protocol),
				MagicCookieKey:   wire.MagicCookieKey,
				MagicCookieValue: wire.MagicCookieValue,
			},
			Plugins:    plugin.PluginSet{"translator" + strconv.Itoa(*protocol): nothing{}},
			GRPCServer: plugin.DefaultGRPCServer,
		})
		return
	}
	translator.Serve(&testTranslator{hang: *hang, ill: make(chan struct{})})
}
