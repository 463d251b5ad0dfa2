package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The breaker as a state machine, on a clock of its own.
func TestBreaker(t *testing.T) {
	const s = time.Second
	type step struct {
		at time.Duration
		// do is "allow", or a report: "ok", "server_unavailable", "timeout",
		// "tool_error", or "final" (a server_unavailable that is final at once).
		do      string
		backend string // default "mcp:tickets"
		wantErr bool   // of "allow"
	}
	fail5 := []step{{do: "server_unavailable"}, {do: "timeout"}, {do: "server_unavailable"}, {do: "outcome_unknown"}, {do: "server_unavailable"}}
	with := func(steps ...step) []step { return append(slices.Clone(fail5), steps...) }
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "unknown server allowed", steps: []step{{do: "allow"}}},
		{name: "in-process backends always allowed", steps: []step{
			{do: "server_unavailable", backend: "local"}, {do: "server_unavailable", backend: "local"}, {do: "server_unavailable", backend: "local"},
			{do: "server_unavailable", backend: "local"}, {do: "server_unavailable", backend: "local"},
			{do: "allow", backend: "local"}, {do: "allow", backend: "engineering"},
		}},
		{name: "four failures: still allowed", steps: []step{
			{do: "server_unavailable"}, {do: "timeout"}, {do: "server_unavailable"}, {do: "server_unavailable"}, {do: "allow"},
		}},
		{name: "five consecutive failures open it", steps: with(step{at: s, do: "allow", wantErr: true})},
		{name: "another server unaffected", steps: with(step{do: "allow", backend: "mcp:other"})},
		{name: "one trial after the cool-down, success closes", steps: with(
			step{at: 4 * s, do: "allow", wantErr: true},
			step{at: 5 * s, do: "allow"},                                     // the trial
			step{at: 5*s + 100*time.Millisecond, do: "allow", wantErr: true}, // one at a time
			step{at: 6 * s, do: "ok"},
			step{at: 6 * s, do: "allow"}, step{at: 6 * s, do: "allow"},
		)},
		{name: "a tool's own error closes too", steps: with(
			step{at: 5 * s, do: "allow"}, step{at: 5 * s, do: "tool_error"}, step{at: 5 * s, do: "allow"},
		)},
		{name: "failed trial: another cool-down", steps: with(
			step{at: 5 * s, do: "allow"}, step{at: 6 * s, do: "server_unavailable"},
			step{at: 10 * s, do: "allow", wantErr: true}, step{at: 11 * s, do: "allow"},
		)},
		{name: "an answer resets the count", steps: []step{
			{do: "server_unavailable"}, {do: "server_unavailable"}, {do: "server_unavailable"}, {do: "server_unavailable"},
			{do: "tool_error"}, {do: "server_unavailable"}, {do: "allow"},
		}},
		{name: "final failures count for nothing", steps: []step{
			{do: "final"}, {do: "final"}, {do: "final"}, {do: "final"}, {do: "final"}, {do: "final"}, {do: "allow"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
			now := start
			b := executor.NewBreaker(&executor.BreakerOptions{Now: func() time.Time { return now }})
			for i, st := range tt.steps {
				now = start.Add(st.at)
				backend := st.backend
				if backend == "" {
					backend = "mcp:tickets"
				}
				switch st.do {
				case "allow":
					err := b.Allow(backend)
					if (err != nil) != st.wantErr {
						t.Fatalf("step %d (%+v): Allow = %v, wantErr %v", i, st, err, st.wantErr)
					}
					var te *messages.ToolError
					if err != nil && (!errors.As(err, &te) || te.Code != messages.CodeServerUnavailable || !te.Unsent) {
						t.Fatalf("step %d: refusal %#v, want an unsent server_unavailable", i, err)
					}
					if err != nil && strings.Contains(err.Error(), "tried again in") {
						t.Errorf("step %d: the refusal promises a retry nothing makes: %v", i, err)
					}
				case "ok":
					b.Report(backend, nil)
				case "final":
					b.Report(backend, &messages.ToolError{Code: messages.CodeServerUnavailable, Message: "x", Unsent: true, Final: true})
				default:
					b.Report(backend, &messages.ToolError{Code: messages.ErrorCode(st.do), Message: "x"})
				}
			}
		})
	}
}

