// Package ringcentral is the RingCentral translator (`builtin: ringcentral`): it reports the
// calls of a RingCentral account as canonical events without touching the SIP path.
//
// Two paths feed it. The live path subscribes to the account's telephony-session notifications
// over RingCentral's WebSocket transport and maps each party's status changes to events as they
// happen. The reconciliation path polls the account's call log for closed calls and emits their
// call_ended and call_recorded events with the same ids the live path gives them, so the core
// keeps one of each whichever path reported first. docs/ringcentral.md describes the
// configuration and the mapping.
package ringcentral
