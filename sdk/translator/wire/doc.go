// Package wire is the protocol between the callwire agent (the host) and a translator (the
// plugin): the generated gRPC code of translator.proto, the go-plugin handshake, the plugin set
// both sides register, and the rule that every string sent is UTF-8. Package
// sdk/translator serves it in a translator process; the agent's host (package plugins of the
// callwire server) calls it. A translator author never imports it.
//
// Its API follows ProtocolVersion rather than the SDK's compatibility promise: a change here is a
// change of the protocol, made on both ends at once. Regenerate the generated files with
// `make proto` at the repository's root; never edit them by hand.
package wire
