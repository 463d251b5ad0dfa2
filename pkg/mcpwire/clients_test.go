package mcpwire_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// Entries as other MCP clients write them: Cursor's and Claude Code's url without a
// type, Cline's and Roo Code's "disabled".

// A url without a type is streamable HTTP, and HTTP+SSE when the server answers
// streamable HTTP's POST with a 4xx; an explicit "http" does not fall back.
func TestURLWithoutTypeFallsBackToSSE(t *testing.T) {
	srv := testServer()
	var posts, gets atomic.Int32
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.RawQuery == "" {
			posts.Add(1) // streamable HTTP's initialize: the SSE handler answers 400
		} else if r.Method == http.MethodGet {
			gets.Add(1)
		}
		sse.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	p := newPool(t, map[string]mcpwire.ServerConfig{
		"cursor": {URL: ts.URL},
		"typed":  {Type: "http", URL: ts.URL},
	}, nil)
	ctx := ctxT(t)
	out, err := p.Call(ctx, "cursor__greet", nil)
	if err != nil || string(out) != `"hello"` {
		t.Fatalf("greet over the fallback = %s, %v", out, err)
	}
	if posts.Load() == 0 || gets.Load() == 0 {
		t.Errorf("%d initialize POSTs, %d SSE GETs: want streamable HTTP tried, then SSE", posts.Load(), gets.Load())
	}
	if _, err := p.Call(ctx, "typed__greet", nil); err == nil {
		t.Error(`"type": "http" fell back to SSE`)
	}
}

// A disabled entry is not started and its tools are not offered, as with "enabled": false.
func TestDisabledServerIsLeftOut(t *testing.T) {
	var servers map[string]mcpwire.ServerConfig
	if err := json.Unmarshal([]byte(`{
		"on":  {"command": "in-memory"},
		"off": {"command": "/nonexistent/server", "disabled": true},
		"off2": {"command": "/nonexistent/server", "enabled": false}}`), &servers); err != nil {
		t.Fatal(err)
	}
	if servers["off"].IsEnabled() || servers["off2"].IsEnabled() || !servers["on"].IsEnabled() {
		t.Fatalf("enabled: on %v, off %v, off2 %v", servers["on"].IsEnabled(), servers["off"].IsEnabled(), servers["off2"].IsEnabled())
	}
	p := newPool(t, servers, &mcpwire.Options{Dial: inMemory(testServer())})
	ctx := ctxT(t)
	if err := p.Connect(ctx); err != nil {
		t.Fatalf("Connect: %v (a disabled server was started)", err)
	}
	tools := p.Tools(ctx)
	if len(tools) == 0 {
		t.Fatal("no tools")
	}
	for _, tool := range tools {
		if strings.HasPrefix(tool.Name, "off") {
			t.Errorf("a disabled server's tool %s is offered", tool.Name)
		}
	}
}
