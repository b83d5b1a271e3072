package plugins

import (
	"context"
	"fmt"
	"sync"

	"github.com/hashicorp/go-plugin"

	"github.com/callwire/callwire/sdk/event"
	pb "github.com/callwire/callwire/sdk/translator/wire"
)

// The host drives a translator through conn and runStream, in Go types. The protocol's messages
// (sdk/translator/wire) are made and read in this file only, as terraform-plugin-go keeps its
// conversions to and from the protocol in one place: the host's logic never sees a pb message.

// conn is a started translator process, as the host drives it.
type conn interface {
	// run starts a run of the translator with its configuration (a JSON object); the run lasts
	// until the translator says it is done or ctx ends.
	run(ctx context.Context, config []byte) (runStream, error)
	// health asks the translator how it is: problem is "" when it is healthy or does not say.
	health(ctx context.Context) (problem string, err error)
}

// runStream is one run of a translator. next is called by one goroutine; ack and stop may be
// called from others.
type runStream interface {
	// next waits for the translator's next message: an emitted event, or the end of its run.
	next() (message, error)
	// ack answers an emitted event.
	ack(a eventAck) error
	// stop asks the translator to stop; it ends its run, its last events still emitted first.
	stop() error
}

// message is what a translator sent: an emitted event, or (event nil) the end of its run, with
// its error when it failed.
type message struct {
	event *emitted
	// doneErr is the translator's own error at the end of its run, "" when it ended well.
	doneErr string
}

// emitted is an event as a translator emitted it: its id in the run and its JSON.
type emitted struct {
	id   uint64
	json []byte
}

// eventAck is the host's answer to an emitted event: taken (err ""), or refused with why and,
// for an invalid event, its problems.
type eventAck struct {
	id       uint64
	err      string
	problems []event.Problem
}

// pluginConfig is the handshake and plugin set of the host's side of go-plugin.
func pluginConfig() (plugin.HandshakeConfig, plugin.PluginSet) {
	return pb.Handshake(), pb.Plugins(nil)
}

// protocolVersion is the protocol version the host offers.
const protocolVersion = pb.ProtocolVersion

// dispense gets the translator's client from a started go-plugin connection.
func dispense(rpc plugin.ClientProtocol) (conn, error) {
	raw, err := rpc.Dispense(pb.PluginName)
	if err != nil {
		return nil, err
	}
	tc, ok := raw.(pb.TranslatorClient)
	if !ok {
		return nil, fmt.Errorf("unexpected client type %T", raw)
	}
	return grpcConn{tc: tc}, nil
}

// grpcConn is a conn over the protocol's gRPC client.
type grpcConn struct{ tc pb.TranslatorClient }

func (c grpcConn) run(ctx context.Context, config []byte) (runStream, error) {
	stream, err := c.tc.Run(ctx)
	if err != nil {
		return nil, err
	}
	r := &grpcRun{stream: stream}
	if err := r.send(&pb.HostMessage{Msg: &pb.HostMessage_Start{Start: &pb.Start{Config: config}}}); err != nil {
		return nil, fmt.Errorf("send config: %w", err)
	}
	return r, nil
}

func (c grpcConn) health(ctx context.Context) (string, error) {
	resp, err := c.tc.Health(ctx, &pb.HealthRequest{})
	if err != nil {
		return "", err
	}
	if !resp.GetSupported() {
		return "", nil
	}
	return resp.GetError(), nil
}

// grpcRun is a runStream over the protocol's Run stream.
type grpcRun struct {
	stream pb.Translator_RunClient
	sendMu sync.Mutex // a gRPC stream takes one Send at a time
}

// send sends m, its strings made valid UTF-8 as the protocol requires.
func (r *grpcRun) send(m *pb.HostMessage) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	return r.stream.Send(pb.ValidUTF8(m))
}

func (r *grpcRun) next() (message, error) {
	for {
		m, err := r.stream.Recv()
		if err != nil {
			return message{}, err
		}
		switch msg := m.GetMsg().(type) {
		case *pb.TranslatorMessage_Done:
			return message{doneErr: msg.Done.GetError()}, nil
		case *pb.TranslatorMessage_Event:
			return message{event: &emitted{id: msg.Event.GetId(), json: msg.Event.GetJson()}}, nil
		}
		// A message of a later protocol version: not this host's to answer.
	}
}

func (r *grpcRun) ack(a eventAck) error {
	ack := &pb.Ack{Id: a.id, Error: a.err}
	for _, p := range a.problems {
		ack.Problems = append(ack.Problems, &pb.Problem{Field: p.Field, Message: p.Message})
	}
	return r.send(&pb.HostMessage{Msg: &pb.HostMessage_Ack{Ack: ack}})
}

func (r *grpcRun) stop() error {
	return r.send(&pb.HostMessage{Msg: &pb.HostMessage_Stop{Stop: &pb.Stop{}}})
}
