package wire

import (
	"context"
	"errors"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ProtocolVersion is the version of the agent–translator protocol. A translator built for another
// version is refused at the handshake with a message naming both.
const ProtocolVersion = 1

// The handshake's magic cookie: the host sets the environment variable MagicCookieKey to
// MagicCookieValue when it launches a translator, and a translator refuses to start without it.
// It is not a secret, only a guard against running a translator by hand. A translator written in
// another language checks it and answers the go-plugin handshake with ProtocolVersion.
const (
	MagicCookieKey   = "CALLWIRE_TRANSLATOR"
	MagicCookieValue = "4d1f0b6e2a9c48d7b3e5f7a1c6d2e8b0"
)

// PluginName is the name the one plugin is dispensed under.
const PluginName = "translator"

// Handshake returns the go-plugin handshake both sides use: ProtocolVersion and the magic cookie.
func Handshake() plugin.HandshakeConfig {
	return plugin.HandshakeConfig{
		ProtocolVersion:  ProtocolVersion,
		MagicCookieKey:   MagicCookieKey,
		MagicCookieValue: MagicCookieValue,
	}
}

// Plugins returns what both sides register with go-plugin: the Translator service over gRPC,
// under PluginName. In a translator process server is the service it serves; the host passes nil,
// and dispensing PluginName then gives it a TranslatorClient.
func Plugins(server TranslatorServer) plugin.PluginSet {
	return plugin.PluginSet{PluginName: &grpcPlugin{server: server}}
}

// grpcPlugin is the go-plugin adapter: it registers the server side in the translator process
// and hands the host a client of the generated service.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	server TranslatorServer
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.server == nil {
		return errors.New("translator plugin: no server to register")
	}
	RegisterTranslatorServer(s, p.server)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewTranslatorClient(c), nil
}
