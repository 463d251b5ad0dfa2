package messages

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func seedMessages(f *testing.F) {
	dl := time.Date(2026, 11, 22, 4, 5, 6, 789, time.FixedZone("", 2*3600))
	for _, v := range []any{
		ToolCall{ID: "r1/0", ResponseID: "r1", Conversation: "c-1", Index: 0, Count: 2, Tool: "execute_tool",
			Arguments: json.RawMessage(`{"tool_name": "geometry.solve_circle_area", "parameters": {"r": 1}}`)},
		ToolCall{ID: "r1/1", ResponseID: "r1", Conversation: "c", Index: 1, Count: 3, Next: 2, Tool: "t\u00fc\"<x>",
			Arguments: json.RawMessage(`{}`), Repairs: []string{"single_quotes", "trailing_comma"}, Deadline: dl,
			Error: &ResultError{Code: CodeInvalidArguments, Message: "bad \"p\"\n"}},
		ToolResult{CallID: "r1/0", ResponseID: "r1", Conversation: "c", Count: 1, Tool: "clock", Success: true,
			Result: json.RawMessage(`{"time": "2026-11-22T04:05:06Z", "n": [1, 2.5e3, -0, true, null]}`), Attempts: 1, Backend: "local", DurationMS: 0.042},
		ToolResult{CallID: "r1/0", ResponseID: "r1", Conversation: "c", Count: 2, Next: 1, Tool: "x", Error: &ResultError{Code: CodeTimeout, Message: "slow"}, Attempts: 3},
		Output{ResponseID: "r1", Conversation: "c", Kind: KindToolResults, Text: "<tool_result>\n{\n  \"tool\": \"clock\"\n}\n</tool_result>",
			Results: []OutputResult{{Tool: "clock", Success: true, Result: json.RawMessage(`"ok"`), Attempts: 1}, {Tool: "y", Error: &ResultError{Code: CodeToolError, Message: "no"}}}},
		Output{ResponseID: "r2", Conversation: "c", Kind: KindNoToolCall, Results: []OutputResult{}},
		ToolResult{CallID: "r1/0", ResponseID: "r1", Conversation: "c", Count: 1, Tool: "shot", Success: true, Result: json.RawMessage(`"[image: image/png, 3 bytes, content 1]"`),
			Content: []Content{{Type: ContentImage, MimeType: "image/png", Data: "AAAA", Size: 3}, {Type: ContentResource, Size: 9, Omitted: true,
				Resource: &ResourceContents{URI: "file:///a.pdf"}, Stored: &StoredResult{Bucket: "b", Name: "r1/0/content/2", Size: 9, SHA256: "00"}}}},
		Output{ResponseID: "r3", Conversation: "c", Kind: KindToolResults, Text: "<tool_result>\n{}\n</tool_result>",
			Results: []OutputResult{{Tool: "shot", Success: true, Content: []Content{{Type: ContentAudio, MimeType: "audio/wav", Data: "UklGRg==", Size: 4}}}}},
	} {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"ID": "x"}`, `{"id": "a", "id": "b"}`, `{"index": 1.0}`, `{"index": 99999999999999999999}`, `{"count": -0}`,
		`{"result": null}`, `{"error": null}`, `{"id": "\ud83d\ude00"}`, `{"id": "\xff"}`, `{"repairs": []}`, `[]`, `null`,
		`{"deadline": "2026-11-22T04:05:06Z"}`, `{"deadline": "x"}`, `{"success": truex}`, `{"duration_ms": 1e400}`,
		`{"results": [{"tool": "a", "result": [1, {"b": "]"}]}]} `, `{"text": "a\u0000b"}`, ` {"arguments" : {"a":1} , "tool":"t"}`,
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}`, `{"a":1,"a":2}`, `{"\u0061":1}`, `"plain"`, ` "a\"b\u00e9\ud800" `, `"x" y`,
	} {
		f.Add([]byte(s))
	}
}

// sameTime makes equal instants compare equal under reflect.DeepEqual (time.Parse gives
// each fixed zone its own *Location).
func sameTime(a, b *time.Time) {
	if a.Equal(*b) && a.Location().String() == b.Location().String() {
		*a = *b
	}
}

