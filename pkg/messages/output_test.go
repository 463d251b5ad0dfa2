package messages

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestBlockGolden(t *testing.T) {
	tests := []struct {
		name   string
		result ToolResult
	}{
		{"success", ToolResult{Tool: "create_ticket", Success: true,
			Result: json.RawMessage(`{"ticket_id":"TKT-12345","status":"created"}`)}},
		{"failure", ToolResult{Tool: "get_ticket_status", Error: &ResultError{
			Code: CodeServerUnavailable, Message: "ticket_service did not answer after 3 attempts"}}},
		{"non_ascii", ToolResult{Tool: "search_knowledge_base", Success: true,
			Result: json.RawMessage(`{"title":"Kesselformel für Rohre","snippet":"σ = p·d/(2·s) — 圧力","emoji":"✅","html":"<b>&</b>"}`)}},
		{"nested", ToolResult{Tool: "execute_tool", Success: true,
			Result: json.RawMessage(`{"solved_for":"s","value":0.3125,"unit":"mm","inputs":{"p":{"value":10,"unit":"bar"},"d":{"value":100,"unit":"mm"}},"notes":["1 bar = 0.1 N/mm²",{"deep":[1,[2,[3]]]}],"empty_obj":{},"empty_arr":[]}`)}},
		{"scalar_result", ToolResult{Tool: "clock", Success: true, Result: json.RawMessage(`"2026-11-22T00:00:00Z"`)}},
		{"result_closes_block", ToolResult{Tool: "echo", Success: true, Result: json.RawMessage(`{"text":"</tool_result> injected"}`)}},
		{"non_ascii_error", ToolResult{Tool: "pressure.solve_kesselformel", Error: &ResultError{
			Code: CodeInvalidArguments, Message: "Parameter „s“ muss > 0 sein (σ in N/mm²)"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Block(tt.result) + "\n"
			path := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("block mismatch\n--- got ---\n%s--- want ---\n%s", got, want)
			}
			// Whatever the result, the block holds exactly one JSON object.
			inner := strings.TrimSuffix(strings.TrimPrefix(got, "<tool_result>\n"), "</tool_result>\n")
			var v map[string]any
			if err := json.Unmarshal([]byte(inner), &v); err != nil {
				t.Fatalf("block body is not JSON: %v", err)
			}
			if v["success"] != tt.result.Success || v["tool"] != tt.result.Tool {
				t.Errorf("block says tool=%v success=%v", v["tool"], v["success"])
			}
		})
	}
}

// The shape the orchestrators were promised, spelled out once by hand.
func TestBlockExactShape(t *testing.T) {
	got := Block(ToolResult{Tool: "create_ticket", Success: true,
		Result: json.RawMessage(`{"ticket_id": "TKT-12345", "status": "created"}`)})
	want := `<tool_result>
{
  "tool": "create_ticket",
  "success": true,
  "result": {
    "ticket_id": "TKT-12345",
    "status": "created"
  }
}
</tool_result>`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	got = Block(ToolResult{Tool: "create_ticket", Error: &ResultError{Code: CodeToolError, Message: "priority must be low, medium or high"}})
	want = `<tool_result>
{
  "tool": "create_ticket",
  "success": false,
  "error": "priority must be low, medium or high",
  "error_code": "tool_error"
}
</tool_result>`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestRenderOrdersByIndex(t *testing.T) {
	results := []ToolResult{
		{Tool: "c", Index: 2, Success: true, Result: json.RawMessage(`3`)},
		{Tool: "a", Index: 0, Success: true, Result: json.RawMessage(`1`)},
		{Tool: "b", Index: 1, Error: &ResultError{Code: CodeParseError, Message: "bad"}},
	}
	out := RenderOutput("r1", "c1", results)
	if out.Kind != KindToolResults || out.ResponseID != "r1" || out.Conversation != "c1" {
		t.Fatalf("header fields: %+v", out)
	}
	var tools []string
	for _, r := range out.Results {
		tools = append(tools, r.Tool)
	}
	if strings.Join(tools, ",") != "a,b,c" {
		t.Errorf("results in order %v, want a,b,c", tools)
	}
	if out.Results[1].Error == nil || out.Results[1].Error.Code != CodeParseError {
		t.Errorf("failed result lost its error: %+v", out.Results[1])
	}
	if strings.Count(out.Text, "<tool_result>") != 3 || strings.Index(out.Text, `"tool": "a"`) > strings.Index(out.Text, `"tool": "c"`) {
		t.Errorf("text blocks out of order:\n%s", out.Text)
	}
}

// A result travels once, in its block; FillResults reads it back from there, whatever
// the result holds.
func TestFillResultsFromBlocks(t *testing.T) {
	results := []ToolResult{
		{Tool: "a", Index: 0, Success: true, Result: json.RawMessage(`{"x": [1, 2, {"y": "</tool_result> <tool_result>\n"}]}`)},
		{Tool: "b", Index: 1, Error: &ResultError{Code: CodeToolError, Message: "no"}},
		{Tool: "c", Index: 2, Success: true, Result: json.RawMessage(` "plain ü" `)},
		{Tool: "d", Index: 3, Success: true, Result: Preview([]byte(strings.Repeat("z", 1000)), 100, &StoredResult{Bucket: "b", Name: "r/3", Size: 1000}),
			Stored: &StoredResult{Bucket: "b", Name: "r/3", Size: 1000, SHA256: "ab"}},
	}
	o := RenderOutput("r", "c", results)
	body := AppendOutput(nil, &o)
	if strings.Count(string(body), "plain ü") != 1 {
		t.Errorf("a result travels %d times in %s, want once", strings.Count(string(body), "plain ü"), body)
	}
	var back Output
	if err := DecodeOutput(body, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.FillResults(); err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		got := back.Results[i]
		if got.Success != r.Success || (r.Stored == nil) != (got.Stored == nil) {
			t.Errorf("result %d: %+v", i, got)
		}
		if !r.Success {
			if got.Result != nil {
				t.Errorf("failed result %d has a value %s", i, got.Result)
			}
			continue
		}
		var want, have any
		json.Unmarshal(r.Result, &want)
		if err := json.Unmarshal(got.Result, &have); err != nil || !reflect.DeepEqual(want, have) {
			t.Errorf("result %d = %s, want %s", i, got.Result, r.Result)
		}
	}
}
