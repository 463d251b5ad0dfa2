package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/executor"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// mcpTestServer has a tool for every way a call can fail; cut breaks the connection
// of a session.
func mcpTestServer(cut func(*mcp.ServerSession)) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test"}, nil)
	obj := map[string]any{"type": "object"}
	add := func(name string, ann *mcp.ToolAnnotations, h mcp.ToolHandler) {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: obj, Annotations: ann}, h)
	}
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	add("ok", readOnly, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{StructuredContent: map[string]bool{"ok": true}}, nil
	})
	add("fail", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("the printer is on fire")
	})
	add("picky", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "want a ticket id"}
	})
	add("hang", readOnly, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	// The server goes away in the middle of the call: did it run? Nobody knows.
	drop := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cut(req.Session)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	add("drop", nil, drop)
	add("drop_read_only", readOnly, drop)
	return s
}

func newMCPPool(t *testing.T, servers map[string]mcpwire.ServerConfig) *mcpwire.Pool {
	t.Helper()
	var conns sync.Map // *mcp.ServerSession → the server's end of its connection
	srv := mcpTestServer(func(ss *mcp.ServerSession) {
		if c, ok := conns.Load(ss); ok {
			c.(net.Conn).Close()
		}
	})
	p, err := mcpwire.NewPool(servers, &mcpwire.Options{
		Dial: func(ctx context.Context, name string) (mcp.Transport, error) {
			if servers[name].Command != "in-memory" {
				return nil, nil // from the configuration
			}
			c, s := net.Pipe()
			ss, err := srv.Connect(ctx, &mcp.IOTransport{Reader: s, Writer: s}, nil)
			conns.Store(ss, s)
			return &mcp.IOTransport{Reader: c, Writer: c}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func TestMCPBackendErrors(t *testing.T) {
	p := newMCPPool(t, map[string]mcpwire.ServerConfig{
		"a":    {Command: "in-memory", Timeout: messages.Duration(300 * time.Millisecond), BlockedTools: []string{"picky"}},
		"b":    {Command: "in-memory"},
		"down": {Type: "http", URL: "http://127.0.0.1:" + closedPort(t) + "/mcp"},
	})
	router := executor.NewRouter(executor.MCPBackend{Pool: p})
	tests := []struct {
		name        string
		tool        string
		wantBackend string
		wantErr     messages.ErrorCode
	}{
		{name: "success", tool: "a__ok", wantBackend: "mcp:a"},
		{name: "isError", tool: "a__fail", wantBackend: "mcp:a", wantErr: messages.CodeToolError},
		{name: "invalid params", tool: "picky", wantBackend: "mcp:b", wantErr: messages.CodeInvalidArguments},
		{name: "blocked", tool: "a__picky", wantBackend: "mcp:a", wantErr: messages.CodeNotAllowed},
		{name: "hangs", tool: "a__hang", wantBackend: "mcp:a", wantErr: messages.CodeTimeout},
		{name: "ambiguous bare name", tool: "ok", wantBackend: "mcp:a", wantErr: messages.CodeUnknownTool},
		{name: "cannot connect", tool: "down__anything", wantBackend: "mcp:down", wantErr: messages.CodeServerUnavailable},
		{name: "lost during a call with side effects", tool: "b__drop", wantBackend: "mcp:b", wantErr: messages.CodeOutcomeUnknown},
		{name: "lost during a read-only call", tool: "b__drop_read_only", wantBackend: "mcp:b", wantErr: messages.CodeServerUnavailable},
		{name: "unknown", tool: "nope", wantErr: messages.CodeUnknownTool},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := router.Resolve(ctx, tt.tool)
			if r.Server != tt.wantBackend {
				t.Fatalf("backend = %q, want %q", r.Server, tt.wantBackend)
			}
			var out json.RawMessage
			if err == nil {
				// The route's failures are the pool's errors; the executor classifies them.
				if out, err = r.Call(ctx, "c1", json.RawMessage(`{}`)); err != nil {
					err = executor.Classify(err, executor.Failed{Name: tt.tool, Route: r})
				}
			}
			if tt.wantErr == "" {
				if err != nil || string(out) != `{"ok":true}` {
					t.Fatalf("Call = %s, %v", out, err)
				}
				return
			}
			var te *messages.ToolError
			if !errors.As(err, &te) || te.Code != tt.wantErr {
				t.Fatalf("err = %v, want %s", err, tt.wantErr)
			}
			if ctx.Err() != nil {
				t.Fatal("the call ended with the test's deadline, not by itself")
			}
			if te.Message == "" {
				t.Error("no message for the model")
			}
		})
	}
}

func TestMCPBackendTools(t *testing.T) {
	p := newMCPPool(t, map[string]mcpwire.ServerConfig{"a": {Command: "in-memory", AllowedTools: []string{"ok", "fail"}}})
	backend := executor.MCPBackend{Pool: p}
	tools := backend.Tools(context.Background())
	if len(tools) != 2 || tools[0].Name != "a__fail" || tools[1].Name != "a__ok" {
		t.Fatalf("tools = %+v", tools)
	}
	if !tools[1].ReadOnly || !tools[1].Idempotent || tools[0].ReadOnly || len(tools[1].InputSchema) == 0 {
		t.Errorf("annotations or schema lost: %+v", tools)
	}
	// Through the executor, as the stage runs it.
	exec := &executor.Executor{Router: executor.NewRouter(backend)}
	res, _ := exec.Execute(context.Background(), messages.ToolCall{Tool: "ok", Arguments: json.RawMessage(`{}`)})
	if !res.Success || string(res.Result) != `{"ok":true}` || res.Backend != "mcp:a" {
		t.Errorf("result = %+v", res)
	}
}

// localOK is a backend of its own that also has a tool called "ok".
type localOK struct{}

func (localOK) Tools(context.Context) []messages.ToolInfo { return []messages.ToolInfo{{Name: "ok"}} }
func (localOK) Name() string                              { return "local" }

func (localOK) Resolve(_ context.Context, name string) (executor.Route, bool, error) {
	return executor.Route{Server: "local", Info: messages.ToolInfo{Name: name}}, name == "ok", nil
}

func TestMCPRoutesWin(t *testing.T) {
	b := "b"
	srv := mcpTestServer(func(*mcp.ServerSession) {})
	p, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{"a": {Command: "in-memory"}, "b": {Command: "in-memory"}},
		&mcpwire.Options{
			Routes: map[string]*string{"ok": &b, "fail": nil},
			Dial: func(ctx context.Context, _ string) (mcp.Transport, error) {
				ct, st := mcp.NewInMemoryTransports()
				_, err := srv.Connect(ctx, st, nil)
				return ct, err
			},
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	router := executor.NewRouter(executor.MCPBackend{Pool: p, RoutedOnly: true}, localOK{}, executor.MCPBackend{Pool: p})

	tests := []struct {
		name, tool, wantBackend string
		wantErr                 bool
	}{
		{name: "route wins over a local tool of the same name", tool: "ok", wantBackend: "mcp:b"},
		{name: "qualified names still reach the other server", tool: "a__ok", wantBackend: "mcp:a"},
		{name: "routed to local, which has none", tool: "fail", wantErr: true},
		{name: "unrouted names go by the catalog", tool: "a__fail", wantBackend: "mcp:a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := router.Resolve(context.Background(), tt.tool)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("routed to %s, want no backend", got.Server)
				}
				return
			}
			if err != nil || got.Server != tt.wantBackend {
				t.Fatalf("Route = %v, %v; want %s", got, err, tt.wantBackend)
			}
		})
	}
}
