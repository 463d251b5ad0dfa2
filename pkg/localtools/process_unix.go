//go:build unix

package localtools

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup makes the tool lead a new process group, and cancelling it kill the
// whole group: a shell script's children must not outlive its timeout.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killProcessGroup kills whatever is left of the tool's process group.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
