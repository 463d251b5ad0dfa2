package mcpwire_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/toolbus/toolbus/pkg/dialect"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/mcpwire"
)

func Example() {
	// An MCP server; normally a configured command or URL, here one in this process.
	srv := mcp.NewServer(&mcp.Implementation{Name: "tickets"}, nil)
	type statusIn struct {
		ID string `json:"id"`
	}
	type statusOut struct {
		Status string `json:"status"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "get_ticket_status", Description: "The status of a ticket.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in statusIn) (*mcp.CallToolResult, statusOut, error) {
			return nil, statusOut{Status: "open"}, nil
		})

	var servers map[string]mcpwire.ServerConfig
	if err := json.Unmarshal([]byte(`{"tickets": {"command": "ticket-server", "timeout": "10s"}}`), &servers); err != nil {
		log.Fatal(err)
	}
	pool, err := mcpwire.NewPool(servers, &mcpwire.Options{
		Dial: func(ctx context.Context, _ string) (mcp.Transport, error) {
			client, server := mcp.NewInMemoryTransports()
			_, err := srv.Connect(ctx, server, nil)
			return client, err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	ctx := context.Background()
	for _, t := range pool.Tools(ctx) {
		fmt.Println(t.Name, "read-only:", t.ReadOnly)
	}
	out, err := pool.Call(ctx, "get_ticket_status", json.RawMessage(`{"id":"T-1"}`))
	fmt.Println(string(out), err)

	decls, _ := dialect.Declarations(dialect.Anthropic, pool.Tools(ctx))
	fmt.Println(string(decls))
	// Output:
	// tickets__get_ticket_status read-only: true
	// {"status":"open"} <nil>
	// [{"name":"tickets__get_ticket_status","description":"The status of a ticket.","input_schema":{"additionalProperties":false,"properties":{"id":{"type":"string"}},"required":["id"],"type":"object"}}]
}

// A server's resources are read through a tool the pool makes for it.
func Example_resources() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs"}, nil)
	srv.AddResource(&mcp.Resource{URI: "docs://readme", Name: "readme", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "docs://readme", Text: "Read me first."}}}, nil
		})
	pool, err := mcpwire.NewPool(map[string]mcpwire.ServerConfig{"docs": {Command: "docs-server"}}, &mcpwire.Options{
		Dial: func(ctx context.Context, _ string) (mcp.Transport, error) {
			client, server := mcp.NewInMemoryTransports()
			_, err := srv.Connect(ctx, server, nil)
			return client, err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	ctx := context.Background()
	for _, t := range pool.Tools(ctx) {
		fmt.Println(t.Name, "remote:", t.Remote)
	}
	out, err := pool.Call(ctx, "docs__resources_read", json.RawMessage(`{"uri":"docs://readme"}`))
	fmt.Println(string(out), err)
	// Output:
	// docs__resources_list remote: resources:list
	// docs__resources_read remote: resources:read
	// "Read me first." <nil>
}
