package messages

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Block renders one result as a <tool_result> block: the JSON object {"tool", "success",
// "result"} or {"tool", "success", "error", "error_code"}, in that order, indented by
// two spaces, non-ASCII text left as it is. The object is written directly and the raw
// result indented in one pass (json.Indent), rather than encoding a struct, which
// would compact and validate the result and then indent the whole again.
func Block(r ToolResult) string {
	var buf bytes.Buffer
	buf.Grow(len(r.Result)*5/4 + 128)
	buf.WriteString("<tool_result>\n{\n  \"tool\": ")
	writeString(&buf, r.Tool)
	if r.Success {
		buf.WriteString(",\n  \"success\": true,\n  \"result\": ")
		res := bytes.Trim(r.Result, " \t\r\n") // JSON's whitespace only: \v or U+00A0 make the result invalid
		if len(res) == 0 {
			res = []byte("null")
		}
		if err := json.Indent(&buf, res, "  ", "  "); err != nil {
			// Only an invalid raw result can fail; say so instead of losing the call.
			return Block(ToolResult{Tool: r.Tool}.Fail(Errorf(CodeInternal, "the tool returned invalid JSON")))
		}
	} else {
		e := r.Error
		if e == nil {
			e = &ResultError{Code: CodeInternal, Message: "the call failed without a reason"}
		}
		buf.WriteString(",\n  \"success\": false,\n  \"error\": ")
		writeString(&buf, e.Message)
		buf.WriteString(",\n  \"error_code\": ")
		writeString(&buf, string(e.Code))
	}
	buf.WriteString("\n}\n")
	// A result must not be able to close its own block early.
	body := buf.Bytes()[len("<tool_result>\n"):]
	if bytes.Contains(body, []byte("</tool_result")) {
		return "<tool_result>\n" + strings.ReplaceAll(string(body), "</tool_result", `\u003c/tool_result`) + "</tool_result>"
	}
	buf.WriteString("</tool_result>")
	return buf.String()
}

// writeString writes s as a JSON string the way encoding/json does without HTML
// escaping.
func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode ends with a newline
}

// RenderOutput builds the output of a response from all of its results, in call order.
func RenderOutput(responseID, conversation string, results []ToolResult) Output {
	sorted := make([]ToolResult, len(results))
	copy(sorted, results)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	out := Output{
		ResponseID: responseID, Conversation: conversation, Kind: KindToolResults,
		Results: make([]OutputResult, len(sorted)),
	}
	blocks := make([]string, len(sorted))
	for i, r := range sorted {
		blocks[i] = Block(r)
		out.Results[i] = OutputResult{Tool: r.Tool, Success: r.Success, Result: r.Result, Error: r.Error, Attempts: r.Attempts}
	}
	out.Text = strings.Join(blocks, "\n")
	return out
}

// NoToolCall is the output of a response without a call.
func NoToolCall(responseID, conversation string) Output {
	return Output{
		ResponseID: responseID, Conversation: conversation, Kind: KindNoToolCall,
		Results: []OutputResult{},
	}
}

// CapResult returns r with its result cut to about max bytes when it is larger: the
// result becomes an object saying so, with the size and sha256 of the whole and a
// preview cut at a UTF-8 boundary, so that a message carrying it fits the bus. A
// result within max, or a failure, is returned as it is.
func CapResult(r ToolResult, max int) ToolResult {
	if max <= 0 || len(r.Result) <= max {
		return r
	}
	sum := sha256.Sum256(r.Result)
	keep := max / 2
	for keep > 0 && !utf8.RuneStart(r.Result[keep]) {
		keep--
	}
	capped, _ := json.Marshal(struct {
		Truncated bool   `json:"truncated"`
		Size      int    `json:"size"`
		SHA256    string `json:"sha256"`
		Preview   string `json:"preview"`
		Note      string `json:"note"`
	}{true, len(r.Result), hex.EncodeToString(sum[:]), string(r.Result[:keep]),
		fmt.Sprintf("the result is %d bytes, more than toolbus passes on (%d); this is its first %d bytes", len(r.Result), max, keep)})
	r.Result = capped
	return r
}
