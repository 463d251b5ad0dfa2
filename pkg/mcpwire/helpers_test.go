package mcpwire_test

import (
	"context"
	"flag"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/internal/testbin"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
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

// ctxT is a context bounded generously, for calls that must not hang a failing test: a
// bound that only a hung test reaches, also on a machine busy with the whole suite (a
// subtest that starts an npm server and makes a dozen calls through it took over 30 s
// there).
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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

// procs lists the live (not zombie) processes whose parent or process group is id.
func procs(t testing.TB, parent, group int) []int {
	t.Helper()
	return mcptest.Procs(t, func(p mcptest.Proc) bool {
		return parent > 0 && p.PPID == parent || group > 0 && p.PGRP == group
	})
}

// tree lists the live descendants of root.
func tree(t testing.TB, root int) []int {
	t.Helper()
	children := map[int][]int{}
	mcptest.Procs(t, func(p mcptest.Proc) bool {
		children[p.PPID] = append(children[p.PPID], p.PID)
		return false
	})
	var out []int
	for queue := children[root]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// stdioServer returns testdata/stdioserver's program.
func stdioServer(t testing.TB) string {
	t.Helper()
	return testbin.Path(t, "./pkg/mcpwire/testdata/stdioserver")
}

func itoa(n int) string { return strconv.Itoa(n) }
