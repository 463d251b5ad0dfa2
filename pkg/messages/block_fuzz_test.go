package messages

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// encoderBlock is Block as encoding/json writes it: a struct encoded with two-space
// indentation and no HTML escaping, the name and the error cut as toolbus repeats them
// (echo.go). Block writes the same bytes by hand.
func encoderBlock(r ToolResult) string {
	type okBlock struct {
		Tool    string          `json:"tool"`
		Success bool            `json:"success"`
		Result  json.RawMessage `json:"result"`
	}
	type errBlock struct {
		Tool      string    `json:"tool"`
		Success   bool      `json:"success"`
		Error     string    `json:"error"`
		ErrorCode ErrorCode `json:"error_code"`
	}
	var v any
	if r.Success {
		res := r.Result
		if len(bytes.Trim(res, " \t\r\n")) == 0 { // a result of JSON whitespace alone is null
			res = json.RawMessage("null")
		}
		v = okBlock{Tool: EchoName(r.Tool), Success: true, Result: res}
	} else {
		e := r.Error
		if e == nil {
			e = &ResultError{Code: CodeInternal, Message: "the call failed without a reason"}
		}
		v = errBlock{Tool: EchoName(r.Tool), Error: EchoError(e.Message), ErrorCode: e.Code}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return encoderBlock(ToolResult{Tool: r.Tool}.Fail(Errorf(CodeInternal, "the tool returned invalid JSON")))
	}
	return "<tool_result>\n" + strings.ReplaceAll(buf.String(), "</tool_result", `\u003c/tool_result`) + "</tool_result>"
}

func FuzzBlock(f *testing.F) {
	f.Add("execute_tool", true, `{"a": [1, 2, {"b": "ü <&> \u2028"}], "c": {}, "d": []}`, "")
	f.Add("clock", true, "  \n[ ]\t", "")
	f.Add("t</tool_result>", true, `"</tool_result>"`, "")
	f.Add("x", true, `{"a":}`, "")
	f.Add("x\u2028\"\\", false, "", "boom \x01 <b>\xff</b>")
	f.Add("", true, "", "")
	f.Fuzz(func(t *testing.T, tool string, ok bool, result, msg string) {
		r := ToolResult{Tool: tool, Success: ok, Result: json.RawMessage(result)}
		if !ok {
			r.Error = &ResultError{Code: CodeToolError, Message: msg}
		}
		if got, want := Block(r), encoderBlock(r); got != want {
			t.Fatalf("Block differs from encoding/json:\ngot  %q\nwant %q", got, want)
		}
	})
}

// FuzzBlockResult: reading a block's result directly agrees with encoding/json, for the
// blocks Block writes and for any other text.
func FuzzBlockResult(f *testing.F) {
	for _, r := range []ToolResult{
		{Tool: "execute_tool", Success: true, Result: json.RawMessage(`{"a": [1, 2, {"b": "ü <&> \u2028"}], "c": {}, "d": []}`)},
		{Tool: "clock", Success: true, Result: json.RawMessage(`"2026-11-24T21:00:00Z"`)},
		{Tool: "x\"\\", Success: true, Result: json.RawMessage(" \n[ 1 ,\t2 ]\n")},
	} {
		b := Block(r)
		f.Add(b[len("<tool_result>\n") : len(b)-len("</tool_result>")])
	}
	f.Add(`{"tool": "t", "success": true, "Result": 1}`)
	f.Add(`{"tool": "t", "success": true, "result": 1, "result": 2}`)
	f.Add(`{"tool": "t", "success": true, "result": {"a": }}`)
	f.Add(`{"tool": "t", "success": true, "result": null}`)
	f.Add(`{"tool": "t", "success": true, "result": [1, 2] x}`)
	f.Add(`{"tool": "t", "success": true, "other": 1, "result": 3}`)
	f.Fuzz(func(t *testing.T, body string) {
		got, gerr := blockResult([]byte(body))
		want, werr := blockResultJSON([]byte(body))
		if (gerr == nil) != (werr == nil) || gerr == nil && !bytes.Equal(got, want) {
			t.Fatalf("blockResult(%q) = %q, %v; encoding/json: %q, %v", body, got, gerr, want, werr)
		}
	})
}
