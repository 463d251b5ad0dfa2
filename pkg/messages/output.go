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

	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// Block renders one result as a <tool_result> block: the JSON object {"tool", "success",
// "result"} or {"tool", "success", "error", "error_code"}, in that order, indented by
// two spaces, non-ASCII text left as it is. The object is written directly and the raw
// result checked and indented as json.Indent would (Valid, appendIndent), rather than
// encoding a struct, which would compact and validate the result and then indent the
// whole again.
func Block(r ToolResult) string {
	var buf bytes.Buffer
	buf.Grow(len(r.Result)*5/4 + 128)
	buf.WriteString("<tool_result>\n{\n  \"tool\": ")
	writeString(&buf, EchoName(r.Tool))
	if r.Success {
		buf.WriteString(",\n  \"success\": true,\n  \"result\": ")
		res := bytes.Trim(r.Result, " \t\r\n") // JSON's whitespace only: \v or U+00A0 make the result invalid
		if len(res) == 0 {
			res = []byte("null")
		}
		if !Valid(res) {
			// Only an invalid raw result can fail; say so instead of losing the call.
			return Block(ToolResult{Tool: r.Tool}.Fail(Errorf(CodeInternal, "the tool returned invalid JSON")))
		}
		buf.Write(jsonscan.AppendIndent(buf.AvailableBuffer(), res, "  ", "  "))
	} else {
		e := r.Error
		if e == nil {
			e = &ResultError{Code: CodeInternal, Message: "the call failed without a reason"}
		}
		buf.WriteString(",\n  \"success\": false,\n  \"error\": ")
		writeString(&buf, EchoError(e.Message))
		buf.WriteString(",\n  \"error_code\": ")
		writeString(&buf, string(e.Code))
	}
	if r.Notice != "" {
		buf.WriteString(",\n  \"notice\": ")
		writeString(&buf, r.Notice)
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
		out.Results[i] = OutputResult{CallID: r.ModelID, Tool: EchoName(r.Tool), Success: r.Success, Error: echoError(r.Error), Attempts: r.Attempts, Notice: r.Notice, Stored: r.Stored,
			Content: r.Content, DurationMS: r.DurationMS, ArgumentsBytes: r.ArgumentsBytes, Policy: r.Policy}
	}
	out.Text = strings.Join(blocks, "\n")
	return out
}

// echoError is e with its message as results carry it ([EchoError]).
func echoError(e *ResultError) *ResultError {
	if e == nil || len(e.Message) <= MaxEchoedError {
		return e
	}
	return &ResultError{Code: e.Code, Message: EchoError(e.Message)}
}

// RefusedOutput is the output of a response none of whose calls ran: one failed result
// saying why.
func RefusedOutput(responseID, conversation string, err error) Output {
	failed := ToolResult{ResponseID: responseID, Conversation: conversation, Count: 1}.Fail(err)
	return RenderOutput(responseID, conversation, []ToolResult{failed})
}

// ReusedOutput is the output of a response whose id an earlier response of the
// conversation used, and whose output is stored already: the id was published again
// after the duplicate window forgot it, or under another message id. A response id
// names one response, so this output refuses the second: within the output's
// duplicate window it shares the first output's message id and is dropped, the first
// standing; later it follows the first on the output subject.
func ReusedOutput(responseID, conversation string) Output {
	return RefusedOutput(responseID, conversation, Errorf(CodeNotAllowed,
		"the response id %q was used by an earlier response of this conversation, which is answered already (its output is the earlier one on %s with message id %q): "+
			"a response id names one response, so this one has no output of its own and none of its calls ran again except read-only or idempotent ones — send it under a new id",
		responseID, OutputSubject(conversation), ScopedID(conversation, responseID)))
}

// NoToolCall is the output of a response without a call.
func NoToolCall(responseID, conversation string) Output {
	return Output{
		ResponseID: responseID, Conversation: conversation, Kind: KindNoToolCall,
		Results: []OutputResult{},
	}
}

