package mcpwire

import (
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestResultValue(t *testing.T) {
	text := func(s ...string) []mcp.Content {
		var out []mcp.Content
		for _, x := range s {
			out = append(out, &mcp.TextContent{Text: x})
		}
		return out
	}
	tests := []struct {
		name    string
		res     *mcp.CallToolResult
		want    string
		wantErr string
	}{
		{name: "structured wins over text", res: &mcp.CallToolResult{Content: text("ignored"), StructuredContent: map[string]int{"n": 1}}, want: `{"n":1}`},
		{name: "JSON text", res: &mcp.CallToolResult{Content: text(" [1,2] ")}, want: `[1,2]`},
		{name: "number text", res: &mcp.CallToolResult{Content: text("42")}, want: `42`},
		{name: "plain text", res: &mcp.CallToolResult{Content: text("hi there")}, want: `"hi there"`},
		{name: "texts joined", res: &mcp.CallToolResult{Content: text("a", "{}")}, want: `"a\n{}"`},
		{name: "no content", res: &mcp.CallToolResult{}, want: `null`},
		{name: "nil result", res: nil, want: `null`},
		{name: "error text", res: &mcp.CallToolResult{IsError: true, Content: text("boom")}, wantErr: "boom"},
		{name: "error structured", res: &mcp.CallToolResult{IsError: true, StructuredContent: map[string]string{"why": "x"}}, wantErr: `{"why":"x"}`},
		{name: "error without message", res: &mcp.CallToolResult{IsError: true}, wantErr: "the tool reported an error without a message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resultValue("s", "t", tt.res)
			if tt.wantErr != "" {
				var te *ToolError
				if !errors.As(err, &te) || te.Message != tt.wantErr {
					t.Fatalf("err = %v, want a *ToolError %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestToolErrorKinds(t *testing.T) {
	tests := []struct {
		name        string
		err         ToolError
		wantInvalid bool
		wantUnknown bool
	}{
		{name: "isError", err: ToolError{Message: "x"}},
		{name: "invalid params", err: ToolError{Code: -32602, Message: "want an id"}, wantInvalid: true},
		{name: "unknown tool as invalid params", err: ToolError{Code: -32602, Message: `unknown tool "x"`}, wantUnknown: true},
		{name: "method not found", err: ToolError{Code: -32601, Message: "no"}, wantUnknown: true},
		{name: "other", err: ToolError{Code: -32000, Message: "db down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err.InvalidArguments() != tt.wantInvalid || tt.err.UnknownTool() != tt.wantUnknown {
				t.Errorf("InvalidArguments %v, UnknownTool %v", tt.err.InvalidArguments(), tt.err.UnknownTool())
			}
		})
	}
}
