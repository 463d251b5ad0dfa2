package toolcall

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
)

// timeAfter bounds a test that must run in linear time: generous for a slow, loaded
// machine, far below what a quadratic pass over the inputs would take.
func timeAfter(t *testing.T) <-chan time.Time {
	t.Helper()
	return time.After(10 * time.Second)
}

func TestExtract(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		opts      *Options
		wantNames []string
		wantErr   bool // some call failed
		wantArgs  []string
	}{
		{name: "nil options", in: `<tool_call>{"name": "a"}</tool_call>`, wantNames: []string{"a"}},
		{name: "invalid utf8 arguments", in: "<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": \"\xff\"}}</tool_call>", wantNames: []string{"a"}},
		{name: "pinned format ignores others", in: `<tool_call>{"name": "a"}</tool_call>[TOOL_CALLS]b{}`, opts: &Options{Format: FormatMistral}, wantNames: []string{"b"}},
		{name: "pinned tool_call reads qwen xml", in: `<tool_call><function=a></function></tool_call>`, opts: &Options{Format: FormatToolCallTag}, wantNames: []string{"a"}},
		{name: "think hides calls", in: `<think><tool_call>{"name": "a"}</tool_call></think>`},
		{name: "overflow: each further call answered", in: strings.Repeat(`<tool_call>{"name": "a"}</tool_call>`, 5), opts: &Options{MaxCalls: 3}, wantNames: []string{"a", "a", "a", "a", "a"}, wantErr: true},
		{name: "overflow beyond twice the limit: the rest in one", in: strings.Repeat(`<tool_call>{"name": "a"}</tool_call>`, 9), opts: &Options{MaxCalls: 3}, wantNames: []string{"a", "a", "a", "a", "a", "a", ""}, wantErr: true},
		{name: "unknown format pinned means auto", in: `<tool_call>{"name": "a"}</tool_call>`, opts: &Options{Format: "nonsense"}, wantNames: []string{"a"}},
		{name: "deep but allowed", in: `<tool_call>{"name": "a", "arguments": {"x": [[[1]]]}}</tool_call>`, opts: &Options{MaxDepth: 5}, wantNames: []string{"a"}},
		{name: "too deep", in: `<tool_call>{"name": "a", "arguments": {"x": [[[[[1]]]]]}}</tool_call>`, opts: &Options{MaxDepth: 5}, wantNames: []string{"a"}, wantErr: true},
		{name: "schema coercion", in: `<tool_call>{"name": "a", "arguments": {"n": "3", "ok": "true", "list": "[1, 2]", "s": 5, "keep": "x"}}</tool_call>`,
			opts:      &Options{Schemas: map[string]json.RawMessage{"a": json.RawMessage(`{"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}, "list": {"type": "array"}, "s": {"type": "string"}, "keep": {"type": "number"}}}`)}},
			wantNames: []string{"a"}, wantArgs: []string{`{"n": 3, "ok": true, "list": [1, 2], "s": "5", "keep": "x"}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := Extract(tt.in, tt.opts)
			checkExtraction(t, tt.in, ex)
			var names []string
			failed := false
			for i, c := range ex.Calls {
				if i < len(tt.wantArgs) && string(c.Arguments) != tt.wantArgs[i] {
					t.Errorf("call %d: arguments %s, want %s", i, c.Arguments, tt.wantArgs[i])
				}
				names = append(names, c.Name)
				if c.Err != nil {
					failed = true
					if c.Err.Code != messages.CodeParseError {
						t.Errorf("call %d: code %s", c.Index, c.Err.Code)
					}
				}
			}
			if !slices.Equal(names, tt.wantNames) {
				t.Errorf("names = %q, want %q", names, tt.wantNames)
			}
			if failed != tt.wantErr {
				t.Errorf("a call failed: %v, wantErr %v: %+v", failed, tt.wantErr, ex.Calls)
			}
		})
	}
}

func TestExtractCoercion(t *testing.T) {
	opts := &Options{Schemas: map[string]json.RawMessage{"a": json.RawMessage(
		`{"type": "object", "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}, "list": {"type": "array"}, "s": {"type": "string"}, "keep": {"type": "number"}}}`)}}
	ex := Extract(`<tool_call>{"name": "a", "arguments": {"n": "3", "ok": "true", "list": "[1, 2]", "s": 5, "keep": "x"}}</tool_call>`, opts)
	c := ex.Calls[0]
	if want := `{"n": 3, "ok": true, "list": [1, 2], "s": "5", "keep": "x"}`; string(c.Arguments) != want {
		t.Errorf("arguments = %s, want %s", c.Arguments, want)
	}
	if !slices.Equal(c.Repairs, []string{RepairSchemaCoercion}) {
		t.Errorf("repairs = %v", c.Repairs)
	}
}

func TestExtractSpans(t *testing.T) {
	in := "A <tool_call>{\"name\": \"a\"}</tool_call> B <tool_call>{\"name\": \"b\"}</tool_call>"
	ex := Extract(in, nil)
	if len(ex.Calls) != 2 {
		t.Fatalf("calls = %+v", ex.Calls)
	}
	for i, want := range []string{`<tool_call>{"name": "a"}</tool_call>`, `<tool_call>{"name": "b"}</tool_call>`} {
		if c := ex.Calls[i]; c.Raw != want || in[c.Start:c.End] != want || c.Index != i {
			t.Errorf("call %d = %+v, want Raw %q", i, c, want)
		}
	}
	if ex.Content != "A  B" {
		t.Errorf("content = %q", ex.Content)
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Format
		wantErr bool
	}{
		{name: "empty", in: "", want: FormatAuto},
		{name: "auto", in: "auto", want: FormatAuto},
		{name: "hermes", in: "tool_call", want: FormatToolCallTag},
		{name: "kimi", in: "kimi_k2", want: FormatKimiK2},
		{name: "unknown", in: "hermes2", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFormat(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseFormat(%q) = %q, %v", tt.in, got, err)
			}
		})
	}
	for _, f := range Formats() {
		if got, err := ParseFormat(string(f)); err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
}

// TestExtractLinear feeds responses that make naive extractors quadratic.
func TestExtractLinear(t *testing.T) {
	const n = 400_000
	known := &Options{KnownTools: []string{"a"}, MaxInputSize: 2 * n}
	tests := []struct {
		name string
		in   string
		opts *Options
	}{
		{name: "unclosed tags", in: strings.Repeat("<tool_call>x ", n/12)},
		{name: "unclosed think", in: strings.Repeat("<think>", n/7)},
		{name: "bare candidates", in: strings.Repeat(`{"name": "a", "x": "`, n/20), opts: known},
		{name: "bare arrays", in: strings.Repeat(`[{"b": [`, n/8), opts: known},
		{name: "pythonic candidates", in: strings.Repeat("[a(x=", n/5), opts: known},
		{name: "fences", in: strings.Repeat("```json\n{\"name\": \"a\"\n", n/20), opts: known},
		{name: "python tags", in: strings.Repeat("<|python_tag|>{", n/15)},
		{name: "mistral", in: strings.Repeat("[TOOL_CALLS][{", n/14)},
		{name: "deepseek calls", in: strings.Repeat("<｜tool▁call▁begin｜>x", n/30)},
		{name: "kimi sections", in: strings.Repeat("<|tool_calls_section_begin|><|tool_call_begin|>", n/50)},
		{name: "qwen parameters", in: "<tool_call><function=a>" + strings.Repeat("<parameter=x>", n/13)},
		{name: "glm keys", in: "<tool_call>a" + strings.Repeat("<arg_key>x", n/10)},
		{name: "angle brackets", in: strings.Repeat("<", n)},
		// Issue 34's formats, and reading on after a call that fails.
		{name: "harmony channels", in: strings.Repeat("<|channel|>", n/11) + "<|message|>"},
		{name: "harmony starts", in: strings.Repeat("<|start|>assistant", n/18) + "<|message|>"},
		{name: "harmony messages", in: strings.Repeat("<|channel|>commentary to=functions.a<|message|>{", n/48)},
		{name: "gemma calls", in: strings.Repeat(`<|tool_call>call:a{x:<|"|>`, n/26)},
		{name: "functionary parts", in: strings.Repeat(">>>a\n{", n/6), opts: &Options{Format: FormatFunctionaryV32, MaxInputSize: 2 * n}},
		{name: "functools", in: strings.Repeat("functools[{", n/11)},
		{name: "role separators", in: strings.Repeat("function call<|role_sep|>", n/25)},
		{name: "steptml invokes", in: strings.Repeat(`<｜tool_call_begin｜><steptml:invoke name="a">`, n/45)},
		{name: "lfm2 broken siblings", in: "<|tool_call_start|>[" + strings.Repeat("a(x 1), ", n/8)},
		{name: "lfm2 open strings", in: "<|tool_call_start|>[" + strings.Repeat("a('), ", n/7)},
		{name: "broken lines of calls", in: "<function_calls>\n" + strings.Repeat("a(x 1)\n", n/7)},
		{name: "broken JSON lines", in: "<tool_calls>\n" + strings.Repeat("{\"a\", \n", n/7)},
		{name: "kimi sections in reasoning", in: "<think>" + strings.Repeat("<|tool_calls_section_begin|>", n/28)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan Extraction)
			go func() { done <- Extract(tt.in, tt.opts) }()
			select {
			case ex := <-done:
				checkExtraction(t, tt.in, ex)
			case <-timeAfter(t):
				t.Fatal("Extract took too long: not linear")
			}
		})
	}
}

// memberRole is the lists nameKeys and argsKeys written as a switch: they must agree.
func TestMemberRoleMatchesKeyLists(t *testing.T) {
	for want, k := range nameKeys {
		if i, isName, ok := memberRole(k); !ok || !isName || i != want {
			t.Errorf("memberRole(%s) = %d, %v, %v; want name rank %d", k, i, isName, ok, want)
		}
	}
	for want, k := range argsKeys {
		if i, isName, ok := memberRole(k); !ok || isName || i != want {
			t.Errorf("memberRole(%s) = %d, %v, %v; want arguments rank %d", k, i, isName, ok, want)
		}
	}
	for _, k := range []string{`"type"`, `"id"`, `name`, `""`} {
		if _, _, ok := memberRole(k); ok {
			t.Errorf("memberRole(%s) claims the key", k)
		}
	}
}

// The calls' arguments share one allocation; each must stay its own.
func TestArgumentsDoNotShareCapacity(t *testing.T) {
	ex := Extract(`<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call><tool_call>{"name": "b", "arguments": {"y": 2}}</tool_call>`, nil)
	if len(ex.Calls) != 2 {
		t.Fatalf("calls: %+v", ex.Calls)
	}
	_ = append(ex.Calls[0].Arguments, `garbage`...)
	if got := string(ex.Calls[1].Arguments); got != `{"y": 2}` {
		t.Fatalf("appending to the first call's arguments changed the second's: %s", got)
	}
	ex.Calls[0].Arguments[1] = 'X'
	if got := string(ex.Calls[1].Arguments); got != `{"y": 2}` {
		t.Fatalf("writing the first call's arguments changed the second's: %s", got)
	}
}

func TestLastPath(t *testing.T) {
	for in, want := range map[string]string{
		`{"issue_summary":"Login fails"}`:   "issue_summary",
		`{"a":1,"b":{"c":[1,2,{"d":"x"}]}}`: "b.c[2].d",
		`{"a":1,"b":null}`:                  "b",
		`{"a":[1,2]}`:                       "a[1]",
		`{"a":{"b":1},"c":[]}`:              "c",
		`{}`:                                "",
		`{"tool_name":"x","parameters":{"r":"1.5"}}`: "parameters.r",
	} {
		if got := lastPath(json.RawMessage(in)); got != want {
			t.Errorf("lastPath(%s) = %q, want %q", in, got, want)
		}
	}
}
