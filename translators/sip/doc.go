// Package sip is the built-in translator `sip`, the SIP observer: it watches a clinic's SIP
// signalling, either in the call path as a record-routing proxy (mode proxy, package
// translators/sip/proxy) or as a passive HEPv3 collector of copies (mode hep, package
// translators/sip/tap), hands every message to the call model (translators/sip/callmodel), and
// emits the events the model derives, through the agent. docs/sip-observer.md is its manual.
//
// The call path never waits for translation: the observer hands messages to a bounded queue and
// moves on; the call model and the emitters drain it in their own goroutines. A full queue drops
// messages (counted and logged) rather than slowing a call.
package sip
