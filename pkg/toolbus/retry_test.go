package toolbus_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/client"
	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/toolbus"
)

// flakyMCP is a real MCP server over streamable HTTP whose first `fail` tools/call
// requests get 503 Service Unavailable, as from a proxy in front of a restarting server.
func flakyMCP(t *testing.T, fail int32) (url string, calls, ran *atomic.Int32) {
	t.Helper()
	calls, ran = new(atomic.Int32), new(atomic.Int32)
	srv := mcp.NewServer(&mcp.Implementation{Name: "orders", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "order_status", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			ID int `json:"id"`
		}) (*mcp.CallToolResult, map[string]any, error) {
			ran.Add(1)
			return nil, map[string]any{"id": in.ID, "status": "shipped"}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) && calls.Add(1) <= fail {
			http.Error(w, "upstream restarting", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, calls, ran
}

func pipelineWith(t *testing.T, cfgJSON string) *client.Client {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgJSON), "test.json", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	connect := startBus(t)
	ctx, cancel := context.WithCancel(context.Background())
	n, err := toolbus.Start(ctx, toolbus.Options{Provision: true, Conn: connect("node"), Config: cfg, Services: []string{toolbus.Parser, toolbus.Executor, toolbus.Formatter}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })
	c, err := client.New(connect("orchestrator"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMCPServerFailingThenRecovering(t *testing.T) {
	t.Parallel()
	url, calls, ran := flakyMCP(t, 2)
	c := pipelineWith(t, fmt.Sprintf(`{"mcpServers": {"orders": {"type": "http", "url": %q}}}`, url))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Ask(ctx, "retry", `<tool_call>{"name": "order_status", "arguments": {"id": 7}}</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Results[0]
	if !r.Success || !bytes.Contains(r.Result, []byte(`"shipped"`)) {
		t.Fatalf("want success after the server recovered, got %+v", r.Error)
	}
	if ran.Load() != 1 {
		t.Errorf("the tool ran %d times, want 1", ran.Load())
	}
	// Three attempts, one request each: two turned away, the third answered.
	if calls.Load() != 3 || r.Attempts != 3 {
		t.Errorf("%d tools/call requests, result says %d attempts; want 3 and 3", calls.Load(), r.Attempts)
	}
	t.Logf("answered after %d requests; result text:\n%s", calls.Load(), out.Text)
}

func TestMCPServerAlwaysDown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/mcp"
	l.Close() // nothing listens: connection refused, every time
	c := pipelineWith(t, fmt.Sprintf(`{"mcpServers": {"orders": {"type": "http", "url": %q}},
		"routes": {"order_status": "orders"}, "nats": {"max_deliver": 3}}`, url))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := c.Ask(ctx, "down", `<tool_call>{"name": "order_status", "arguments": {"id": 7}}</tool_call>`, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := out.Results[0]
	if r.Success || r.Error.Code != "server_unavailable" {
		t.Fatalf("want server_unavailable, got %+v", r)
	}
	// At most three deliveries (nats.max_deliver) of three attempts each; the executor's
	// circuit breaker opens after its failure threshold and answers the rest at once.
	if r.Attempts < 3 || r.Attempts > 9 {
		t.Errorf("result says %d attempts, want 3 to 9", r.Attempts)
	}
	t.Logf("answered server_unavailable after %v: %s", time.Since(start), r.Error.Message)
}
