//go:build unix && !linux

package reaper

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// Containment is one program in a process group of its own: without subreapers, a
// descendant that leaves the group is not caught.
type Containment struct{ cmd *exec.Cmd }

// Contain puts cmd, not yet started, in a process group of its own.
func Contain(cmd *exec.Cmd) (*Containment, error) {
	if cmd.Process != nil {
		return nil, errors.New("reaper: command already started")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return &Containment{cmd: cmd}, nil
}

// Kill kills the program's process group.
func (c *Containment) Kill() {
	if c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Main does nothing here: there is no reaper mode without subreapers.
func Main(*Options) {}

// Signal sends sig to the program.
func (c *Containment) Signal(sig syscall.Signal) error {
	if c.cmd.Process == nil {
		return errors.New("reaper: command not started")
	}
	return c.cmd.Process.Signal(sig)
}

// ContainWith is Contain: limits need Linux's reaper (RunAs included).
func ContainWith(cmd *exec.Cmd, _ Limits) (*Containment, error) { return Contain(cmd) }

// Exceeded is "": no limit is set here.
func (Limits) Exceeded(int, string) string { return "" }

// Exited does nothing here: Kill kills what there is to kill.
func (c *Containment) Exited(*os.ProcessState) {}
