package toolcall

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for the value grammars of the token- and tag-quoted formats: a value is
// what the model wrote between its delimiters, byte for byte, whatever it holds.

// FuzzGemmaStrings: two strings quoted by Gemma's token, with or without a comma and
// spaces between them, come back as the two strings written — never one made of both.
func FuzzGemmaStrings(f *testing.F) {
	f.Add("Paris", `He said "hi"`, ",", false)
	f.Add("ana@example.com", "Q3 report", "", true)
	f.Add(`C:\dir\`, "a\nb", " ", false)
	f.Add(`"`, `", b:"`, "\n", true)
	f.Add("0", "{", " ", true)
	f.Fuzz(func(t *testing.T, a, b, sep string, gemma4 bool) {
		open, q, close := "<start_function_call>", "<escape>", "<end_function_call>"
		format := FormatFunctionGemma
		if gemma4 {
			open, q, close, format = "<|tool_call>", `<|"|>`, "<tool_call|>", FormatGemma4
		}
		if strings.Trim(sep, " \n\t,") != "" || strings.Count(sep, ",") > 1 {
			t.Skip()
		}
		for _, s := range []string{a, b} {
			if !utf8.ValidString(s) || strings.Contains(s, q) || strings.Contains(s, close) ||
				strings.Contains(s, "<") || strings.ContainsRune(s, 0) {
				t.Skip() // a marker inside a value is another test's
			}
		}
		text := open + "call:f{x:" + q + a + q + sep + "y:" + q + b + q + "}" + close
		ex := Extract(text, &Options{Format: format})
		if len(ex.Calls) != 1 || ex.Calls[0].Err != nil {
			t.Fatalf("Extract(%q) = %+v, want one call", text, ex.Calls)
		}
		var got map[string]string
		if err := json.Unmarshal(ex.Calls[0].Arguments, &got); err != nil {
			t.Fatalf("Extract(%q): arguments %s: %v", text, ex.Calls[0].Arguments, err)
		}
		if len(got) != 2 || got["x"] != a || got["y"] != b {
			t.Fatalf("Extract(%q): arguments %s, want x=%q y=%q", text, ex.Calls[0].Arguments, a, b)
		}
	})
}

// FuzzInlineXMLValue: a string parameter of Step-3 or MiniMax-M2, which write values
// inline, comes back as written — its spaces and line breaks too; and null is null
// where the schema allows it, the text "null" where it allows a string only.
func FuzzInlineXMLValue(f *testing.F) {
	f.Add("return 1\n", false, false)
	f.Add("    if x:\n        return 1\n", true, false)
	f.Add("null", true, true)
	f.Add(" null\n", true, false)
	f.Add("hello\u00a0", false, true)
	f.Fuzz(func(t *testing.T, v string, minimax, nullable bool) {
		if !utf8.ValidString(v) || strings.ContainsAny(v, "<\x00") {
			t.Skip() // a tag inside a value is another test's
		}
		typ := `"string"`
		if nullable {
			typ = `["string", "null"]`
		}
		schemas := map[string]json.RawMessage{"edit": json.RawMessage(`{"type": "object", "properties": {"text": {"type": ` + typ + `}}}`)}
		text := "<｜tool_calls_begin｜><｜tool_call_begin｜>" + `<steptml:invoke name="edit"><steptml:parameter name="text">` + v +
			"</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"
		format := FormatStep3
		if minimax {
			text = `<minimax:tool_call><invoke name="edit"><parameter name="text">` + v + "</parameter></invoke></minimax:tool_call>"
			format = FormatMiniMax
		}
		ex := Extract(text, &Options{Format: format, Schemas: schemas})
		if len(ex.Calls) != 1 || ex.Calls[0].Err != nil {
			t.Fatalf("Extract(%q) = %+v, want one call", text, ex.Calls)
		}
		var got map[string]*string
		if err := json.Unmarshal(ex.Calls[0].Arguments, &got); err != nil {
			t.Fatalf("Extract(%q): arguments %s: %v", text, ex.Calls[0].Arguments, err)
		}
		t2 := strings.TrimSpace(v)
		wantNull := minimax && nullable && (t2 == "null" || t2 == "None")
		switch p := got["text"]; {
		case wantNull && p != nil:
			t.Fatalf("Extract(%q): text %q, want null", text, *p)
		case !wantNull && (p == nil || *p != v):
			t.Fatalf("Extract(%q): arguments %s, want text %q", text, ex.Calls[0].Arguments, v)
		}
	})
}
