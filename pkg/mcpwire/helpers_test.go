package mcpwire_test

import (
	"context"
	"flag"
	"github.com/toolbus/toolbus/internal/mcptest"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if builtPath != "" && buildErr == nil {
		os.RemoveAll(filepath.Dir(builtPath))
	}
	os.Exit(code)
}

// repoRoot and npmPackage: see internal/mcptest.
func repoRoot(t testing.TB) string { return mcptest.RepoRoot(t) }

func npmPackage(t testing.TB, name string) string { return mcptest.NPMPackage(t, name) }

// newPool returns a pool closed when the test ends.
func newPool(t testing.TB, servers map[string]mcpwire.ServerConfig, opts *mcpwire.Options) *mcpwire.Pool {
	t.Helper()
	p, err := mcpwire.NewPool(servers, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// inMemory makes Options.Dial connect every attempt to a new session of srv.
func inMemory(srv *mcp.Server) func(context.Context, string) (mcp.Transport, error) {
	return func(ctx context.Context, _ string) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		if _, err := srv.Connect(ctx, st, nil); err != nil {
			return nil, err
		}
		return ct, nil
	}
}

// placeholder is the configuration of a server that Options.Dial provides.
var placeholder = mcpwire.ServerConfig{Command: "in-memory"}

// ctxT is a context bounded generously, for calls that must not hang a failing test.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds, failing the test after a generous time.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: did not happen within 20s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a TCP port nobody listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// procs lists the live (not zombie) processes whose parent or process group is id.
func procs(t testing.TB, parent, group int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc to count processes in")
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		pgrp, _ := strconv.Atoi(fields[2])
		if (parent > 0 && ppid == parent) || (group > 0 && pgrp == group) {
			out = append(out, pid)
		}
	}
	return out
}

var (
	buildOnce sync.Once
	builtPath string
	buildErr  error
)

// stdioServer builds testdata/stdioserver once per test binary and returns its path.
func stdioServer(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpwire-stdioserver")
		if err != nil {
			buildErr = err
			return
		}
		builtPath = filepath.Join(dir, "stdioserver")
		cmd := exec.Command("go", "build", "-o", builtPath, "./testdata/stdioserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = err
			builtPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building testdata/stdioserver: %v\n%s", buildErr, builtPath)
	}
	return builtPath
}

func itoa(n int) string { return strconv.Itoa(n) }