// gateServer is a streamable HTTP MCP server with a read-only tool "lookup"; calls
// counts the tools/call requests that reach it, and hang makes it stop answering.
type gateServer struct {
	*httptest.Server
	calls   atomic.Int64
	hang    atomic.Bool
	release chan struct{}
}

func newGateServer(t *testing.T) *gateServer {
	srv := mcp.NewServer(&mcp.Implementation{Name: "tickets"}, nil)
	srv.AddTool(&mcp.Tool{Name: "lookup", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]string{"ticket": "T-1"}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	g := &gateServer{release: make(chan struct{})}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			g.calls.Add(1)
		}
		if g.hang.Load() {
			select {
			case <-r.Context().Done():
			case <-g.release:
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(g.release)
		g.CloseClientConnections()
		g.Close()
	})
	return g
}

// The executor's breaker opens on its own calls' failures: a server that stops
// answering is refused at once, without being tried, after the threshold; one trial
// goes through after the cool-down, and its success closes the circuit. healthd's
// statuses play no part: a server whose calls succeed is never refused.
func TestGateOpensOnCallFailures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	tickets := newGateServer(t)
	servers := map[string]mcpwire.ServerConfig{"tickets": {Type: "http", URL: tickets.URL}}
	pool, err := mcpwire.NewPool(servers, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })

	const coolDown = 2 * time.Second
	gate := executor.NewBreaker(&executor.BreakerOptions{CoolDown: coolDown, FailureThreshold: 2})
	exec := &executor.Executor{
		Router:  executor.NewRouter(executor.MCPBackend{Pool: pool}),
		Timeout: 5 * time.Second,
		Retry:   executor.RetryPolicy{MaxAttempts: 1},
		Gate:    gate,
	}
	call := func(id string, timeout time.Duration) (messages.ToolResult, time.Duration) {
		start := time.Now()
		c := messages.ToolCall{ID: id, Tool: "lookup", Arguments: json.RawMessage(`{}`)}
		if timeout > 0 {
			c.Deadline = start.Add(timeout)
		}
		res, _ := exec.Execute(ctx, c)
		return res, time.Since(start)
	}
	if res, _ := call("c1", 0); !res.Success {
		t.Fatalf("first call: %+v", res.Error)
	}

	// The server hangs: two calls run out of time, and the circuit opens.
	tickets.hang.Store(true)
	for _, id := range []string{"c2", "c3"} {
		if res, _ := call(id, 300*time.Millisecond); res.Success || res.Error.Code != messages.CodeTimeout {
			t.Fatalf("%s to a hanging server: %+v", id, res)
		}
	}
	openedAt := time.Now()
	before := tickets.calls.Load()
	res, took := call("c4", 0)
	t.Logf("refused in %v (attempts %d): %s", took, res.Attempts, res.Error.Message)
	if res.Success || res.Error.Code != messages.CodeServerUnavailable {
		t.Fatalf("call to a failing server: %+v", res)
	}
	if res.Attempts != 1 || tickets.calls.Load() != before {
		t.Errorf("attempts %d, %d requests reached the server: want the call refused before any attempt", res.Attempts, tickets.calls.Load()-before)
	}
	if took >= exec.Timeout {
		t.Errorf("refused after %v: the call waited for the server", took)
	}
	if strings.Contains(res.Error.Message, "tried again in") || !strings.Contains(res.Error.Message, "will not be retried") {
		t.Errorf("the refusal must not promise a retry: %s", res.Error.Message)
	}

	// The server recovers; after the cool-down one trial goes through and closes it.
	tickets.hang.Store(false)
	time.Sleep(time.Until(openedAt.Add(coolDown)))
	if res, _ := call("c5", 0); !res.Success {
		t.Fatalf("the trial after the cool-down: %+v", res.Error)
	}
	if res, _ := call("c6", 0); !res.Success {
		t.Errorf("after a successful trial: %+v", res.Error)
	}
	if open := gate.Open()["tickets"]; open {
		t.Error("the circuit is still open after a successful trial")
	}
}

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
