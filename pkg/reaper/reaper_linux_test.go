package reaper

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// escapes is a shell fragment that starts a process of each kind that outlives a
// process-group kill, and appends their pids to $PIDS: a plain child, a setsid'd child,
// a double-forked setsid'd grandchild (its parent exits at once), and a daemon's child
// (a new session whose leader exits).
const escapes = `
sleep 300 &
echo $! >> "$PIDS"
setsid sleep 300 &
echo $! >> "$PIDS"
( setsid sleep 300 & echo $! >> "$PIDS" ) &
wait $!
setsid sh -c 'sleep 300 & echo $! >> "$PIDS"' &
wait $!
`

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Fatalf("the tests need setsid (util-linux): %v", err)
	}
	path := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// contained starts path under a reaper with $PIDS and $DIR set, and returns the
// command, its containment and the pid file.
func contained(t *testing.T, path string) (*exec.Cmd, *Containment, string) {
	t.Helper()
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), "PIDS="+pids, "DIR="+dir)
	c, err := Contain(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, c, pids
}

func readPids(t *testing.T, file string, want int) []int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != want {
		t.Fatalf("pid file %q: want %d pids", data, want)
	}
	return pids
}

// alive reports whether pid runs: it exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	_, ok := parentOf(pid)
	return ok
}

// waitFile waits for a file the script creates when it is ready.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
	}
}

// waitGone waits for processes that are killed by a reaper that is not ours to wait
// for (the caller-death test); the deadline only bounds a failure.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still runs", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestEscapedDescendantsDieWithTheProgram(t *testing.T) {
	cmd, c, pidFile := contained(t, script(t, escapes+"exit 3\n"))
	err := cmd.Wait()
	c.Kill()
	if ee := new(exec.ExitError); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("Wait = %v, want exit status 3 passed through", err)
	}
	// The reaper waited for every descendant before it exited: none may be left now.
	for _, pid := range readPids(t, pidFile, 4) {
		if alive(pid) {
			t.Errorf("process %d outlived the program", pid)
		}
	}
}

func TestKillStopsTheWholeTree(t *testing.T) {
	path := script(t, escapes+`touch "$DIR/ready"; sleep 300`+"\n")
	cmd, c, pidFile := contained(t, path)
	waitFile(t, filepath.Join(filepath.Dir(pidFile), "ready"))
	pids := readPids(t, pidFile, 4)
	c.Kill()
	err := cmd.Wait()
	if ee := new(exec.ExitError); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Wait = %v, want killed", err)
	}
	for _, pid := range append(pids, cmd.Process.Pid) {
		if alive(pid) {
			t.Errorf("process %d outlived Kill", pid)
		}
	}
}

// A stop signal reaches the program whether the caller sends it through the lifeline
// (Containment.Signal) or somebody sends it to the reaper's process (a service manager
// stopping everything): the program stops on its own terms, and what it started is
// swept.
func TestStopSignalsReachTheProgram(t *testing.T) {
	for _, tt := range []struct {
		name string
		send func(cmd *exec.Cmd, c *Containment) error
	}{
		{"through the lifeline", func(_ *exec.Cmd, c *Containment) error { return c.Signal(syscall.SIGTERM) }},
		{"to the reaper", func(cmd *exec.Cmd, _ *Containment) error { return cmd.Process.Signal(syscall.SIGTERM) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := script(t, escapes+`trap 'echo stopped > "$DIR/out"; exit 0' TERM
touch "$DIR/ready"
while :; do sleep 0.05; done
`)
			cmd, c, pidFile := contained(t, path)
			dir := filepath.Dir(pidFile)
			waitFile(t, filepath.Join(dir, "ready"))
			pids := readPids(t, pidFile, 4)
			if err := tt.send(cmd, c); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("Wait = %v, want the program's own clean exit", err)
			}
			c.Kill()
			if out, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(out) != "stopped\n" {
				t.Fatalf("the program did not handle SIGTERM: %q, %v", out, err)
			}
			for _, pid := range pids {
				if alive(pid) {
					t.Errorf("process %d outlived the program", pid)
				}
			}
		})
	}
}

