package formatter

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolbus/toolbus/pkg/bus"

	"github.com/toolbus/toolbus/pkg/messages"
)

// BenchmarkFormatStage is the formatter's stage for a one-call response without the
// bus: the result message is decoded, rendered as a <tool_result> block and the output
// encoded. The result is an engineering calculator's, of the size toolbus bench sends.
func BenchmarkFormatStage(b *testing.B) {
	res := messages.ToolResult{
		CallID: "r1/0", ResponseID: "r1", Conversation: "bench", Index: 0, Count: 1,
		Tool: "execute_tool", Success: true, Backend: "engineering", Attempts: 1, DurationMS: 0.05,
		Result: json.RawMessage(`{"tool":"geometry.solve_circle_area","formula":"A = π·r²","solved_for":"A","value":3.14159,"unit":"m²","answer":"A = 3.14159 m²","method":"A = π·r²","inputs":{"r":{"value":1,"unit":"m","description":"radius"}},"notes":["units: A [m²], r and d [m]; give lengths in mm as strings, e.g. \"100 mm\""]}`),
	}
	msg, err := json.Marshal(res)
	if err != nil {
		b.Fatal(err)
	}
	h := bus.Decoded(Decode, (&Stage{}).Format)
	d := &bus.Delivery{Data: msg, Delivered: 1}
	b.ReportAllocs()
	for b.Loop() {
		out, err := h(context.Background(), d)
		if err != nil || len(out) != 1 || len(out[0].Body) == 0 {
			b.Fatal(err)
		}
	}
}
