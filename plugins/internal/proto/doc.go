// Package proto is the generated Go code of the translator protocol (translator.proto). It is
// internal: translator authors and the agent see only the plain Go types of package plugins.
// Regenerate it with `make proto`; never edit the generated files by hand.
package proto
