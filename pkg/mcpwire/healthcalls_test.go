package mcpwire_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// Health follows the calls: a server whose calls since the last check were turned away
// or met a broken connection, none answered, fails the check though tools/list on its session still
// works; once a call is answered, or no call failed since, the check is the probe's.
func TestCheckFollowsTheCalls(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "flaky"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "work"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var breakCalls atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && breakCalls.Load() {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				// A proxy in front of a server that restarts: the session stands, its
				// calls are turned away.
				http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	var cfg map[string]mcpwire.ServerConfig
	if err := json.Unmarshal([]byte(fmt.Sprintf(`{"flaky": {"type": "http", "url": %q, "retry": {"maxAttempts": 1}}}`, ts.URL)), &cfg); err != nil {
		t.Fatal(err)
	}
	pool, err := mcpwire.NewPool(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tool, err := pool.Lookup(ctx, "work")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.CallTool(ctx, tool, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	breakCalls.Store(true)
	if _, err := pool.CallTool(ctx, tool, json.RawMessage(`{}`)); err == nil {
		t.Fatal("a call whose connection broke succeeded")
	}
	// The failed call dropped the session; the pool opens a new one, on which
	// tools/list works: a probe alone would say up.
	for {
		if r, _ := pool.Check(ctx, "flaky", time.Now()); r.Err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no new session")
		case <-time.After(50 * time.Millisecond):
		}
	}
	r, live := pool.Check(ctx, "flaky", since)
	if live != mcpwire.Checked || r.Err == nil || !strings.Contains(r.Err.Error(), "not answered") {
		t.Fatalf("check after a failed call, on a new session: %+v, %v; want it failed by the call", r, live)
	}
	breakCalls.Store(false)
	since = time.Now()
	if _, err := pool.CallTool(ctx, tool, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if r, _ := pool.Check(ctx, "flaky", since); r.Err != nil {
		t.Fatalf("check after an answered call: %v", r.Err)
	}
}
