package mcpwire

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolbus's own tools/call on a streamable HTTP session answers the server's
// elicitation requests itself (peer.answer), not through the go-sdk's client: it checks
// them as the SDK does — an accepted answer the requested schema refuses is an invalid
// params error to the server, never passed on; a matching one gets the schema's
// defaults; a form with a URL, a URL request with a schema, a schema that is not an
// object's are refused before anyone is asked.
func TestDirectElicitationChecked(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"seat": map[string]any{"type": "string"}, "meal": map[string]any{"type": "string", "default": "veg"}}}
	tests := []struct {
		name    string
		params  mcp.ElicitParams
		answer  map[string]any
		refused bool
		want    string // the content passed on, when not refused
	}{
		{"an answer the schema refuses", mcp.ElicitParams{Message: "seat?", RequestedSchema: schema}, map[string]any{"seat": 42}, true, ""},
		{"a matching answer, defaults applied", mcp.ElicitParams{Message: "seat?", RequestedSchema: schema}, map[string]any{"seat": "12A"}, false, `{"meal":"veg","seat":"12A"}`},
		{"a form with a URL", mcp.ElicitParams{Message: "seat?", RequestedSchema: schema, URL: "https://x.example"}, map[string]any{"seat": "12A"}, true, ""},
		{"a URL request with a schema", mcp.ElicitParams{Mode: "url", Message: "go", URL: "https://x.example", RequestedSchema: schema}, nil, true, ""},
		{"a schema not an object's", mcp.ElicitParams{Message: "seat?", RequestedSchema: map[string]any{"type": "string"}}, map[string]any{"seat": "12A"}, true, ""},
		{"a mode nobody knows", mcp.ElicitParams{Mode: "telepathy", Message: "seat?"}, nil, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := 0
			c := newClient(&mcp.Implementation{Name: "toolbus"}, ServerConfig{Type: "http", URL: "http://x.example", Elicitation: ElicitAsk},
				&mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked++
					return &mcp.ElicitResult{Action: "accept", Content: tt.answer}, nil
				}})
			params, _ := json.Marshal(tt.params)
			res, werr := c.peer.answer(context.Background(), nil, "elicitation/create", params)
			if tt.refused {
				if werr == nil || werr.Code != jsonrpc.CodeInvalidParams {
					t.Fatalf("answered %+v, %v; want invalid params", res, werr)
				}
				return
			}
			if werr != nil || asked != 1 {
				t.Fatalf("%v, asked %d times", werr, asked)
			}
			got, _ := json.Marshal(res.(*mcp.ElicitResult).Content)
			if string(got) != tt.want {
				t.Errorf("content %s, want %s", got, tt.want)
			}
		})
	}
}
