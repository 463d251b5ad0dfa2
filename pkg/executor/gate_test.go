package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/bus/bustest"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/healthd"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// The breaker as a state machine, on a clock of its own.
func TestBreaker(t *testing.T) {
	const s = time.Second
	type step struct {
		at time.Duration
		// do is "down" or "up" (a status from healthd, of a probe age ago), "allow", or
		// a report: "ok", "server_unavailable", "timeout", "tool_error".
		do      string
		age     time.Duration
		backend string // default "mcp:tickets"
		wantErr bool   // of "allow"
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "unknown server allowed", steps: []step{{do: "allow"}}},
		{name: "in-process backends always allowed", steps: []step{
			{do: "down", backend: "mcp:local"}, {do: "allow", backend: "local"}, {do: "allow", backend: "engineering"},
		}},
		{name: "marked down: refused", steps: []step{{do: "down"}, {at: s, do: "allow", wantErr: true}}},
		{name: "another server unaffected", steps: []step{{do: "down"}, {do: "allow", backend: "mcp:other"}}},
		{name: "down then up: allowed", steps: []step{{do: "down"}, {at: s, do: "up"}, {at: s, do: "allow"}}},
		{name: "stale down status ignored", steps: []step{{at: 2 * time.Minute, do: "down", age: 2 * time.Minute}, {at: 2 * time.Minute, do: "allow"}}},
		{name: "one trial after the cool-down, success closes", steps: []step{
			{do: "down"}, {at: 4 * s, do: "allow", wantErr: true},
			{at: 5 * s, do: "allow"},                                     // the trial
			{at: 5*s + 100*time.Millisecond, do: "allow", wantErr: true}, // one at a time
			{at: 6 * s, do: "ok"},
			{at: 6 * s, do: "allow"}, {at: 6 * s, do: "allow"},
		}},
		{name: "a tool's own error closes too", steps: []step{
			{do: "down"}, {at: 5 * s, do: "allow"}, {at: 5 * s, do: "tool_error"}, {at: 5 * s, do: "allow"},
		}},
		{name: "failed trial: another cool-down", steps: []step{
			{do: "down"}, {at: 5 * s, do: "allow"}, {at: 6 * s, do: "server_unavailable"},
			{at: 10 * s, do: "allow", wantErr: true}, {at: 11 * s, do: "allow"},
		}},
		{name: "a newer down status opens it again", steps: []step{
			{do: "down"}, {at: 5 * s, do: "allow"}, {at: 5 * s, do: "ok"},
			{at: 6 * s, do: "down", age: 6 * s}, {at: 6 * s, do: "allow"}, // the same probe again: still overruled
			{at: 7 * s, do: "down"}, {at: 7 * s, do: "allow", wantErr: true},
		}},
		{name: "consecutive failures open it without healthd", steps: []step{
			{do: "server_unavailable"}, {do: "timeout"}, {do: "server_unavailable"}, {do: "server_unavailable"},
			{do: "allow"}, {do: "server_unavailable"},
			{at: s, do: "allow", wantErr: true}, {at: 5 * s, do: "allow"},
		}},
		{name: "an answer resets the count", steps: []step{
			{do: "server_unavailable"}, {do: "server_unavailable"}, {do: "server_unavailable"}, {do: "server_unavailable"},
			{do: "tool_error"}, {do: "server_unavailable"}, {do: "allow"},
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
				server, _ := strings.CutPrefix(backend, "mcp:")
				checked := now.Add(-st.age)
				switch st.do {
				case "down", "up":
					b.SetHealth(messages.HealthStatus{Server: server, State: messages.HealthState(st.do), Failures: 3, CheckedAt: checked})
				case "allow":
					err := b.Allow(backend)
					if (err != nil) != st.wantErr {
						t.Fatalf("step %d (%+v): Allow = %v, wantErr %v", i, st, err, st.wantErr)
					}
					var te *messages.ToolError
					if err != nil && (!errors.As(err, &te) || te.Code != messages.CodeServerUnavailable || !te.Unsent) {
						t.Fatalf("step %d: refusal %#v, want an unsent server_unavailable", i, err)
					}
				case "ok":
					b.Report(backend, nil)
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

// The executor fails a call to a server healthd marks down at once, without trying it,
// and lets one trial through after the cool-down.
func TestGateWithHealthd(t *testing.T) {
	nc, js := bustest.Provisioned(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	tickets := newGateServer(t)
	servers := map[string]mcpwire.ServerConfig{"tickets": {Type: "http", URL: tickets.URL}}
	pool, err := mcpwire.NewPool(servers, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })

	// healthd, fast; its probe's timeout long enough that a busy machine does not fail
	// the probes of the answering server.
	h, err := healthd.New(ctx, nc, js, &config.Config{MCPServers: servers}, &healthd.Options{
		Interval: 100 * time.Millisecond, Timeout: time.Second, Threshold: 2, LeaseTTL: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	hctx, stopHealthd := context.WithCancel(ctx)
	healthdDone := make(chan struct{})
	go func() { defer close(healthdDone); _ = h.Run(hctx) }()

	// The executor, its gate fed by the health bucket.
	const coolDown = 2 * time.Second
	gate := executor.NewBreaker(&executor.BreakerOptions{CoolDown: coolDown})
	kv, err := js.KeyValue(ctx, messages.BucketHealth)
	if err != nil {
		t.Fatal(err)
	}
	if err := executor.WatchHealth(ctx, kv, gate); err != nil {
		t.Fatal(err)
	}
	exec := &executor.Executor{
		Router:  executor.NewRouter(executor.MCPBackend{Pool: pool}),
		Timeout: 5 * time.Second,
		Retry:   executor.RetryPolicy{MaxAttempts: 3, InitialInterval: 50 * time.Millisecond},
		Gate:    gate,
	}
	call := func(id string) (messages.ToolResult, time.Duration) {
		start := time.Now()
		res, _ := exec.Execute(ctx, messages.ToolCall{ID: id, Tool: "lookup", Arguments: json.RawMessage(`{}`)})
		return res, time.Since(start)
	}
	healthIs := func(want messages.HealthState) func() bool {
		return func() bool { st, _ := gate.Health("tickets"); return st.State == want }
	}

	waitUntil(t, 30*time.Second, "up", healthIs(messages.HealthUp))
	if res, _ := call("c1"); !res.Success {
		t.Fatalf("first call: %+v", res.Error)
	}

	// The server hangs; healthd marks it down; the executor learns it from the watch.
	tickets.hang.Store(true)
	waitUntil(t, 30*time.Second, "down", healthIs(messages.HealthDown))
	downAt := time.Now()
	before := tickets.calls.Load()
	res, took := call("c2")
	t.Logf("refused in %v (attempts %d): %s", took, res.Attempts, res.Error.Message)
	if res.Success || res.Error.Code != messages.CodeServerUnavailable {
		t.Fatalf("call to a server marked down: %+v", res)
	}
	if res.Attempts != 1 || tickets.calls.Load() != before {
		t.Errorf("attempts %d, %d requests reached the server: want the call refused before any attempt", res.Attempts, tickets.calls.Load()-before)
	}
	if took >= exec.Timeout {
		t.Errorf("refused after %v: the call waited for the server", took)
	}

	// healthd stops (the status stays "down", and fresh) and the server recovers.
	stopHealthd()
	<-healthdDone
	tickets.hang.Store(false)
	if time.Since(downAt) < coolDown/2 {
		if res, _ := call("c3"); res.Success || tickets.calls.Load() != before {
			t.Errorf("a call within the cool-down got through: %+v", res)
		}
	}

	// After the cool-down one trial goes through; its success closes the circuit,
	// although healthd still says down.
	time.Sleep(time.Until(downAt.Add(coolDown)))
	res, took = call("c4")
	if !res.Success {
		t.Fatalf("the trial after the cool-down: %+v", res.Error)
	}
	t.Logf("trial call answered in %v", took)
	if res, _ := call("c5"); !res.Success {
		t.Errorf("after a successful trial: %+v", res.Error)
	}
	if st, _ := gate.Health("tickets"); st.State != messages.HealthDown {
		t.Errorf("healthd's status changed meanwhile: %+v", st)
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
