package mcpwire

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/messages"
)

// resultValue turns a tool's result into the JSON value a model is shown:
// structuredContent when present; else the text content, where a single text block that
// holds JSON becomes that JSON value; else the content blocks themselves. A result with
// isError is a [*ToolError] carrying the server's text.
func resultValue(server, tool string, res *mcp.CallToolResult) (json.RawMessage, error) {
	if res == nil {
		return json.RawMessage("null"), nil
	}
	if res.IsError {
		msg := strings.TrimSpace(contentText(res.Content))
		if msg == "" && res.StructuredContent != nil {
			b, _ := json.Marshal(res.StructuredContent)
			msg = string(b)
		}
		if msg == "" {
			msg = "the tool reported an error without a message"
		}
		return nil, &ToolError{Server: server, Tool: tool, Message: msg}
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: structuredContent: %w", server, tool, err)
		}
		return b, nil
	}
	if len(res.Content) == 0 {
		return json.RawMessage("null"), nil
	}
	if allText(res.Content) {
		if len(res.Content) == 1 {
			text := strings.TrimSpace(res.Content[0].(*mcp.TextContent).Text)
			if text != "" && messages.Valid([]byte(text)) {
				return json.RawMessage(text), nil
			}
		}
		return json.Marshal(contentText(res.Content))
	}
	return json.Marshal(res.Content)
}

func allText(content []mcp.Content) bool {
	for _, c := range content {
		if _, ok := c.(*mcp.TextContent); !ok {
			return false
		}
	}
	return true
}

// contentText joins the text blocks of content.
func contentText(content []mcp.Content) string {
	var texts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n")
}
