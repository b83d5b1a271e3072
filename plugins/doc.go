// Package plugins is the protocol between the callwire agent and its translators, and the host
// that runs them: a handshake with a protocol version, gRPC adapters over hashicorp/go-plugin,
// and the launching, supervision and shutdown of translator processes.
//
// Translators never see this package's wire types; they implement a small Go interface and call
// one Serve function.
package plugins
