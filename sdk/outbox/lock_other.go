//go:build !unix

package outbox

import "os"

// lockFile opens path; where advisory locks are not available, one agent per outbox is up to
// the operator.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
