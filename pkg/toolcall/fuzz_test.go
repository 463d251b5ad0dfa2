package toolcall

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolbus/toolbus/pkg/messages"
)

// The seed corpus is testdata/fuzz/Fuzz*/ (every input of the txtar corpus) plus the
// inputs below.

// repairBug is the message of pkg/jsonrepair's error for JSON it wrote invalid: a bug.
const repairBug = "the JSON could not be repaired"

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
		checkMemberSpans(t, text)
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
				if c.Err != nil && strings.Contains(c.Err.Message, repairBug) {
					t.Fatalf("Extract(%q): call %d: the repairer wrote invalid JSON", text, c.Index)
				}
			}
		}
	})
}
