package plugins

import (
	"context"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/callwire/callwire/plugins/internal/proto"
)

// The handshake's magic cookie: the host sets the environment variable MagicCookieKey to
// MagicCookieValue when it launches a translator, and a translator refuses to start without it.
// It is not a secret, only a guard against running a translator by hand. A translator written in
// another language checks it and answers the go-plugin handshake with ProtocolVersion.
const (
	MagicCookieKey   = "CALLWIRE_TRANSLATOR"
	MagicCookieValue = "4d1f0b6e2a9c48d7b3e5f7a1c6d2e8b0"
)

// pluginName is the name the one plugin is dispensed under.
const pluginName = "translator"

func handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}

// pluginSet is what both sides register: the translator served over gRPC. impl is nil on the
// host side.
func pluginSet(impl Translator) plugin.PluginSet {
	return plugin.PluginSet{pluginName: &grpcPlugin{impl: impl}}
}

// grpcPlugin is the go-plugin adapter: it registers the server side in the translator process
// and hands the host a client of the generated service.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	impl Translator
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterTranslatorServer(s, &server{impl: p.impl})
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewTranslatorClient(c), nil
}
