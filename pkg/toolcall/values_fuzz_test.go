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
