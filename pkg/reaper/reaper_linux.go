package reaper

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// arg0 is the argv[0] that starts a binary in reaper mode; argv[1] is the program's
// path and the rest its own argv.
const arg0 = "toolbus-reaper"

// limitArg0 is the argv[0] that starts a binary as a limiter: it sets the limits of
// argv[1] on itself and executes the program argv[2] with the rest as its argv.
const limitArg0 = "toolbus-limit"

// limitsFlag, after arg0, gives the reaper its program's limits (the next argument).
const limitsFlag = "-limits"

// lifelineFD is the reaper's end of the lifeline: the first of exec.Cmd's ExtraFiles.
const lifelineFD = 3

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// self is the running binary, which every process may execute as long as it runs.
const self = "/proc/self/exe"

// Main runs the reaper and exits when this process was started as one (by Contain in
// another process of this binary); otherwise it lets Contain use reapers from now on,
// and returns. Call it first thing in main: a binary that never calls it runs its
// programs in a process group of their own, without a reaper. o may be nil.
func Main(o *Options) {
	if len(os.Args) >= 3 && os.Args[0] == limitArg0 {
		os.Exit(limitExec(os.Args[1], os.Args[2], os.Args[3:]))
	}
	if len(os.Args) >= 3 && os.Args[0] == arg0 {
		var notify func(chan<- os.Signal, ...os.Signal)
		if o != nil {
			notify = o.Notify
		}
		spec, args := "", os.Args[1:]
		if len(args) >= 3 && args[0] == limitsFlag {
			spec, args = args[1], args[2:]
		}
		os.Exit(reap(args[0], args[1:], spec, notify))
	}
	enabled.Store(true)
}

// enabled is set by Main: this binary answers to reaper mode.
var enabled atomic.Bool

// Containment is one program running under its reaper.
type Containment struct {
	lifeline *os.File // our end; closing it kills the tree
	once     sync.Once
	cmd      *exec.Cmd // set when the reaper is not available: Kill kills the group
}

var available = sync.OnceValue(func() bool {
	_, err := os.Stat(self)
	return err == nil
})

// Contain prepares cmd, not yet started, to run under a reaper of its own: its Path
// and Args become the reaper's, which starts the program they named. The program and
// the reaper lead a process group of their own. Call Kill once the command is done
// with (after Wait, or to stop it); it releases the lifeline.
func Contain(cmd *exec.Cmd) (*Containment, error) { return ContainWith(cmd, Limits{}) }