// The fast decoders either decline or agree with encoding/json exactly; the exported
// ones always agree.
func FuzzDecode(f *testing.F) {
	seedMessages(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		{
			var want ToolCall
			werr := json.Unmarshal(data, &want)
			var fast ToolCall
			if decodeCall(data, &fast) {
				sameTime(&fast.Deadline, &want.Deadline)
				if werr != nil || !reflect.DeepEqual(fast, want) {
					t.Fatalf("call %q: fast %#v, encoding/json %#v (%v)", data, fast, want, werr)
				}
			}
			var got ToolCall
			gerr := DecodeCall(data, &got)
			sameTime(&got.Deadline, &want.Deadline)
			if (gerr == nil) != (werr == nil) || werr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("DecodeCall %q: %#v (%v), encoding/json %#v (%v)", data, got, gerr, want, werr)
			}
		}
		{
			var want, fast, got ToolResult
			werr := json.Unmarshal(data, &want)
			if decodeResult(data, &fast) && (werr != nil || !reflect.DeepEqual(fast, want)) {
				t.Fatalf("result %q: fast %#v, encoding/json %#v (%v)", data, fast, want, werr)
			}
			gerr := DecodeResult(data, &got)
			if (gerr == nil) != (werr == nil) || werr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("DecodeResult %q: %#v (%v), encoding/json %#v (%v)", data, got, gerr, want, werr)
			}
		}
		{
			var want string
			werr := json.Unmarshal(data, &want)
			got, gerr := DecodeString(data)
			if (gerr == nil) != (werr == nil) || werr == nil && got != want {
				t.Fatalf("DecodeString %q: %q (%v), encoding/json %q (%v)", data, got, gerr, want, werr)
			}
		}
		{
			var want map[string]json.RawMessage
			werr := json.Unmarshal(data, &want)
			if fast, ok := decodeMembers(data); ok && (werr != nil || !reflect.DeepEqual(fast, want)) {
				t.Fatalf("members %q: fast %q, encoding/json %q (%v)", data, fast, want, werr)
			}
			got, gerr := DecodeMembers(data)
			if (gerr == nil) != (werr == nil) || werr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("DecodeMembers %q: %q (%v), encoding/json %q (%v)", data, got, gerr, want, werr)
			}
		}
		{
			var want, fast, got Output
			werr := json.Unmarshal(data, &want)
			if decodeOutput(data, &fast) && (werr != nil || !reflect.DeepEqual(fast, want)) {
				t.Fatalf("output %q: fast %#v, encoding/json %#v (%v)", data, fast, want, werr)
			}
			gerr := DecodeOutput(data, &got)
			if (gerr == nil) != (werr == nil) || werr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("DecodeOutput %q: %#v (%v), encoding/json %#v (%v)", data, got, gerr, want, werr)
			}
		}
	})
}

// The messages toolbus writes take the fast path.
func TestDecodeTakesTheFastPath(t *testing.T) {
	call, _ := json.Marshal(ToolCall{ID: "r/0", ResponseID: "r", Conversation: "c", Count: 1, Tool: "t", Arguments: json.RawMessage(`{"a": "b\"c"}`),
		Repairs: []string{"x"}, Deadline: time.Now(), Error: &ResultError{Code: CodeParseError, Message: "m \"q\""}})
	if !decodeCall(call, new(ToolCall)) {
		t.Errorf("call %s declined", call)
	}
	res, _ := json.Marshal(ToolResult{CallID: "r/0", ResponseID: "r", Conversation: "c", Count: 1, Tool: "t", Success: true,
		Result: json.RawMessage(`{"v": [1, 2]}`), Attempts: 1, Backend: "mcp:x", DurationMS: 12.5})
	if !decodeResult(res, new(ToolResult)) {
		t.Errorf("result %s declined", res)
	}
	out, _ := json.Marshal(Output{ResponseID: "r", Conversation: "c", Kind: KindToolResults, Text: "<tool_result>\n{\"a\": 1}\n</tool_result>",
		Results: []OutputResult{{Tool: "t", Success: true, Result: json.RawMessage(`1`), Attempts: 1}}})
	if !decodeOutput(out, new(Output)) {
		t.Errorf("output %s declined", out)
	}
}

func BenchmarkDecodeResult(b *testing.B) {
	data, _ := json.Marshal(ToolResult{CallID: "r1/0", ResponseID: "r1", Conversation: "bench", Count: 1, Tool: "execute_tool", Success: true,
		Result:   json.RawMessage(`{"tool":"geometry.solve_circle_area","formula":"A = π·r²","solved_for":"A","value":3.14159,"unit":"m²","answer":"A = 3.14159 m²","method":"A = π·r²","inputs":{"r":{"value":1,"unit":"m","description":"radius"}},"notes":["units: A [m²], r and d [m]; give lengths in mm as strings, e.g. \"100 mm\""]}`),
		Attempts: 1, Backend: "engineering", DurationMS: 0.05})
	b.Run("toolbus", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r ToolResult
			if err := DecodeResult(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r ToolResult
			if err := json.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// unquote reads every escape as encoding/json does, and refuses what it refuses.
func TestUnquote(t *testing.T) {
	for _, in := range []string{
		`plain`, `a\"b\\c\/d`, `\b\f\n\r\t`, `\u00e9\u00C9`, `\ud83d\ude00`, `\ud83d`, `\ud83dx`,
		`\ud83d\u0041`, `\udc00\ud83d\ude00`, `\ud83d\ud83d\ude00`, "\xff\xfe", "é\xe9",
		`\'`, `\x41`, "a\x01b", `\u12`, `\uZZZZ`, `\`, `a"b`, `\u0000`, "\u2028",
	} {
		var want string
		werr := json.Unmarshal([]byte(`"`+in+`"`), &want)
		got, ok := unquote([]byte(in))
		if ok != (werr == nil) || ok && got != want {
			t.Errorf("unquote(%q) = %q, %v; encoding/json %q, %v", in, got, ok, want, werr)
		}
	}
}
