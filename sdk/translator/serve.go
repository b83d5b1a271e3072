package translator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

	"github.com/callwire/callwire/sdk/event"
	pb "github.com/callwire/callwire/sdk/translator/wire"
)

// Serve runs t as a translator process; it is the one call a translator's main makes. It answers
// the host's handshake, runs t each time the host asks, and returns when the host ends the
// process. Before serving it makes the log/slog default logger (and so the standard log package)
// write structured lines to stderr, which the host forwards into its own log; stdout belongs to
// the protocol, and anything else written to it is reported by the host as a warning.
//
// Run by hand, without the host's handshake, Serve prints an explanation to stderr and exits the
// process with status 1.
func Serve(t Translator) {
	if t == nil {
		fmt.Fprintln(os.Stderr, "translator.Serve: nil translator")
		os.Exit(1)
	}
	// go-plugin replaces os.Stderr with a pipe once the handshake is done; the log lines must go
	// to the real stderr, which the host reads line by line.
	stderr := os.Stderr
	slog.SetDefault(slog.New(newPluginLogHandler(stderr)))
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: pb.Handshake(),
		Plugins:         pb.Plugins(&server{impl: t}),
		GRPCServer:      plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       "plugin",
			Level:      hclog.Info,
			Output:     stderr,
			JSONFormat: true,
		}),
	})
}

// server is the gRPC service in the translator process.
type server struct {
	pb.UnimplementedTranslatorServer
	impl Translator
}

func (s *server) Health(ctx context.Context, _ *pb.HealthRequest) (*pb.HealthResponse, error) {
	hc, ok := s.impl.(HealthChecker)
	if !ok {
		return &pb.HealthResponse{}, nil
	}
	resp := &pb.HealthResponse{Supported: true}
	if err := hc.Health(ctx); err != nil {
		resp.Error = err.Error()
		if resp.Error == "" {
			resp.Error = "unhealthy"
		}
	}
	return pb.ValidUTF8(resp), nil
}

func (s *server) Run(stream pb.Translator_RunServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return errors.New("run: the first message must be start")
	}
	config := json.RawMessage(start.GetConfig())
	if len(config) == 0 {
		config = json.RawMessage(`{}`)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	em := &streamEmitter{stream: stream, waiting: map[uint64]chan error{}, gone: make(chan struct{})}
	go em.receive(cancel)

	runErr := s.impl.Run(ctx, config, em)
	done := &pb.Done{}
	if runErr != nil {
		done.Error = runErr.Error()
		if done.Error == "" {
			done.Error = "run failed"
		}
	}
	return em.send(&pb.TranslatorMessage{Msg: &pb.TranslatorMessage_Done{Done: done}})
}

// streamEmitter is the Emitter a translator's Run is given: each Emit sends an Event on the Run
// stream and waits for the host's Ack with the same id.
type streamEmitter struct {
	stream pb.Translator_RunServer

	sendMu sync.Mutex // a gRPC stream allows one sender at a time

	// bufs holds encoding buffers (*[]byte) for Emit, taken back once EmitJSON returned (it
	// keeps nothing). Reusing them spares a translator that emits under load an allocation of
	// the event's size for every event.
	bufs sync.Pool

	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan error
	gone    chan struct{} // closed when the host's side of the stream has ended
	goneErr error
}

// receive reads the host's messages until the stream ends: acks go to the waiting Emit calls,
// and a Stop, or the end of the stream, cancels Run's context.
func (em *streamEmitter) receive(cancel context.CancelFunc) {
	for {
		m, err := em.stream.Recv()
		if err != nil {
			em.mu.Lock()
			em.goneErr = fmt.Errorf("the agent is gone: %w", err)
			close(em.gone)
			em.mu.Unlock()
			cancel()
			return
		}
		switch msg := m.GetMsg().(type) {
		case *pb.HostMessage_Ack:
			em.deliver(msg.Ack)
		case *pb.HostMessage_Stop:
			cancel()
		}
	}
}

func (em *streamEmitter) deliver(a *pb.Ack) {
	em.mu.Lock()
	ch, ok := em.waiting[a.GetId()]
	delete(em.waiting, a.GetId())
	em.mu.Unlock()
	if ok {
		ch <- ackError(a)
	}
}

// ackError turns an Ack into what Emit returns.
func ackError(a *pb.Ack) error {
	if len(a.GetProblems()) > 0 {
		ve := &event.ValidationError{Problems: make([]event.Problem, 0, len(a.GetProblems()))}
		for _, p := range a.GetProblems() {
			ve.Problems = append(ve.Problems, event.Problem{Field: p.GetField(), Message: p.GetMessage()})
		}
		return fmt.Errorf("event refused as invalid: %w", ve)
	}
	if a.GetError() != "" {
		return &RefusedError{Reason: a.GetError()}
	}
	return nil
}

func (em *streamEmitter) send(m *pb.TranslatorMessage) error {
	em.sendMu.Lock()
	defer em.sendMu.Unlock()
	return em.stream.Send(pb.ValidUTF8(m))
}

// Emit implements Emitter.
func (em *streamEmitter) Emit(ctx context.Context, e event.Event) error {
	buf, _ := em.bufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	data, err := e.AppendJSON((*buf)[:0])
	if err != nil {
		em.bufs.Put(buf)
		return fmt.Errorf("emit: encode event: %w", err)
	}
	err = em.EmitJSON(ctx, data)
	if cap(data) <= maxKeptEmitBuffer {
		*buf = data
		em.bufs.Put(buf)
	}
	return err
}

// EmitJSON implements JSONEmitter. gRPC has encoded the message that carries data by the time
// its Send returns, and no stats handler or tracer is installed that could read it later, so
// data is not kept.
func (em *streamEmitter) EmitJSON(ctx context.Context, data []byte) error {
	ch := make(chan error, 1)
	em.mu.Lock()
	select {
	case <-em.gone:
		err := em.goneErr
		em.mu.Unlock()
		return fmt.Errorf("emit: %w", err)
	default:
	}
	em.next++
	id := em.next
	em.waiting[id] = ch
	em.mu.Unlock()

	forget := func() {
		em.mu.Lock()
		delete(em.waiting, id)
		em.mu.Unlock()
	}
	if err := em.send(&pb.TranslatorMessage{Msg: &pb.TranslatorMessage_Event{Event: &pb.Event{Id: id, Json: data}}}); err != nil {
		forget()
		return fmt.Errorf("emit: send event: %w", err)
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		forget()
		return fmt.Errorf("emit: no answer from the agent (the event may have been taken): %w", ctx.Err())
	case <-em.gone:
		forget()
		return fmt.Errorf("emit: no answer from the agent (the event may have been taken): %w", em.goneErr)
	}
}

// maxKeptEmitBuffer bounds the encoding buffers an emitter keeps for reuse: an event with a
// large raw payload is encoded into a buffer of its own, which is then let go.
const maxKeptEmitBuffer = 64 << 10

// RefusedError is what Emit returns when the agent's sink did not take an event (its outbox is
// full or closing, say). Reason is the sink's error text. An event refused as invalid is reported
// differently: Emit's error then wraps the *event.ValidationError listing its problems. Reason
// is always valid UTF-8: any other bytes in the sink's text arrive as U+FFFD.
type RefusedError struct {
	Reason string
}

// Error returns "agent refused the event: " and the reason.
func (e *RefusedError) Error() string { return "agent refused the event: " + e.Reason }
