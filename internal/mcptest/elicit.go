package mcptest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BookingServer serves, over streamable HTTP, an MCP server whose tool "book" asks the
// user for a seat in the middle of the call (elicitation) and returns the answer:
// {"action", "seat"}. It returns the server's URL; the server stops with the test.
func BookingServer(t testing.TB) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "booking", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "book"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, map[string]any, error) {
		r, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which seat?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"seat": map[string]any{"type": "string"}}, "required": []string{"seat"},
		}})
		if err != nil {
			return nil, nil, err
		}
		return nil, map[string]any{"action": r.Action, "seat": r.Content["seat"]}, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}