// ContainWith is Contain with limits: the reaper sets them on the program before its
// first instruction (through a limiter: this binary again, which sets them on itself
// and executes the program), and runs as l.RunAs with it. Without reaper mode (no Main)
// only RunAs applies.
func ContainWith(cmd *exec.Cmd, l Limits) (*Containment, error) {
	if cmd.Process != nil {
		return nil, errors.New("reaper: command already started")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if l.RunAs != "" {
		cred, err := credential(l.RunAs)
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr.Credential = cred
	}
	if cmd.Err != nil || !enabled.Load() || !available() || !runnable(cmd) {
		// Start reports a program it cannot run with os/exec's own error (ENOENT,
		// EACCES), which the reaper could only print.
		return &Containment{cmd: cmd}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("reaper: lifeline: %w", err)
	}
	args := cmd.Args
	if len(args) == 0 {
		args = []string{cmd.Path}
	}
	cmd.Args = append([]string{arg0, cmd.Path}, args...)
	if spec := l.spec(); spec != "" {
		cmd.Args = append([]string{arg0, limitsFlag, spec, cmd.Path}, args...)
	}
	cmd.Path = self
	cmd.ExtraFiles = []*os.File{r}
	return &Containment{lifeline: w, cmd: cmd}, nil
}

// runnable reports whether cmd's program is an executable file.
func runnable(cmd *exec.Cmd) bool {
	path := cmd.Path
	if !filepath.IsAbs(path) && cmd.Dir != "" {
		path = filepath.Join(cmd.Dir, path)
	}
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// Kill stops the program and every process it started, if any is left: the reaper
// kills them all and exits. Without a reaper it kills the process group. It may be
// called any number of times, before or after Wait.
func (c *Containment) Kill() {
	c.once.Do(func() {
		if c.lifeline != nil {
			c.lifeline.Close()
			for _, f := range c.cmd.ExtraFiles {
				f.Close()
			}
		}
	})
	if c.lifeline == nil && c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Exited tells the containment how its reaper ended: the command's ProcessState, from
// the goroutine that waited for it. A reaper killed itself (SIGKILL from outside) swept
// nothing: its program died of Pdeathsig, but what the program started is left. Those
// still in the reaper's process group are killed here; one that left the group
// (setsid) escapes, which only a cgroup could prevent.
func (c *Containment) Exited(state *os.ProcessState) {
	if c.lifeline == nil || c.cmd.Process == nil || state == nil {
		return
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Signal sends sig to the program (not to its reaper, which stays to clean up after
// it): through the lifeline, one byte per signal, when there is a reaper.
func (c *Containment) Signal(sig syscall.Signal) error {
	if c.lifeline == nil {
		if c.cmd.Process == nil {
			return errors.New("reaper: command not started")
		}
		return c.cmd.Process.Signal(sig)
	}
	if sig <= 0 || sig > 255 {
		return fmt.Errorf("reaper: signal %d cannot be passed on", sig)
	}
	_, err := c.lifeline.Write([]byte{byte(sig)})
	return err
}

// reap is the reaper: it starts the program at path with argv, passes on the signals
// the lifeline carries, and once the program has exited or the lifeline is cut, kills
// and waits for every descendant; it returns the program's exit code.
func reap(path string, argv []string, limits string, notify func(chan<- os.Signal, ...os.Signal)) int {
	// An old kernel without subreapers still gets the program's own group killed.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	syscall.CloseOnExec(lifelineFD)

	exe, args := path, argv
	if limits != "" { // the limiter sets them, then becomes the program (same process)
		exe, args = self, append([]string{limitArg0, limits, path}, argv...)
	}
	pid, err := syscall.ForkExec(exe, args, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		if errors.Is(err, os.ErrNotExist) {
			return 127
		}
		return 126
	}
	me := os.Getpid()
	// A stop signal sent to the reaper itself (a service manager stopping every process,
	// `pkill toolbus`) is passed on to the program, and the reaper stays to sweep what is
	// left: left to the runtime's default, it would die at once and leave the program's
	// descendants to init. The binary gives the way (Options.Notify): the library
	// subscribes to no signal of its own accord.
	if notify != nil {
		signals := make(chan os.Signal, 8)
		notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
		go func() {
			for s := range signals {
				_ = syscall.Kill(pid, s.(syscall.Signal))
			}
		}()
	}
	go func() {
		// Each byte is a signal for the program; the end of the lifeline (cut, or the
		// caller gone) kills the tree.
		lifeline := os.NewFile(lifelineFD, "lifeline")
		buf := make([]byte, 16)
		for {
			n, err := lifeline.Read(buf)
			for _, b := range buf[:n] {
				_ = syscall.Kill(pid, syscall.Signal(b))
			}
			if err != nil {
				break
			}
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		killAll(me)
	}()

	var status syscall.WaitStatus
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || wpid == pid {
			status = ws
			break
		}
	}
	sweep(me)
	return exitCode(status)
}

// sweep kills every descendant of pid left and waits for them, until pid has no child;
// a process stuck in the kernel is given up after a while and goes to init.
func sweep(pid int) {
	deadline := time.Now().Add(5 * time.Second)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		for {
			wpid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.ECHILD) {
				return
			}
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || wpid <= 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			return
		}
		killAll(pid)
		time.Sleep(pause)
	}
}

// killAll sends SIGKILL to every living descendant of pid.
func killAll(pid int) {
	for _, p := range descendants(pid) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// descendants lists the living (not zombie) descendants of root, read from /proc.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// parentOf reads a living process's parent from /proc/<pid>/stat; zombies and
// processes gone meanwhile report false.
func parentOf(pid int) (int, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStat(stat)
}

// parseStat returns the parent of a process from its /proc/<pid>/stat line, "pid
// (comm) state ppid ...", and false for a zombie or a line it cannot read. The process
// names itself (comm), so comm may hold spaces and parentheses: the state follows the
// last ')'.
func parseStat(stat []byte) (int, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 || fields[0][0] == 'Z' || fields[0][0] == 'X' {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil || ppid < 0 {
		return 0, false
	}
	return ppid, true
}

// exitCode ends the reaper as the program ended: with its exit status, or killed by
// its signal where the Go runtime lets a signal end the process.
func exitCode(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		sig := ws.Signal()
		switch sig {
		case syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGALRM,
			syscall.SIGUSR1, syscall.SIGUSR2:
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig)
			time.Sleep(time.Second) // the signal ends the process
		}
		return 128 + int(sig)
	}
	return 1
}
