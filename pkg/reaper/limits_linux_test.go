package reaper

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// runLimited runs a shell script under a reaper with limits and returns its exit code
// and stderr.
func runLimited(t *testing.T, body string, l Limits) (int, string) {
	t.Helper()
	cmd := exec.Command(script(t, body))
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	c, err := ContainWith(cmd, l)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// Each limit is set on the program before it runs, and says which one it hit; without
// limits the same programs run as they like.
func TestLimits(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("the test needs python3: %v", err)
	}
	alloc := python + ` -c 'b = bytearray(600 << 20); print(len(b))'` + "\n"
	t.Run("memory", func(t *testing.T) {
		l := Limits{MemoryBytes: 256 << 20}
		code, stderr := runLimited(t, alloc, l)
		if code == 0 || l.Exceeded(code, stderr) == "" || !strings.Contains(l.Exceeded(code, stderr), "memory") {
			t.Errorf("600 MiB under a 256 MiB limit: exit %d, %q, stderr %s", code, l.Exceeded(code, stderr), stderr)
		}
		if code, stderr := runLimited(t, alloc, Limits{}); code != 0 {
			t.Errorf("600 MiB without a limit: exit %d, %s", code, stderr)
		}
	})
	t.Run("cpu", func(t *testing.T) {
		l := Limits{CPUSeconds: 1}
		code, stderr := runLimited(t, "while :; do :; done\n", l)
		if !strings.Contains(l.Exceeded(code, stderr), "CPU") {
			t.Errorf("a busy loop under 1 s of CPU: exit %d, %q", code, l.Exceeded(code, stderr))
		}
	})
	t.Run("file size", func(t *testing.T) {
		l := Limits{FileSizeBytes: 1 << 20}
		code, stderr := runLimited(t, "dd if=/dev/zero of=big bs=1M count=8 2>/dev/null\n", l)
		if !strings.Contains(l.Exceeded(code, stderr), "file size") {
			t.Errorf("8 MiB under a 1 MiB file limit: exit %d, %q, %s", code, l.Exceeded(code, stderr), stderr)
		}
	})
}

// The open-files limit is the program's, as it sees it.
func TestLimitsAreThePrograms(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(script(t, "ulimit -n > "+out+"; ulimit -f >> "+out+"\n"))
	c, err := ContainWith(cmd, Limits{OpenFiles: 64, FileSizeBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	// ulimit -f counts 512-byte blocks in dash, 1024-byte ones in bash.
	if got := strings.Fields(string(b)); len(got) != 2 || got[0] != "64" || got[1] != strconv.Itoa(1<<20/512) && got[1] != strconv.Itoa(1<<20/1024) {
		t.Errorf("the program sees limits %q, want 64 open files and 1 MiB files", got)
	}
}

// With RunAs, the program runs as that user: it cannot read the environment of a
// process of another user (a stdio server's secrets), which it can as the same user.
func TestRunAs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("the test runs as root (CI's user): it needs to switch users")
	}
	secret := exec.Command("sleep", "300")
	secret.Env = []string{"API_KEY=runas-secret-2f9c1"}
	sc, err := ContainWith(secret, Limits{RunAs: "65533:65533"})
	if err != nil {
		t.Fatal(err)
	}
	if err := secret.Start(); err != nil {
		t.Fatal(err)
	}
	defer sc.Kill()
	// The reaper's child is the program: find it.
	var server int
	for range 200 {
		if d := descendants(secret.Process.Pid); len(d) > 0 {
			server = d[0]
			break
		}
		syscall.Nanosleep(&syscall.Timespec{Nsec: 10e6}, nil)
	}
	if server == 0 {
		t.Fatal("the server did not start")
	}
	read := "cat /proc/" + strconv.Itoa(server) + "/environ >/dev/null 2>&1 && echo read || echo refused\n"
	for _, tc := range []struct {
		runAs, want string
	}{{"65534:65534", "refused"}, {"65533:65533", "read"}} {
		path := script(t, read+"id -u >&2\n")
		for dir := filepath.Dir(path); dir != os.TempDir() && dir != "/"; dir = filepath.Dir(dir) {
			if err := os.Chmod(dir, 0o755); err != nil { // the other user runs the script
				t.Fatal(err)
			}
		}
		cmd := exec.Command(path)
		cmd.Dir = "/"
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		c, err := ContainWith(cmd, Limits{RunAs: tc.runAs})
		if err != nil {
			t.Fatal(err)
		}
		err = cmd.Run()
		c.Kill()
		if err != nil {
			t.Fatalf("as %s: %v: %s", tc.runAs, err, stderr.String())
		}
		uid, _, _ := strings.Cut(tc.runAs, ":")
		if got := strings.TrimSpace(stdout.String()); got != tc.want || strings.TrimSpace(stderr.String()) != uid {
			t.Errorf("a tool as %s reading a server's environ as 65533: %q (uid %s), want %q", tc.runAs, got, stderr.String(), tc.want)
		}
	}
}

// A reaper killed from outside (SIGKILL: it can sweep nothing) takes its program with it
// (Pdeathsig), and Kill then kills what the program started that stayed in its process
// group. A descendant that left the group (setsid) outlives it: only a cgroup could catch
// it, which docs/security.md says.
func TestAReaperKilledFromOutside(t *testing.T) {
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	path := script(t, `sleep 300 &
echo $! >> "$PIDS"
setsid sh -c 'echo $$ >> "$PIDS"; exec sleep 300' &
while [ "$(wc -l < "$PIDS")" -lt 2 ]; do sleep 0.01; done
echo $$ >> "$PIDS"
touch "$DIR/ready"; sleep 300
`)
	cmd := exec.Command(path)
	cmd.Env = append(os.Environ(), "PIDS="+pids, "DIR="+dir)
	c, err := Contain(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, filepath.Join(dir, "ready"))
	got := readPids(t, pids, 3)
	child, escaped, program := got[0], got[1], got[2]
	t.Cleanup(func() { syscall.Kill(escaped, syscall.SIGKILL) })
	if err := cmd.Process.Kill(); err != nil { // the reaper, as an OOM killer or an operator would
		t.Fatal(err)
	}
	_ = cmd.Wait()
	c.Exited(cmd.ProcessState)
	c.Kill()
	waitGone(t, []int{program, child})
	// What remains impossible without a cgroup, measured rather than asserted.
	t.Logf("a descendant in a session of its own outlived the killed reaper: %v", alive(escaped))
}
