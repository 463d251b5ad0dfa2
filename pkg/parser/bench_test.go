package parser

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolbus/toolbus/pkg/bus"
	"github.com/toolbus/toolbus/pkg/catalog"
)

// BenchmarkParseStage is the parser's handler without the bus: a response of one clean
// <tool_call> is extracted against the catalog, planned, its arguments checked against
// the tool's schema, and its call message encoded.
func BenchmarkParseStage(b *testing.B) {
	cat := NewCatalog()
	cat.Set("engineering", []catalog.Tool{{Name: "execute_tool", InputSchema: json.RawMessage(
		`{"type": "object", "properties": {"tool_name": {"type": "string"}, "parameters": {"type": "object"}}, "required": ["tool_name"]}`)}})
	s := &Stage{Catalog: cat}
	text := "I will use the tools now.\n" +
		`<tool_call>{"name": "execute_tool", "arguments": {"tool_name": "geometry.solve_circle_area", "parameters": {"r": 1}}}</tool_call>` + "\n"
	d := &bus.Delivery{Data: []byte(text), Header: nats.Header{}, Meta: bus.Meta{Conversation: "bench", ResponseID: "r1"}, Delivered: 1}
	b.ReportAllocs()
	for b.Loop() {
		out, err := s.Parse(context.Background(), d)
		if err != nil || len(out) != 1 {
			b.Fatal(err, out)
		}
	}
}
