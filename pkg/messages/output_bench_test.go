package messages

import (
	"encoding/json"
	"testing"
)

// An output as the orchestrator's client reads it: the message, then each result from
// its block in the text.
func BenchmarkDecodeOutput(b *testing.B) {
	res := ToolResult{CallID: "r1/0", ResponseID: "r1", Conversation: "bench", Count: 1, Tool: "execute_tool", Success: true,
		Result:   json.RawMessage(`{"tool":"geometry.solve_circle_area","formula":"A = π·r²","solved_for":"A","value":3.14159,"unit":"m²","answer":"A = 3.14159 m²","method":"A = π·r²","inputs":{"r":{"value":1,"unit":"m","description":"radius"}},"notes":["units: A [m²], r and d [m]; give lengths in mm as strings, e.g. \"100 mm\""]}`),
		Attempts: 1, Backend: "engineering", DurationMS: 0.05}
	out := Output{ResponseID: "r1", Conversation: "bench", Kind: KindToolResults, Text: Block(res),
		Results: []OutputResult{{Tool: res.Tool, Success: true, Attempts: 1}}}
	data, err := json.Marshal(out)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var o Output
		if err := DecodeOutput(data, &o); err != nil {
			b.Fatal(err)
		}
		if err := o.FillResults(); err != nil || len(o.Results[0].Result) == 0 {
			b.Fatal(err)
		}
	}
}
