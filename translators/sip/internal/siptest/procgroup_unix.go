//go:build unix

package siptest

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own and makes cancelling it (the test's context
// ending) terminate the whole group: Kamailio forks workers, and a signal to its main process
// alone can leave them running after the test.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return stopGroup(cmd, syscall.SIGTERM) }
}

// stopGroup sends sig to cmd's process group, then SIGKILL to whatever of it is left once cmd's
// main process has been waited for.
func stopGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// killGroup ends every process left in cmd's group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
