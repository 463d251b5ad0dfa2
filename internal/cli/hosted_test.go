package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/messages"
)

const openAICompletion = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
	`{"id":"call_a","type":"function","function":{"name":"clock","arguments":"{}"}},` +
	`{"id":"call_b","type":"function","function":{"name":"no_such_tool","arguments":"{\"x\": 1}"}}]},"finish_reason":"tool_calls"}]}`

// toolbus parse --format openai|anthropic prints each call with the API's id.
func TestParseHostedAPIs(t *testing.T) {
	for _, tt := range []struct{ format, in string }{
		{"openai", openAICompletion},
		{"anthropic", `{"type":"message","role":"assistant","content":[{"type":"text","text":"Checking."},` +
			`{"type":"tool_use","id":"call_a","name":"clock","input":{}},{"type":"tool_use","id":"call_b","name":"no_such_tool","input":{"x":1}}]}`},
	} {
		stdout, stderr, code := runMain(t, tt.in, "parse", "--format", tt.format)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tt.format, code, stderr)
		}
		var p parsed
		if err := json.Unmarshal([]byte(stdout), &p); err != nil {
			t.Fatalf("%s: %v\n%s", tt.format, err, stdout)
		}
		if len(p.Calls) != 2 || p.Calls[0].ID != "call_a" || p.Calls[0].Name != "clock" || p.Calls[1].ID != "call_b" ||
			strings.Join(strings.Fields(string(p.Calls[1].Arguments)), "") != `{"x":1}` || p.Calls[1].Format != "openai" && tt.format == "openai" {
			t.Errorf("%s: %s", tt.format, stdout)
		}
	}
}

// toolbus run --output-format openai prints the native next turn: one tool message per
// call, answering it by the id the response gave it (the failed call too, its error
// code in the content); with --json, the output holds it beside the text, and each
// result names its call's id.
func TestRunPrintsTheNativeTurn(t *testing.T) {
	file := filepath.Join(t.TempDir(), "completion.json")
	if err := os.WriteFile(file, []byte(openAICompletion), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runMain(t, "", "run", "--output-format", "openai", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var turn []struct {
		Role       string `json:"role"`
		ToolCallID string `json:"tool_call_id"`
		Content    string `json:"content"`
	}
	if err := json.Unmarshal([]byte(stdout), &turn); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(turn) != 2 || turn[0].Role != "tool" || turn[0].ToolCallID != "call_a" || turn[1].ToolCallID != "call_b" ||
		!strings.Contains(turn[1].Content, string(messages.CodeUnknownTool)) {
		t.Fatalf("native turn:\n%s", stdout)
	}
	stdout, stderr, code = runMain(t, "", "run", "--output-format", "openai", "--json", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out messages.Output
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.NativeFormat != "openai" || len(out.Results) != 2 || out.Results[0].CallID != "call_a" || out.Results[1].CallID != "call_b" ||
		!strings.Contains(string(out.Native), `"tool_call_id":"call_a"`) || !strings.Contains(out.Text, "<tool_result>") {
		t.Fatalf("output: %s", stdout)
	}
	_, stderr, code = runMain(t, "", "run", "--output-format", "openai_chat", file)
	if code != 2 || !strings.Contains(stderr, "unknown output format") {
		t.Errorf("a wrong --output-format: exit %d, %s", code, stderr)
	}
}
