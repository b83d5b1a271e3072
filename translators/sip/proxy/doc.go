// Package proxy is the proxy mode of the SIP observer: a record-routing SIP proxy placed between
// a carrier trunk and a clinic's PBX, on UDP and TCP, that hands every message it forwards to an
// observer (the call model) without ever making a call depend on that observer.
//
// Routing: an initial request (no To tag) that arrives from the PBX goes to the trunk; one that
// arrives from anywhere else goes to the PBX. In-dialog requests follow their Route header (the
// proxy pops its own entries, put there by its Record-Route) or, without one, their Request-URI.
// Responses follow the Via chain back, hop by hop.
//
// Forwarding follows RFC 3261 section 16: the proxy checks and decrements Max-Forwards (483 at
// zero), detects loops from its own Via (482), adds a Via whose branch is derived from the
// request (so a CANCEL and the ACK for a non-2xx response reach the same next hop under the same
// branch as their INVITE), record-routes dialog-creating requests, answers INVITEs with
// 100 Trying itself and absorbs the 100 Trying of the next hop, answers a CANCEL with 200 and
// forwards it downstream once the downstream INVITE has a provisional response, retransmits over
// UDP until the next hop responds, and relays every 2xx response to an INVITE upstream (a 2xx
// that races a CANCEL, and each 2xx of a forked call). 2xx responses and the ACK for them are
// forwarded end to end, as RFC 3261 has them.
//
// The proxy parses with github.com/emiago/sipgo's parser and message model, but runs its own
// UDP and TCP transports: it must send from the port it listens on (the address it advertises in
// Via and Record-Route), count every message that fails to parse, and keep transactions that
// sipgo's transaction layer would answer or end on its own (it answers CANCEL itself).
package proxy
