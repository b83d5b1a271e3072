//go:build !linux

package plugins

import "os/exec"

// setProcAttr does nothing where the kernel cannot tie a child's life to its parent's.
func setProcAttr(*exec.Cmd) {}