// CapResult returns r with its result cut to about max bytes when it is larger: the
// result becomes a preview ([Preview]), so that a message carrying it fits the bus; the
// data of its content blocks is left out (each marked omitted) when with them it is. A
// result already stored whole (r.Stored) has its preview cut shorter. A failure has its
// error message cut to half of max (an output carries it twice), start and end kept. A
// result within max is returned as it is.
func CapResult(r ToolResult, max int) ToolResult {
	if max > 0 && !r.Success && r.Error != nil && len(r.Error.Message) > max/2 {
		r.Error = &ResultError{Code: r.Error.Code, Message: CutMiddle(r.Error.Message, max/2)}
		return r
	}
	if max <= 0 || !r.Success {
		return r
	}
	if len(r.Content) > 0 && r.InlineBytes() > max {
		r.Content = omitContent(r.Content)
	}
	if len(r.Result) <= max {
		return r
	}
	if r.Stored != nil {
		var p preview
		if json.Unmarshal(r.Result, &p) == nil && p.Truncated {
			r.Result = p.cut([]byte(p.Preview), r.Stored.Size, max, true)
			return r
		}
	}
	r.Result = Preview(r.Result, max, nil)
	return r
}

// Preview is what travels of a result larger than max: an object saying it was cut, with
// the size and sha256 of the whole and its first bytes, cut at a UTF-8 boundary, so that
// the object stays within about max bytes. With stored set, the note tells the model
// that the whole result is kept.
func Preview(full []byte, max int, stored *StoredResult) json.RawMessage {
	sum := sha256.Sum256(full)
	p := preview{Truncated: true, Size: len(full), SHA256: hex.EncodeToString(sum[:])}
	return p.cut(full, len(full), max, stored != nil)
}

// preview is the object [Preview] writes.
type preview struct {
	Truncated bool   `json:"truncated"`
	Size      int    `json:"size"`
	SHA256    string `json:"sha256"`
	Preview   string `json:"preview"`
	Note      string `json:"note"`
}

// cut sets the preview to the first bytes of from that fit max and encodes p.
func (p preview) cut(from []byte, size, max int, stored bool) json.RawMessage {
	keep := min(max/2, len(from))
	for keep > 0 && keep < len(from) && !utf8.RuneStart(from[keep]) {
		keep--
	}
	p.Preview = string(from[:keep])
	p.Note = fmt.Sprintf("the result is %d bytes, more than toolbus passes on inline (%d); this is its first %d bytes", size, max, keep)
	if stored {
		p.Note += "; the whole result is kept, and the orchestrator can fetch it"
	}
	b, _ := json.Marshal(p)
	return b
}

// FillResults sets Results[i].Result of each successful call from its block in Text,
// where a result travels on the bus (once: not in Results too). Results already set
// are kept.
func (o *Output) FillResults() error {
	text := o.Text
	for i := range o.Results {
		start := strings.Index(text, "<tool_result>\n")
		end := strings.Index(text, "</tool_result>")
		if start < 0 || end < start {
			return fmt.Errorf("output %s: no block for result %d", o.ResponseID, i)
		}
		body := text[start+len("<tool_result>\n") : end]
		text = text[end+len("</tool_result>"):]
		r := &o.Results[i]
		if !r.Success || r.Result != nil {
			continue
		}
		res, err := blockResult([]byte(body))
		if err != nil {
			return fmt.Errorf("output %s: block %d: %w", o.ResponseID, i, err)
		}
		r.Result = res
	}
	return nil
}

// blockResult reads the result of a successful call's block body, compacted, as
// [blockResultJSON] does: the shape [Block] writes is read directly; anything else
// (other members, keys in another case, duplicates, …) is left to encoding/json
// (FuzzBlockResult checks that both agree).
func blockResult(body []byte) (json.RawMessage, error) {
	var res []byte
	var tool string
	var success bool
	ok := readObject(body, func(r *reader, key string) bool {
		switch key {
		case "tool":
			return r.str(&tool)
		case "success":
			return r.bool(&success)
		case "result":
			r.ws()
			end, ok := valueEnd(r.data, r.i)
			if ok {
				res, r.i = r.data[r.i:end], end
			}
			return ok
		}
		return false
	})
	if !ok || res == nil {
		return blockResultJSON(body)
	}
	return jsonscan.AppendCompact(make([]byte, 0, len(res)), res), nil
}

// blockResultJSON is blockResult with encoding/json.
func blockResultJSON(body []byte) (json.RawMessage, error) {
	var b struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b.Result); err != nil {
		return nil, err
	}
	return compact.Bytes(), nil
}
