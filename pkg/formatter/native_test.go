package formatter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/messages"
)

// An output of calls that asked for an API's next turn carries it beside the text, each
// result answering its call by the call's id, in call order, whatever order the results
// came in; within the output's size limit, the native turn holding the previews the text
// holds.
func TestOutputCarriesTheNativeTurn(t *testing.T) {
	ok := messages.ToolResult{ResponseID: "r1", Conversation: "c1", Index: 1, Count: 2, Tool: "clock", ModelID: "toolu_B",
		OutputFormat: "anthropic", Success: true, Result: json.RawMessage(`{"now":"12:00"}`)}
	failed := messages.ToolResult{ResponseID: "r1", Conversation: "c1", Index: 0, Count: 2, Tool: "pay", ModelID: "toolu_A",
		OutputFormat: "anthropic"}.Fail(messages.Errorf(messages.CodeServerUnavailable, "server down"))
	s := &Stage{MaxOutputBytes: 64 << 10}
	body, err := s.output(context.Background(), "r1", "c1", []messages.ToolResult{ok, failed})
	if err != nil {
		t.Fatal(err)
	}
	var o messages.Output
	if err := messages.DecodeOutput(body, &o); err != nil {
		t.Fatal(err)
	}
	if o.NativeFormat != "anthropic" || o.Results[0].CallID != "toolu_A" || o.Results[1].CallID != "toolu_B" {
		t.Fatalf("output %s", body)
	}
	var turn []struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			IsError   bool            `json:"is_error"`
			Content   json.RawMessage `json:"content"`
		} `json:"content"`
	}
	if err := json.Unmarshal(o.Native, &turn); err != nil || len(turn) != 1 || len(turn[0].Content) != 2 {
		t.Fatalf("native %s: %v", o.Native, err)
	}
	first, second := turn[0].Content[0], turn[0].Content[1]
	if turn[0].Role != "user" || first.ToolUseID != "toolu_A" || !first.IsError || !strings.Contains(string(first.Content), "server_unavailable") ||
		second.ToolUseID != "toolu_B" || second.IsError || !strings.Contains(string(second.Content), "12:00") {
		t.Errorf("native %s", o.Native)
	}

	// Without an output format, no native turn; a big result is cut in both.
	plain := ok
	plain.OutputFormat = ""
	body, _ = s.output(context.Background(), "r1", "c1", []messages.ToolResult{plain})
	if strings.Contains(string(body), `"native`) {
		t.Errorf("output without a format: %s", body)
	}
	big := ok
	big.Result = json.RawMessage(`"` + strings.Repeat("x", 200<<10) + `"`)
	body, _ = s.output(context.Background(), "r1", "c1", []messages.ToolResult{big})
	if len(body) > 64<<10 || !strings.Contains(string(body), `"native":[`) {
		t.Errorf("a large result's output is %d bytes (limit %d): %.300s", len(body), 64<<10, body)
	}
}
