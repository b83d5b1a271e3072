// Package translators holds callwire's built-in translators: programs that turn a phone
// system's own traffic (SIP signalling seen by an observer, a PBX's API) into canonical events
// from sdk/event. A translator never imports core; it runs out of process under the agent and
// hands its events to the agent for delivery.
package translators
