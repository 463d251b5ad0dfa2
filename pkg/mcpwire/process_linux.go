package mcpwire

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts the child in a process group of its own, and has the kernel
// kill it if toolbus dies without closing it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup kills whatever is left of the child's process group: an npx or shell wrapper
// leaves its real server behind when only the wrapper is stopped.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil && cmd.Process.Pid > 0 {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
