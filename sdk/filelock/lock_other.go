//go:build !unix

package filelock

import "os"

// Lock opens path, creating it if it is missing. Where advisory locks are not available it
// never reports ErrHeld: one holder per file is then up to the operator.
func Lock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}
