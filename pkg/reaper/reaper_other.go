//go:build !unix

package reaper

import (
	"errors"
	"os"
	"os/exec"
)

// Containment is one program; only the program itself is killed.
type Containment struct{ cmd *exec.Cmd }

// Contain leaves cmd, not yet started, as it is.
func Contain(cmd *exec.Cmd) (*Containment, error) {
	if cmd.Process != nil {
		return nil, errors.New("reaper: command already started")
	}
	return &Containment{cmd: cmd}, nil
}

// Kill kills the program.
func (c *Containment) Kill() {
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Kill()
	}
}

// Main does nothing here: there is no reaper mode.
func Main(*Options) {}

// Signal sends sig to the program.
func (c *Containment) Signal(sig os.Signal) error {
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
