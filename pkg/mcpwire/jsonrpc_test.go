package mcpwire_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// rpcHandler is a plain JSON-RPC service: tools/list in two pages (when list is set),
// and tools/call answering with whatever answer holds for the tool.
func rpcHandler(t *testing.T, list bool, answer map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name   string `json:"name"`
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			t.Errorf("bad request %s", r.Method)
			return
		}
		reply := func(field, value string) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"` + field + `":` + value + `}`))
		}
		switch {
		case req.Method == "tools/list" && !list:
			reply("error", `{"code":-32601,"message":"no such method"}`)
		case req.Method == "tools/list" && req.Params.Cursor == "":
			reply("result", `{"tools":[{"name":"scalar","inputSchema":{"type":"object"}}],"nextCursor":"2"}`)
		case req.Method == "tools/list":
			reply("result", `{"tools":[{"name":"mcp_shaped","inputSchema":{"type":"object"}},{"name":"bad","inputSchema":{"type":"object"}}]}`)
		case req.Method == "tools/call":
			a, ok := answer[req.Params.Name]
			if !ok {
				reply("error", `{"code":-32602,"message":"unknown tool"}`)
				return
			}
			switch a {
			case "503":
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			case "500":
				http.Error(w, "crashed", http.StatusInternalServerError)
				return
			case "wrong id":
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"jsonrpc":"2.0","id":999999,"result":"someone else's"}`))
				return
			}
			reply("result", a)
		}
	})
}

func TestJSONRPC(t *testing.T) {
	srv := httptest.NewServer(rpcHandler(t, true, map[string]string{
		"scalar":     `42`,
		"mcp_shaped": `{"content":[{"type":"text","text":"{\"a\":1}"}]}`,
		"bad":        `{"isError":true,"content":[{"type":"text","text":"nope"}]}`,
	}))
	t.Cleanup(srv.Close)
	p := newPool(t, map[string]mcpwire.ServerConfig{"rpc": {Type: "jsonrpc", URL: srv.URL}}, nil)
	ctx := ctxT(t)
	if got := len(p.Tools(ctx)); got != 3 {
		t.Fatalf("%d tools, want 3 from two pages", got)
	}
	tests := []struct {
		name    string
		tool    string
		want    string
		wantErr func(error) bool
	}{
		{name: "any JSON result", tool: "scalar", want: `42`},
		{name: "MCP result", tool: "mcp_shaped", want: `{"a":1}`},
		{name: "isError", tool: "bad", wantErr: func(err error) bool {
			var te *mcpwire.ToolError
			return errors.As(err, &te) && te.Message == "nope"
		}},
		{name: "unknown to the catalog", tool: "rpc__missing", wantErr: func(err error) bool { return errors.Is(err, mcpwire.ErrUnknownTool) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := p.Call(ctx, tt.tool, nil)
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("err = %v, not the error wanted", err)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Fatalf("%s = %s, %v; want %s", tt.tool, out, err, tt.want)
			}
		})
	}
}

func TestJSONRPCWithoutToolsList(t *testing.T) {
	var calls atomic.Int32
	h := rpcHandler(t, false, map[string]string{"legacy": `"done"`, "busy": "503", "crashing": "500", "mixed": "wrong id"})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	server := "rpc"
	p := newPool(t, map[string]mcpwire.ServerConfig{"rpc": {Type: "jsonrpc", URL: srv.URL}},
		&mcpwire.Options{Routes: map[string]*string{"legacy": &server, "busy": &server, "crashing": &server, "mixed": &server}})
	ctx := ctxT(t)
	if err := p.Connect(ctx); err != nil {
		t.Fatalf("a service without tools/list is still up: %v", err)
	}
	if out, err := p.Call(ctx, "legacy", nil); err != nil || string(out) != `"done"` {
		t.Fatalf("routed call = %s, %v", out, err)
	}
	if _, err := p.Call(ctx, "busy", nil); !errors.Is(err, mcpwire.ErrUnavailable) {
		t.Fatalf("503: err = %v, want ErrUnavailable", err)
	}
	// A 500 is the server failing while the request may have run: transient, like a
	// connection lost during the call (retried if safe, outcome_unknown if not).
	if _, err := p.Call(ctx, "crashing", nil); !errors.Is(err, mcpwire.ErrConnectionLost) {
		t.Fatalf("500: err = %v, want ErrConnectionLost", err)
	}
	// A reply to another request is never taken for this call's result.
	if out, err := p.Call(ctx, "mixed", nil); err == nil || !strings.Contains(err.Error(), "id") {
		t.Fatalf("a reply with another id: %s, %v; want an error", out, err)
	}
}
