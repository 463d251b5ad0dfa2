package toolbus_test

// Faults of remote MCP servers, through the whole pipeline: real processes killed for
// real, an HTTP server restarted, a tool list that changes, a tool that hangs. The
// mechanisms are proven on the pool itself in pkg/mcpwire (TestStdioRestartsAKilledServer,
// TestStdioKilledDuringACall, TestStdioCloseLeavesNoProcess, TestPoolHTTPRestart,
// TestPoolListChanged, TestPoolTimeout); these prove that they hold for a model's calls
// going through parser, executor (with its retries and redeliveries) and formatter.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/internal/mcptest"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// A stdio server killed mid-run (SIGKILL, while a call runs on it) is restarted: the
// call under way, which is read-only, is answered by the new process, and so are later
// calls. When the executor stops, no server process is left behind.
func TestMCPStdioServerKilledThroughPipeline(t *testing.T) {
	t.Parallel()
	everything := mcpNPMScript(t, mcpEverythingPkg)
	memory := mcpNPMScript(t, mcpMemoryPkg)
	marker := fmt.Sprintf("TOOLBUS_TEST_SERVER=%s", filepath.Base(t.TempDir()))
	key, value, _ := strings.Cut(marker, "=")
	cfg := mcpConfig(t, "{}")
	// Shared sessions: the server's own process is the one killed (a conversation's
	// own session dying is mcpwire's TestConversationSessionLost).
	cfg.MCPServers = map[string]mcpwire.ServerConfig{
		"everything": {Command: "node", Args: []string{everything, "stdio"}, Env: map[string]string{key: value}, Sessions: mcpwire.SessionsShared},
		"memory": {Command: "node", Args: []string{memory}, Env: map[string]string{
			key: value, "MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}, Sessions: mcpwire.SessionsShared},
	}
	p := startMCPPipeline(t, cfg, nil)

	r := p.ask(mcpCall{"everything__echo", map[string]any{"message": "first"}}, mcpCall{"read_graph", nil})
	mcpOK(t, r[0], `"Echo: first"`)
	mcpOK(t, r[1], `"entities"`)
	var kids []int
	mcpEventually(t, "both servers running", func() bool {
		kids = mcpChildren(t, marker)
		return len(kids) == 2
	})
	first := everythingPID(t, kids)

	// A call that takes a while is under way when the server dies.
	done := make(chan []messages.OutputResult, 1)
	go func() {
		done <- p.ask(mcpCall{"everything__trigger-long-running-operation", map[string]any{"duration": 1, "steps": 2}})
	}()
	time.Sleep(300 * time.Millisecond) // most likely running by now; either way it must succeed
	mcpSIGKILL(t, first)

	select {
	case r := <-done:
		mcpOK(t, r[0], "Long running operation completed")
	case <-time.After(90 * time.Second):
		t.Fatal("no answer to the call under way 90s after its server was killed")
	}
	r = p.ask(mcpCall{"everything__echo", map[string]any{"message": "after the kill"}}, mcpCall{"everything__get-sum", map[string]any{"a": 1, "b": 2}})
	mcpOK(t, r[0], `"Echo: after the kill"`)
	mcpOK(t, r[1], "3")
	mcpEventually(t, "a new everything process", func() bool {
		kids = mcpChildren(t, marker)
		return len(kids) == 2
	})
	if second := everythingPID(t, kids); second == first {
		t.Fatalf("pid %d still runs after SIGKILL", first)
	}

	// The executor stops: every server process goes with it.
	p.stop()
	if left := mcpChildren(t, marker); len(left) != 0 {
		t.Errorf("server processes %v left after the executor stopped", left)
	}
}

// everythingPID picks server-everything among this test's server processes.
func everythingPID(t *testing.T, pids []int) int {
	t.Helper()
	for _, pid := range pids {
		cmdline, _ := readProcFile(pid, "cmdline")
		if bytes.Contains(cmdline, []byte("server-everything")) {
			return pid
		}
	}
	t.Fatalf("no server-everything among %v", pids)
	return 0
}

// An HTTP server restarted mid-run (a new process on the same port, which knows nothing
// of the old session) is reconnected: the next call succeeds.
func TestMCPHTTPServerRestartedThroughPipeline(t *testing.T) {
	port := mcptest.FreePort(t)
	server, url := mcpStartEverything(t, "streamableHttp", port)
	// The server's shared session is the one restarted here (a conversation's own session
	// replaced is mcpwire's TestConversationSessionLost).
	cfg := mcpConfig(t, `{"mcpServers": {"remote": {"type": "http", "url": "`+url+`/mcp", "sessions": "shared"}}}`)
	p := startMCPPipeline(t, cfg, nil)

	r := p.ask(mcpCall{"remote__echo", map[string]any{"message": "before"}})
	mcpOK(t, r[0], `"Echo: before"`)

	mcpKill(server)
	mcpStartEverything(t, "streamableHttp", port)

	r = p.ask(mcpCall{"remote__echo", map[string]any{"message": "after"}}, mcpCall{"get-sum", map[string]any{"a": 2, "b": 2}})
	mcpOK(t, r[0], `"Echo: after"`)
	mcpOK(t, r[1], "4")
}

// A server that adds a tool and says so (notifications/tools/list_changed) has it
// callable at once, without a reconnect; a tool that hangs is answered with timeout
// after the server's timeout, and the session survives it.
func TestMCPListChangedAndTimeoutThroughPipeline(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "changing", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "hang", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			<-ctx.Done() // the client gave up
			return nil, ctx.Err()
		})
	var sessions atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				sessions.Add(1)
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	// One shared session, whose initializations are counted.
	cfg := mcpConfig(t, `{"mcpServers": {"changing": {"type": "http", "url": "`+ts.URL+`", "timeout": "1s", "sessions": "shared"}}}`)
	p := startMCPPipeline(t, cfg, nil)
	t.Cleanup(p.stop) // before ts.Close: the server waits for the pool's open stream

	r := p.ask(mcpCall{"hang", nil}, mcpCall{"late", nil})
	// hang has side effects (no annotations): past its budget it may still complete.
	mcpFailed(t, r[0], messages.CodeOutcomeUnknown)
	mcpFailed(t, r[1], messages.CodeUnknownTool)

	mcp.AddTool(srv, &mcp.Tool{Name: "late", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Who string `json:"who"`
		}) (*mcp.CallToolResult, map[string]string, error) {
			return nil, map[string]string{"greeting": "hello " + in.Who}, nil
		})
	var last messages.OutputResult
	mcpEventually(t, "the added tool callable", func() bool {
		last = p.ask(mcpCall{"late", map[string]any{"who": "model"}})[0]
		return last.Success
	})
	mcpOK(t, last, `"greeting":"hello model"`)
	if n := sessions.Load(); n != 1 {
		t.Errorf("%d sessions initialized, want 1: neither the change nor the timeout needs a reconnect", n)
	}
}

func readProcFile(pid int, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), name))
}
