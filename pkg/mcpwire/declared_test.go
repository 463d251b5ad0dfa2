package mcpwire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// A server whose configuration declares its tools is never asked for them: not when the
// pool connects, not when health checks its live session (Pool.Check) or probes it
// with a session of its own (Probe) — those ping it instead. Every request it receives
// is recorded, over streamable HTTP and SSE.
func TestDeclaredToolsAreNeverListed(t *testing.T) {
	for _, transport := range []string{"http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			var mu sync.Mutex
			var methods []string
			srv := mcp.NewServer(&mcp.Implementation{Name: "declared"}, nil)
			mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
				Text string `json:"text"`
			}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
			})
			srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
				return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
					mu.Lock()
					methods = append(methods, method)
					mu.Unlock()
					return next(ctx, method, req)
				}
			})
			var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			if transport == "sse" {
				h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			}
			ts := httptest.NewServer(h)
			defer ts.Close()
			var cfg map[string]mcpwire.ServerConfig
			if err := json.Unmarshal([]byte(fmt.Sprintf(`{"declared": {"type": %q, "url": %q,
				"tools": [{"name": "echo", "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}}`, transport, ts.URL)), &cfg); err != nil {
				t.Fatal(err)
			}
			pool, err := mcpwire.NewPool(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tool, err := pool.Lookup(ctx, "echo")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pool.CallTool(ctx, tool, json.RawMessage(`{"text": "hi"}`)); err != nil {
				t.Fatal(err)
			}
			r, live := pool.Check(ctx, "declared", time.Now())
			if live != mcpwire.Checked || r.Err != nil || r.Tools != 1 {
				t.Fatalf("check: %+v, %v", r, live)
			}
			if p := mcpwire.Probe(ctx, "declared", cfg["declared"], nil); p.Err != nil || p.Tools != 1 {
				t.Fatalf("probe: %+v", p)
			}
			mu.Lock()
			defer mu.Unlock()
			if slices.Contains(methods, "tools/list") {
				t.Errorf("the server was asked for its tools: %v", methods)
			}
			if pings := countOf(methods, "ping"); pings != 2 {
				t.Errorf("%d pings, want 2 (the check's and the probe's): %v", pings, methods)
			}
		})
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}
