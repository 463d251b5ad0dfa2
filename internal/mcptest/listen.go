package mcptest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartEverything runs server-everything in an HTTP mode ("streamableHttp" or "sse") on
// a free port until the test ends, and returns the process and its base URL.
//
// A free port can be taken by another process between choosing it and the server's bind
// (a second test suite on the machine does that); a dial to the port would then reach
// the other process, and the server prints its "listening on port" line even when its
// bind fails. So the server is ready when its own process holds a listening socket on
// the port ([ListensOn]); one that ended instead is started again on another port.
func StartEverything(t testing.TB, mode string) (*exec.Cmd, string) {
	t.Helper()
	index := filepath.Join(NPMPackage(t, "@modelcontextprotocol/server-everything"), "dist", "index.js")
	for attempt := 1; ; attempt++ {
		port := FreePort(t)
		cmd := exec.Command("node", index, mode)
		cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan struct{})
		go func() { cmd.Wait(); close(ended) }()
		stop := func() {
			cmd.Process.Kill()
			<-ended
		}
		listening := false
		deadline := time.Now().Add(time.Minute)
	wait:
		for {
			select {
			case <-ended:
				break wait
			default:
			}
			if listening = ListensOn(cmd.Process.Pid, port); listening {
				break
			}
			if time.Now().After(deadline) {
				stop()
				t.Fatalf("server-everything %s: neither listening on port %d nor ended within a minute", mode, port)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if listening {
			t.Cleanup(stop)
			return cmd, "http://127.0.0.1:" + strconv.Itoa(port)
		}
		stop()
		if attempt == 5 {
			t.Fatalf("server-everything %s could not listen on any of 5 ports", mode)
		}
	}
}

// ListensOn reports whether process pid holds a TCP socket listening on port (from
// /proc: the sockets among its file descriptors, the listening ones in
// /proc/net/tcp and tcp6).
func ListensOn(pid, port int) bool {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	want := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// local_address, state (0A: listening), inode
			if len(f) > 9 && strings.HasSuffix(f[1], want) && f[3] == "0A" && inodes[f[9]] {
				return true
			}
		}
	}
	return false
}

// FreePort returns a TCP port nobody listened on a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