func TestContainmentsAreIndependent(t *testing.T) {
	path := script(t, escapes+`touch "$DIR/ready"; sleep 300`+"\n")
	cmdA, a, pidsA := contained(t, path)
	cmdB, b, pidsB := contained(t, path)
	waitFile(t, filepath.Join(filepath.Dir(pidsA), "ready"))
	waitFile(t, filepath.Join(filepath.Dir(pidsB), "ready"))
	a.Kill()
	_ = cmdA.Wait()
	for _, pid := range readPids(t, pidsB, 4) {
		if !alive(pid) {
			t.Errorf("killing one program killed process %d of another", pid)
		}
	}
	b.Kill()
	_ = cmdB.Wait()
}

func TestMissingProgram(t *testing.T) {
	cmd := exec.Command(filepath.Join(t.TempDir(), "absent"))
	c, err := Contain(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	// Start says why, as os/exec does, not a reaper that could only print it.
	if err := cmd.Start(); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start = %v, want ErrNotExist", err)
	}
}

// Nothing happens at import time: a binary whose main never called Main runs its
// programs without a reaper (a process group of their own), since starting it again in
// reaper mode would run its own main instead.
func TestWithoutMainNoReaper(t *testing.T) {
	enabled.Store(false)
	defer enabled.Store(true)
	path := script(t, "exit 0\n")
	cmd := exec.Command(path)
	c, err := Contain(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != path || c.lifeline != nil {
		t.Fatalf("without Main: Path %q (lifeline %v), want the program itself", cmd.Path, c.lifeline != nil)
	}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	c.Kill()
}

// TestCallerDeath kills, for real, a process that contains a program: the reaper
// sees its lifeline cut and kills the program's whole tree.
func TestCallerDeath(t *testing.T) {
	if dir := os.Getenv("REAPER_TEST_CALLER"); dir != "" {
		caller(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCallerDeath$")
	cmd.Env = append(os.Environ(), "REAPER_TEST_CALLER="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "ready"))
	pids := readPids(t, filepath.Join(dir, "pids"), 4)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, pids)
}

// caller contains a program that leaves escapes, then waits to be killed.
func caller(dir string) {
	path := filepath.Join(dir, "tool")
	body := "#!/bin/sh\n" + escapes + `touch "$DIR/ready"; sleep 300` + "\n"
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		panic(err)
	}
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), "PIDS="+filepath.Join(dir, "pids"), "DIR="+dir)
	if _, err := Contain(cmd); err != nil {
		panic(err)
	}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	time.Sleep(5 * time.Minute)
	fmt.Println("not killed")
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		stat string
		ppid int
		ok   bool
	}{
		{"12 (sleep) S 7 12 12 0 -1", 7, true},
		{"12 (a b) c) R 1 12", 1, true},
		{"12 () Z 3) S 9 1", 9, true}, // comm chosen to look like a zombie
		{"12 (sleep) Z 7 12", 0, false},
		{"12 (sleep) X 7", 0, false},
		{"12 (sleep) S", 0, false},
		{"12 sleep S 7", 0, false},
		{"12 (sleep) S -4", 0, false},
		{"", 0, false},
	} {
		ppid, ok := parseStat([]byte(tc.stat))
		if ppid != tc.ppid || ok != tc.ok {
			t.Errorf("parseStat(%q) = %d, %v; want %d, %v", tc.stat, ppid, ok, tc.ppid, tc.ok)
		}
	}
	if _, ok := parentOf(os.Getpid()); !ok {
		t.Fatal("parentOf cannot read this process")
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("12 (sleep) S 7 12 12 0 -1"))
	f.Add([]byte("12 () Z 3) S 9 1"))
	f.Add([]byte("1 (x) Z"))
	f.Fuzz(func(t *testing.T, stat []byte) {
		ppid, ok := parseStat(stat)
		if ok && ppid < 0 {
			t.Fatalf("negative parent %d", ppid)
		}
		if !ok && ppid != 0 {
			t.Fatalf("parent %d reported with false", ppid)
		}
	})
}
