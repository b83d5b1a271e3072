package plugins

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill a translator if the agent dies without stopping it, so that
// even a killed agent leaves no orphan behind.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
