// Package asterisk is the Asterisk translator (`builtin: asterisk`): it logs in to the Asterisk
// Manager Interface (AMI), reads the call, agent and dialplan events, and turns them into
// callwire's canonical call events with observer pbx_api.
//
// Tracker is the call model, pure and without I/O: a call is a Linkedid, its legs are channels
// by Uniqueid, Local channels are plumbing. Translator connects (package ami), reconnects with
// backoff, and after every login rebuilds the Tracker's view from CoreShowChannels, so that a
// lost connection neither loses a call nor reports one twice. docs/asterisk.md has the mapping
// from AMI events to canonical events, and every configuration key.
package asterisk
