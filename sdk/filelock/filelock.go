// Package filelock keeps a file to one holder at a time, across processes: the agent's outbox,
// a translator's cursor. The lock is advisory and ends with the process that holds it, however
// it ends (kill -9 included), so a crash never leaves a file locked.
package filelock

import "errors"

// ErrHeld reports that another holder (another process, or another open of the same file in
// this one) has the lock.
var ErrHeld = errors.New("held by another process")
