//go:build !unix

package localtools

import "os/exec"

// ownProcessGroup keeps exec's default: cancelling kills the tool's process only.
func ownProcessGroup(cmd *exec.Cmd) {}

func killProcessGroup(cmd *exec.Cmd) {}
