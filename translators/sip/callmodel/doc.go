// Package callmodel is the SIP observer's call model: what a dialog's SIP messages mean for the
// call they belong to. This part holds the SIP-level readings the dialog tracker builds on, as
// pure functions over messages parsed by github.com/emiago/sipgo: who is calling and whether they
// withheld their identity, who answered, the forwarded-from chain (Diversion, History-Info), the
// media direction of an SDP body (hold), the target of a REFER and the Reason header.
//
// The readings return SIP facts (display names, user parts, URI text, flags); turning a user
// part into an E.164 number is translators/numbering's job. None of them panics on malformed
// input: they return an error or a zero result. docs/sip-observer.md, "How SIP headers are read",
// states the rules.
package callmodel
