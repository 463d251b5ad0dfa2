package parser

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
)

func TestPlan(t *testing.T) {
	deadline := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		text       string
		wantOutput bool
		wantCalls  []string // tool names of the calls to execute, in order
		wantFailed []int    // indexes answered at once with parse_error
		wantCount  int
	}{
		{name: "no call", text: "The capital of France is Paris.", wantOutput: true},
		{name: "seed format", text: `Sure.<tool_call>{"tool": "create_ticket", "parameters": {"title": "VPN"}}</tool_call>`,
			wantCalls: []string{"create_ticket"}, wantCount: 1},
		{name: "hermes format, several, text between", text: "A <tool_call>{\"name\": \"clock\", \"arguments\": {}}</tool_call> B\n<tool_call>\n{\"name\": \"execute_tool\", \"arguments\": {\"tool_name\": \"x\"}}\n</tool_call> C",
			wantCalls: []string{"clock", "execute_tool"}, wantCount: 2},
		{name: "malformed block among good ones", text: `<tool_call>{"name": "clock", "arguments": {}}</tool_call><tool_call>{"name": </tool_call><tool_call>{"tool": "clock", "parameters": {}}</tool_call>`,
			wantCalls: []string{"clock", "clock"}, wantFailed: []int{1}, wantCount: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := Plan("r1", "c1", tt.text, deadline, nil)
			if (w.Output != nil) != tt.wantOutput {
				t.Fatalf("output %+v, want output=%v", w.Output, tt.wantOutput)
			}
			if tt.wantOutput {
				if w.Output.Kind != messages.KindNoToolCall || w.Output.ResponseID != "r1" || len(w.Calls) != 0 {
					t.Errorf("no-call output: %+v", w)
				}
				return
			}
			var good []messages.ToolCall
			var failed []messages.ToolCall
			for i, c := range w.Calls {
				if c.Index != i {
					t.Errorf("call %d has index %d", i, c.Index)
				}
				if c.Error != nil {
					failed = append(failed, c)
				} else {
					good = append(good, c)
				}
			}
			if len(good) != len(tt.wantCalls) || len(failed) != len(tt.wantFailed) {
				t.Fatalf("calls %d failed %d, want %d and %d", len(good), len(failed), len(tt.wantCalls), len(tt.wantFailed))
			}
			for i, c := range good {
				if c.Tool != tt.wantCalls[i] || c.Count != tt.wantCount || c.ResponseID != "r1" || c.Conversation != "c1" || !c.Deadline.Equal(deadline) {
					t.Errorf("call %d: %+v", i, c)
				}
				if c.ID != messages.CallID("c1", "r1", c.Index) {
					t.Errorf("call id %q for index %d", c.ID, c.Index)
				}
				if !json.Valid(c.Arguments) || c.Arguments[0] != '{' {
					t.Errorf("arguments %s are not an object", c.Arguments)
				}
			}
			for i, r := range failed {
				if r.Index != tt.wantFailed[i] || r.Error.Code != messages.CodeParseError || r.Error.Message == "" || r.Count != tt.wantCount {
					t.Errorf("failed %d: %+v %+v", i, r, r.Error)
				}
			}
		})
	}
}

// A call keeps the id its API gave it; a call written without one gets a generated id,
// the same for every reading of the response, nine letters and digits (valid for every
// API it may go back to), different for each call.
func TestPlanModelIDs(t *testing.T) {
	api := `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01A","name":"clock","input":{}}]}`
	w := Plan("r1", "c1", api, time.Time{}, nil)
	if len(w.Calls) != 1 || w.Calls[0].ModelID != "toolu_01A" {
		t.Fatalf("anthropic call: %+v", w.Calls)
	}
	text := `<tool_call>{"name": "clock", "arguments": {}}</tool_call><tool_call>{"name": "clock", "arguments": {}}</tool_call>`
	a, b := Plan("r1", "c1", text, time.Time{}, nil), Plan("r1", "c1", text, time.Time{}, nil)
	other := Plan("r2", "c1", text, time.Time{}, nil)
	seen := map[string]bool{}
	for i, c := range a.Calls {
		if !regexp.MustCompile(`^[A-Za-z0-9]{9}$`).MatchString(c.ModelID) {
			t.Errorf("call %d: generated id %q", i, c.ModelID)
		}
		if b.Calls[i].ModelID != c.ModelID {
			t.Errorf("call %d: id %q, then %q for the same response", i, c.ModelID, b.Calls[i].ModelID)
		}
		if seen[c.ModelID] || other.Calls[i].ModelID == c.ModelID {
			t.Errorf("call %d: id %q repeats", i, c.ModelID)
		}
		seen[c.ModelID] = true
	}
}

// The output format: a response's header, else its tenant's, else the configuration's;
// a header that names no API is ignored.
func TestOutputFormat(t *testing.T) {
	s := &Stage{OutputFormat: "openai", TenantOutputFormats: map[string]string{"acme": "anthropic"}}
	for _, tt := range []struct{ header, tenant, want string }{
		{"", "", "openai"},
		{"", "acme", "anthropic"},
		{"gemini", "acme", "gemini"},
		{" bedrock ", "", "bedrock"},
		{"no-such-api", "acme", "anthropic"},
	} {
		if got := s.outputFormat(tt.header, tt.tenant); got != tt.want {
			t.Errorf("header %q tenant %q: %q, want %q", tt.header, tt.tenant, got, tt.want)
		}
	}
	w := WithOutputFormat(Plan("r1", "c1", `<tool_call>{"name": "clock", "arguments": {}}</tool_call>`, time.Time{}, nil), "ollama")
	if w.Calls[0].OutputFormat != "ollama" {
		t.Errorf("call: %+v", w.Calls[0])
	}
}
