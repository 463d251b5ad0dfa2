package mcpwire

import (
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkResultValue is what a tool's result costs on its way to the model: "text" a
// plain-text answer, "json" a text block holding JSON (most servers' answers).
func BenchmarkResultValue(b *testing.B) {
	for _, tc := range []struct {
		name string
		res  *mcp.CallToolResult
	}{
		{"text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "The current time is 2026-11-27T12:00:00Z, a Friday."}}}},
		{"json", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"status":"packed","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}],"eta":"2026-11-30"}`}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := resultValue("s", "t", tc.res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
