//go:build unix

package filelock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Lock takes an exclusive lock on path, creating the file if it is missing, without waiting: it
// fails with an error wrapping ErrHeld when another holder has it. Closing the returned file, or
// the process ending, releases it.
func Lock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrHeld)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
