package formatter

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/toolbus/toolbus/pkg/messages"
)

// The two block shapes; field order is the order the model sees.
type okBlock struct {
	Tool    string          `json:"tool"`
	Success bool            `json:"success"`
	Result  json.RawMessage `json:"result"`
}

type errBlock struct {
	Tool      string             `json:"tool"`
	Success   bool               `json:"success"`
	Error     string             `json:"error"`
	ErrorCode messages.ErrorCode `json:"error_code"`
}

// Block renders one result as a <tool_result> block: the JSON object indented by two
// spaces, non-ASCII text left as it is.
func Block(r messages.ToolResult) string {
	var v any
	if r.Success {
		res := r.Result
		if len(res) == 0 {
			res = json.RawMessage("null")
		}
		v = okBlock{Tool: r.Tool, Success: true, Result: res}
	} else {
		e := r.Error
		if e == nil {
			e = &messages.ResultError{Code: messages.CodeInternal, Message: "the call failed without a reason"}
		}
		v = errBlock{Tool: r.Tool, Error: e.Message, ErrorCode: e.Code}
	}
	var buf bytes.Buffer
	buf.WriteString("<tool_result>\n")
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		// Only an invalid raw result can fail; say so instead of losing the call.
		return Block(messages.ToolResult{Tool: r.Tool}.Fail(messages.Errorf(messages.CodeInternal, "the tool returned invalid JSON")))
	}
	// A result must not be able to close its own block early.
	out := strings.ReplaceAll(buf.String()[len("<tool_result>\n"):], "</tool_result", `\u003c/tool_result`)
	return "<tool_result>\n" + out + "</tool_result>"
}

// Render builds the output of a response from all of its results, in call order.
func Render(responseID, conversation string, results []messages.ToolResult) messages.Output {
	sorted := make([]messages.ToolResult, len(results))
	copy(sorted, results)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	out := messages.Output{
		ResponseID: responseID, Conversation: conversation, Kind: messages.KindToolResults,
		Results: make([]messages.OutputResult, len(sorted)),
	}
	blocks := make([]string, len(sorted))
	for i, r := range sorted {
		blocks[i] = Block(r)
		out.Results[i] = messages.OutputResult{Tool: r.Tool, Success: r.Success, Result: r.Result, Error: r.Error, Attempts: r.Attempts}
	}
	out.Text = strings.Join(blocks, "\n")
	return out
}

// NoToolCall is the output of a response without a call.
func NoToolCall(responseID, conversation string) messages.Output {
	return messages.Output{
		ResponseID: responseID, Conversation: conversation, Kind: messages.KindNoToolCall,
		Results: []messages.OutputResult{},
	}
}
