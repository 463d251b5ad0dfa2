//go:build unix

package healthd

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts a probed stdio server in a process group of its own, so that
// an npx or shell wrapper and the real server behind it are killed together.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills whatever is left of the server's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil && cmd.Process.Pid > 0 {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
