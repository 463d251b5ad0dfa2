package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// streamEvents is an Anthropic stream of calls tool_use blocks, each of whose arguments
// (a string of argBytes) comes in deltas of 16 bytes, as Claude streams them.
func streamEvents(calls, argBytes int) []string {
	var ev []string
	ev = append(ev, `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[]}}`)
	for i := 0; i < calls; i++ {
		ev = append(ev, fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_%d","name":"write","input":{}}}`, i, i))
		args := `{"text": "` + strings.Repeat("x", argBytes) + `"}`
		for j := 0; j < len(args); j += 16 {
			frag, _ := json.Marshal(args[j:min(j+16, len(args))])
			ev = append(ev, fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, frag))
		}
		ev = append(ev, fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
	}
	return append(ev, `{"type":"message_delta","delta":{"stop_reason":"tool_use"}}`, `{"type":"message_stop"}`)
}

// BenchmarkStreamAPI reads a streamed Anthropic response event by event as the parser
// does (ExtractPartial of the text so far at each event): per event.
func BenchmarkStreamAPI(b *testing.B) {
	for _, tc := range []struct{ calls, arg int }{{1, 256}, {1, 4096}, {8, 1024}} {
		events := streamEvents(tc.calls, tc.arg)
		b.Run(fmt.Sprintf("calls=%d/args=%d/events=%d", tc.calls, tc.arg, len(events)), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := NewStream(nil)
				for _, e := range events {
					s.Write(e)
				}
				if _, rest := s.Close(); len(rest) != 0 {
					b.Fatalf("%d calls settled only at the close", len(rest))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
		})
	}
}
