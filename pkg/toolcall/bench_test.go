package toolcall

import (
	"encoding/json"
	"strings"
	"testing"
)

// Benchmark inputs. Each is typical of what it stands for; -benchmem shows allocations.

// prose is a response without calls, about 64 KiB of mixed text and markdown.
var prose = strings.Repeat("The pressure vessel must withstand 10 bar at 160 MPa allowable stress; "+
	"see [the standard](https://example.com/en13445) and the `design` notes below.\n"+
	"- wall thickness: s = p*d / (2*sigma*v)\n- diameter d = 100 mm, {not: json} here\n\n", 256)

const cleanCall = `I'll check the weather.
<tool_call>
{"name": "get_weather", "arguments": {"city": "San Francisco", "unit": "celsius", "days": 3}}
</tool_call>`

const repairedCall = `I'll check the weather.
<tool_call>
{'name': 'get_weather', 'arguments': {city: 'San Francisco', unit: "celsius", days: 3, hourly: True,}}
`

func BenchmarkExtractNoCalls(b *testing.B) {
	b.SetBytes(int64(len(prose)))
	b.ReportAllocs()
	for b.Loop() {
		if ex := Extract(prose, nil); len(ex.Calls) != 0 {
			b.Fatal(ex.Calls)
		}
	}
}

func BenchmarkExtractNoCallsKnownTools(b *testing.B) {
	opts := &Options{KnownTools: []string{"get_weather", "clock", "search_knowledge_base"}}
	b.SetBytes(int64(len(prose)))
	b.ReportAllocs()
	for b.Loop() {
		if ex := Extract(prose, opts); len(ex.Calls) != 0 {
			b.Fatal(ex.Calls)
		}
	}
}

func BenchmarkExtractCleanCall(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if ex := Extract(cleanCall, nil); len(ex.Calls) != 1 || ex.Calls[0].Err != nil {
			b.Fatal(ex.Calls)
		}
	}
}

// BenchmarkExtractCleanBlocks is the parser's throughput in clean <tool_call> blocks: a
// response of ten, reported per block.
func BenchmarkExtractCleanBlocks(b *testing.B) {
	const blocks = 10
	text := "I'll check the weather in ten cities.\n" + strings.Repeat(strings.TrimPrefix(cleanCall, "I'll check the weather.\n")+"\n", blocks)
	b.ReportAllocs()
	for b.Loop() {
		if ex := Extract(text, nil); len(ex.Calls) != blocks || ex.Calls[blocks-1].Err != nil {
			b.Fatal(ex.Calls)
		}
	}
	perBlock := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / blocks
	b.ReportMetric(perBlock, "ns/block")
	b.ReportMetric(1e9/perBlock, "blocks/s")
}

// BenchmarkExtractCleanCallSchema is BenchmarkExtractCleanCall as the parser service runs
// it: with the catalog's tools and schemas.
func BenchmarkExtractCleanCallSchema(b *testing.B) {
	opts := &Options{
		KnownTools: []string{"get_weather", "clock", "search_knowledge_base"},
		Schemas: map[string]json.RawMessage{
			"get_weather": json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}}, "required": ["city"]}`),
			"clock":       json.RawMessage(`{"type": "object", "properties": {}}`),
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		if ex := Extract(cleanCall, opts); len(ex.Calls) != 1 || ex.Calls[0].Err != nil || ex.Calls[0].Repairs != nil {
			b.Fatal(ex.Calls)
		}
	}
}

func BenchmarkExtractRepairedCall(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if ex := Extract(repairedCall, nil); len(ex.Calls) != 1 || ex.Calls[0].Err != nil {
			b.Fatal(ex.Calls)
		}
	}
}
