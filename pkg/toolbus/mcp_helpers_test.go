package toolbus_test

// Helpers of the MCP tests (mcp_*_test.go): the whole pipeline on embedded NATS with
// remote MCP servers, the npm reference servers as child processes, and a look at this
// process's children in /proc.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/internal/testbin"

	"github.com/nats-io/nats.go"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

const (
	mcpEverythingPkg = "@modelcontextprotocol/server-everything"
	mcpMemoryPkg     = "@modelcontextprotocol/server-memory"
)

// mcpRepoRoot is the directory of go.mod.
func mcpRepoRoot(t testing.TB) string { return mcptest.RepoRoot(t) }

// mcpNPMScript returns the entry point (dist/index.js) of an npm reference server.
func mcpNPMScript(t testing.TB, pkg string) string {
	t.Helper()
	return filepath.Join(mcptest.NPMPackage(t, pkg), "dist", "index.js")
}

// mcpPipeline is every stage on a fresh embedded NATS, with cfg (and local tools).
type mcpPipeline struct {
	t       *testing.T
	client  *client.Client
	stop    func()                  // stops the services and waits for them; idempotent
	connect func(string) *nats.Conn // a connection of its own to the pipeline's NATS
}

func startMCPPipeline(t *testing.T, cfg *config.Config, local *localtools.Registry) *mcpPipeline {
	t.Helper()
	url := bustest.Server(t)
	connect := func(name string) *nats.Conn {
		nc, _ := bustest.Connect(t, url, nats.Name(name))
		return nc
	}
	ctx, cancel := context.WithCancel(context.Background())
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: connect("node"),
		Config: cfg, Tools: local, Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := n.Wait(); err != nil {
			t.Errorf("services: %v", err)
		}
	}
	t.Cleanup(stop)
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	return &mcpPipeline{t: t, client: c, stop: stop, connect: connect}
}

// mcpConfig parses a configuration given as JSON, as toolbus would load it.
func mcpConfig(t *testing.T, js string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(js), "test.json", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// mcpCall is one tool call as a model writes it.
type mcpCall struct {
	Name      string `json:"name"`
	Arguments any    `json:"arguments,omitempty"`
}

// ask publishes a response holding calls and returns the results, one per call in
// order.
func (p *mcpPipeline) ask(calls ...mcpCall) []messages.OutputResult {
	p.t.Helper()
	out := p.askOutput(calls...)
	if out.Kind != messages.KindToolResults || len(out.Results) != len(calls) {
		p.t.Fatalf("want %d results, got kind %s with %d: %s", len(calls), out.Kind, len(out.Results), out.Text)
	}
	return out.Results
}

func (p *mcpPipeline) askOutput(calls ...mcpCall) *messages.Output {
	p.t.Helper()
	var text strings.Builder
	text.WriteString("Let me use some tools.\n")
	for _, c := range calls {
		b, err := json.Marshal(c)
		if err != nil {
			p.t.Fatal(err)
		}
		fmt.Fprintf(&text, "<tool_call>%s</tool_call>\n", b)
	}
	return p.askText(text.String())
}

// askText submits text as a model's response and returns its output.
func (p *mcpPipeline) askText(text string) *messages.Output {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := p.client.Ask(ctx, "mcp-test", text, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// mcpOK fails the test unless r succeeded with a result containing every part.
func mcpOK(t *testing.T, r messages.OutputResult, parts ...string) {
	t.Helper()
	if !r.Success {
		t.Errorf("%s failed: %+v", r.Tool, r.Error)
		return
	}
	for _, part := range parts {
		if !bytes.Contains(r.Result, []byte(part)) {
			t.Errorf("%s = %.300s, want it to contain %s", r.Tool, r.Result, part)
		}
	}
}

// mcpFailed fails the test unless r failed with code.
func mcpFailed(t *testing.T, r messages.OutputResult, code messages.ErrorCode) {
	t.Helper()
	if r.Success || r.Error == nil || r.Error.Code != code {
		t.Errorf("%s: success=%v result=%.200s error=%+v, want error %s", r.Tool, r.Success, r.Result, r.Error, code)
	}
}

// mcpEventually polls cond until it holds, failing the test after a generous time.
func mcpEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: did not happen within 45s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mcpStartProcess runs a server process (its output drained) and waits until it
// accepts connections on port. The process is killed when the test ends, unless the
// test killed it before.
func mcpStartProcess(t *testing.T, port int, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { // drain, so that the server never blocks on a full pipe
		_, _ = io.Copy(io.Discard, bufio.NewReader(out))
	}()
	t.Cleanup(func() { mcpKill(cmd) })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	mcpEventually(t, name+" listening on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return cmd
}

// mcpKill kills a process for real (SIGKILL) and reaps it.
func mcpKill(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// mcpStartEverything runs server-everything in an HTTP mode ("streamableHttp" or "sse")
// on port (0: a free one, mcptest.StartEverything) and returns the process and its base
// URL.
func mcpStartEverything(t *testing.T, mode string, port int) (*exec.Cmd, string) {
	t.Helper()
	if port == 0 {
		return mcptest.StartEverything(t, mode)
	}
	index := mcpNPMScript(t, mcpEverythingPkg)
	cmd := mcpStartProcess(t, port, []string{"PORT=" + strconv.Itoa(port)}, "node", index, mode)
	return cmd, "http://127.0.0.1:" + strconv.Itoa(port)
}

// mcpStartTicketService builds and runs examples/ticket-service and returns its
// JSON-RPC endpoint.
func mcpStartTicketService(t *testing.T) string {
	t.Helper()
	bin := testbin.Path(t, "./examples/ticket-service")
	port := mcptest.FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	mcpStartProcess(t, port, nil, bin, "-addr", addr)
	mcpEventually(t, "ticket-service healthy", func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return "http://" + addr + "/rpc"
}

// mcpChildren lists this process's live children (not zombies) whose environment holds
// marker ("KEY=value"): the stdio servers a test's pool started.
func mcpChildren(t *testing.T, marker string) []int {
	t.Helper()
	self := os.Getpid()
	return mcptest.Procs(t, func(p mcptest.Proc) bool {
		if p.PPID != self {
			return false
		}
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "environ"))
		return err == nil && slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool { return string(kv) == marker })
	})
}

// mcpOneChild waits for exactly one child with marker and returns its pid.
func mcpOneChild(t *testing.T, marker string) int {
	t.Helper()
	var kids []int
	mcpEventually(t, "one server process with "+marker, func() bool {
		kids = mcpChildren(t, marker)
		return len(kids) == 1
	})
	return kids[0]
}

// mcpSIGKILL kills pid for real.
func mcpSIGKILL(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}
