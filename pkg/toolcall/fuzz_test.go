package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolbus/toolbus/pkg/messages"
)

// The seed corpus is testdata/fuzz/Fuzz*/ (every input of the txtar corpus) plus the
// inputs below.

func FuzzRepairJSON(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `{a: 'b',}`, `[1, 2`, `{"a": "x" + "y"}`, "```json\n{}\n```", `"\u00e9"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkMemberSpans(t, s)
		out, repairs, err := RepairJSON(s)
		if err != nil {
			if out != nil || repairs != nil {
				t.Fatalf("error %v with output %q %v", err, out, repairs)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *SyntaxError", err)
			}
			if se.Msg == msgRepairBug {
				t.Fatalf("RepairJSON(%q) wrote invalid JSON", s)
			}
			return
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("RepairJSON(%q) = %q, not valid JSON", s, out)
		}
		if json.Valid([]byte(s)) && utf8.ValidString(s) && (string(out) != s || repairs != nil) {
			t.Fatalf("RepairJSON(%q) changed valid JSON: %q %v", s, out, repairs)
		}
		again, repairs2, err := RepairJSON(string(out))
		if err != nil || !bytes.Equal(again, out) || repairs2 != nil {
			t.Fatalf("RepairJSON is not idempotent on %q: %q %v %v", out, again, repairs2, err)
		}
	})
}

func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		`<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`,
		`<tool_call>{'name': 'a', 'arguments': {x: 1,}`,
		"[get_weather(city='Paris'), clock()]",
		`[TOOL_CALLS]add{"a": 1}`,
	} {
		f.Add(s, uint8(0))
	}
	formats := append([]Format{FormatAuto}, Formats()...)
	f.Fuzz(func(t *testing.T, text string, format uint8) {
		opts := &Options{
			KnownTools: []string{"get_weather", "clock", "a"},
			Format:     formats[int(format)%len(formats)],
			Schemas: map[string]json.RawMessage{
				"get_weather": json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "list": {"type": "array"}}}`),
			},
		}
		for _, o := range []*Options{nil, opts} {
			ex := Extract(text, o)
			checkExtraction(t, text, ex)
			for _, c := range ex.Calls {
				if c.Err != nil && c.Err.Code != messages.CodeParseError {
					t.Fatalf("Extract(%q): call %d failed with %v", text, c.Index, c.Err)
				}
				if c.Err != nil && c.Err.Message == "" {
					t.Fatalf("Extract(%q): call %d failed without a message", text, c.Index)
				}
				if c.Err != nil && strings.Contains(c.Err.Message, msgRepairBug) {
					t.Fatalf("Extract(%q): call %d: the repairer wrote invalid JSON", text, c.Index)
				}
			}
		}
	})
}
