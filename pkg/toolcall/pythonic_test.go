package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPythonicStrings: a pythonic call's strings are Python's literals, read as Python
// reads them (vLLM's LFM2 parser takes them through Python's ast).
func TestPythonicStrings(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // the argument s; "" with wantErr
		wantErr  bool
	}{
		{name: "NUL byte in the literal", in: "exec(s='printf a\x00b')", want: "printf a\x00b"},
		{name: "hex and octal", in: `f(s='\x41\101\0')`, want: "AA\x00"},
		{name: "bell and vertical tab", in: `f(s='\a\v')`, want: "\a\v"},
		{name: "long unicode escape", in: `f(s='\U0001F680')`, want: "🚀"},
		{name: "unknown escape keeps the backslash", in: `f(s='a\,b')`, want: `a\,b`},
		{name: "escaped quote", in: `f(s='Martha\'s')`, want: "Martha's"},
		{name: "line continued", in: "f(s='one \\\ntwo')", want: "one two"},
		{name: "named character", in: `f(s='\N{BULLET}')`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := Extract("<|tool_call_start|>["+tt.in+"]<|tool_call_end|>", nil)
			if len(ex.Calls) != 1 {
				t.Fatalf("got %d calls, want 1", len(ex.Calls))
			}
			c := ex.Calls[0]
			if tt.wantErr {
				if c.Err == nil {
					t.Fatalf("got arguments %s, want a parse_error", c.Arguments)
				}
				return
			}
			if c.Err != nil {
				t.Fatal(c.Err)
			}
			var got struct{ S *string }
			if err := json.Unmarshal(c.Arguments, &got); err != nil || got.S == nil {
				t.Fatalf("arguments %s: %v", c.Arguments, err)
			}
			if *got.S != tt.want {
				t.Errorf("s = %q, want %q", *got.S, tt.want)
			}
		})
	}
}

// pyRepr writes s as a Python string literal in quote q, escaping as Python's repr may:
// \xHH, \uXXXX or \UXXXXXXXX for control and other characters by choice of style.
func pyRepr(s string, q byte, style int) string {
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n' && style%2 == 0:
			b.WriteString(`\n`)
		case r < ' ' || r == 0x7f:
			if style%3 == 0 {
				fmt.Fprintf(&b, `\%03o`, r) // three digits: a digit after it is text
			} else {
				fmt.Fprintf(&b, `\x%02x`, r)
			}
		case r > 0xffff && style%2 == 1:
			fmt.Fprintf(&b, `\U%08x`, r)
		case r > 0x7f && r <= 0xffff && style%5 == 0:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// FuzzPythonString: any text written as a Python string literal, in either quote and
// any escaping style, comes back from a pythonic call as that text.
func FuzzPythonString(f *testing.F) {
	f.Add("printf a\x00b", false, 0)
	f.Add("Martha's \"cool\" C:\\dir\\new", true, 1)
	f.Add("emoji 🚀, tab\t, bell\a", false, 3)
	f.Add("line one\nline two", true, 2)
	f.Fuzz(func(t *testing.T, s string, double bool, style int) {
		if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
			t.Skip()
		}
		q := byte('\'')
		if double {
			q = '"'
		}
		lit := pyRepr(s, q, style&0xff)
		text := "<|tool_call_start|>[f(s=" + lit + ")]<|tool_call_end|>"
		ex := Extract(text, nil)
		if len(ex.Calls) != 1 || ex.Calls[0].Err != nil {
			t.Fatalf("Extract(%q) = %+v, want one call", text, ex.Calls)
		}
		var got struct{ S *string }
		if err := json.Unmarshal(ex.Calls[0].Arguments, &got); err != nil || got.S == nil {
			t.Fatalf("Extract(%q): arguments %s: %v", text, ex.Calls[0].Arguments, err)
		}
		if *got.S != s {
			t.Fatalf("Extract(%q): s = %q, want %q", text, *got.S, s)
		}
	})
}
