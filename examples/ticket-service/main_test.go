package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/config"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

// TestThroughToolbus reaches the service the way toolbus does: the example's own
// configuration, loaded as toolbus loads it, and a pool of jsonrpc sessions.
func TestThroughToolbus(t *testing.T) {
	srv := httptest.NewServer(newService().Handler())
	t.Cleanup(srv.Close)
	cfg, err := config.Parse(mustRead(t, "toolbus.json"), "toolbus.json", func(k string) (string, bool) {
		if k == "TICKETS_URL" {
			return srv.URL + "/rpc", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]mcpwire.ServerConfig{"tickets": cfg.MCPServers["tickets"]} // not the npx one
	p, err := mcpwire.NewPool(servers, &mcpwire.Options{Routes: map[string]*string{
		"create_ticket": cfg.Routes["create_ticket"], "get_ticket_status": cfg.Routes["get_ticket_status"],
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tools := p.Tools(ctx)
	if len(tools) != 2 || tools[0].Name != "create_ticket" || tools[1].Name != "get_ticket_status" {
		t.Fatalf("tools = %+v, want the two routed tools under their bare names", tools)
	}
	if tools[0].Retryable() || !tools[1].ReadOnly {
		t.Errorf("annotations lost: %+v", tools)
	}

	out, err := p.Call(ctx, "create_ticket", json.RawMessage(`{"title":"printer on fire","priority":"high"}`))
	if err != nil {
		t.Fatal(err)
	}
	var created Ticket
	if err := json.Unmarshal(out, &created); err != nil || created.ID != "T-1" || created.Status != "open" {
		t.Fatalf("create_ticket = %s, %v", out, err)
	}

	tests := []struct {
		name    string
		tool    string
		args    string
		want    string
		wantErr func(*mcpwire.ToolError) bool
	}{
		{name: "status", tool: "get_ticket_status", args: `{"id":"T-1"}`, want: `{"id":"T-1","status":"open"}`},
		{name: "qualified name", tool: "tickets__get_ticket_status", args: `{"id":"T-1"}`, want: `{"id":"T-1","status":"open"}`},
		{name: "no such ticket", tool: "get_ticket_status", args: `{"id":"T-9"}`,
			wantErr: func(e *mcpwire.ToolError) bool { return e.Code == 0 && e.Message == "there is no ticket T-9" }},
		{name: "missing title", tool: "create_ticket", args: `{}`,
			wantErr: func(e *mcpwire.ToolError) bool { return e.InvalidArguments() && strings.Contains(e.Message, "title") }},
		{name: "bad priority", tool: "create_ticket", args: `{"title":"x","priority":"urgent"}`,
			wantErr: func(e *mcpwire.ToolError) bool { return e.InvalidArguments() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := p.Call(ctx, tt.tool, json.RawMessage(tt.args))
			if tt.wantErr != nil {
				var te *mcpwire.ToolError
				if !errors.As(err, &te) || !tt.wantErr(te) {
					t.Fatalf("err = %v (result %s), not the error wanted", err, out)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Fatalf("%s = %s, %v; want %s", tt.tool, out, err, tt.want)
			}
		})
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(".", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
