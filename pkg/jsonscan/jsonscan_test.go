package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func valid(d []byte) bool { return Check(d, MaxDepth, Lax) == OK }

// FuzzScan holds Lax scanning, AppendCompact and AppendIndent to encoding/json's Valid,
// Compact and Indent, and Strict to Lax with valid UTF-8 required; strings and byte
// slices scan alike.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"a": [1, 2.5e-3, -0, {"b": "ü <&> \u2028 \ud83d\ude00"}], "c": {}, "d": [ ], "e": true, "f": false, "g": null}`,
		"  \n[ ]\t", `"\"\\\/\b\f\n\r\t"`, `{"a":}`, `[1,]`, `{"a" 1}`, `01`, `1.`, `-`, `1e`, `1E+2`, `tru`, `nul`,
		"\"\xff\xfe\"", "\"\x01\"", `"\x"`, `"\u12G4"`, `[[[[]]]]`, `{"a":{"b":{"c":[{}]}}}`, `1 2`, ``, ` `, `{} `,
		`[1 2]`, `{"a":1,}`, `{,}`, `[,1]`, `"abc`, `{"a":1}}`, `]`, `"abcdefghijklmnopq\"rstuvwxyz"`, "[\"é\xe9\"]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		ok := json.Valid(d)
		if got := valid(d); got != ok {
			t.Fatalf("Check(%q, Lax) = %v, json.Valid says %v", d, got, ok)
		}
		if got := Check(string(d), MaxDepth, Lax) == OK; got != ok {
			t.Fatalf("Check(string %q, Lax) = %v, json.Valid says %v", d, got, ok)
		}
		if got, want := Check(d, MaxDepth, Strict) == OK, ok && !hasBadUTF8(d); got != want {
			t.Fatalf("Check(%q, Strict) = %v, want %v", d, got, want)
		}
		// Each value Value finds inside is one json.Valid accepts.
		if end, res := Value(d, 0, MaxDepth, Lax); res == OK && !json.Valid(d[:end]) {
			t.Fatalf("Value(%q) took %q, which json.Valid refuses", d, d[:end])
		}
		if !ok {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, d); err != nil {
			t.Fatal(err)
		}
		if got := AppendCompact([]byte("x"), d); string(got) != "x"+want.String() {
			t.Fatalf("AppendCompact(%q) = %q, json.Compact gives %q", d, got[1:], want.Bytes())
		}
		want.Reset()
		v := bytes.Trim(d, " \t\r\n")
		if err := json.Indent(&want, v, ">", "\t"); err != nil {
			t.Fatal(err)
		}
		if got := AppendIndent([]byte("x"), v, ">", "\t"); string(got) != "x"+want.String() {
			t.Fatalf("AppendIndent(%q) = %q, json.Indent gives %q", d, got[1:], want.Bytes())
		}
	})
}

// hasBadUTF8 reports whether a string of d holds invalid UTF-8 (d being valid JSON).
func hasBadUTF8(d []byte) bool {
	for i := 0; i < len(d); i++ {
		if d[i] == '"' {
			end := String(d, i+1, Lax)
			if !utf8.Valid(d[i:end]) {
				return true
			}
			i = end - 1
		}
	}
	return false
}

// TestDepth: nesting is valid up to the limit and not beyond it, empty innermost
// containers included, as encoding/json has it at its own limit.
func TestDepth(t *testing.T) {
	for _, n := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		for _, inner := range []string{"", "1", `{}`, `{"a":[]}`} {
			d := []byte(strings.Repeat("[", n) + inner + strings.Repeat("]", n))
			if got, want := valid(d), json.Valid(d); got != want {
				t.Errorf("depth %d around %q: Check %v, json.Valid %v", n, inner, got, want)
			}
		}
	}
	if res := Check(strings.Repeat("[", MaxDepth+1)+strings.Repeat("]", MaxDepth+1), MaxDepth, Strict); res != TooDeep {
		t.Errorf("a value nested deeper than the limit: %v, want TooDeep", res)
	}
	if res := Check(`[[1]]`, 1, Strict); res != TooDeep {
		t.Errorf("[[1]] at a limit of 1: %v, want TooDeep", res)
	}
	if res := Check(`[1]`, 1, Strict); res != OK {
		t.Errorf("[1] at a limit of 1: %v, want OK", res)
	}
}

var sample = []byte(`{"solved_for":"t","value":7.8125,"unit":"mm","answer":"t = 7.8125 mm","method":"thin-walled cylinder: t = p·d / (2·σ)","inputs":{"p":{"value":25,"unit":"bar"},"d":{"value":100,"unit":"mm"},"sigma":{"value":160,"unit":"MPa"}},"notes":["hoop stress governs","no corrosion allowance"]}`)

func BenchmarkScan(b *testing.B) {
	b.Run("Valid/encoding-json", func(b *testing.B) {
		for b.Loop() {
			_ = json.Valid(sample)
		}
	})
	b.Run("Valid/Check", func(b *testing.B) {
		for b.Loop() {
			_ = valid(sample)
		}
	})
	var indented bytes.Buffer
	_ = json.Indent(&indented, sample, "  ", "  ")
	b.Run("Indent/encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			_ = json.Indent(&buf, sample, "  ", "  ")
		}
	})
	b.Run("Indent/AppendIndent", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			_ = valid(sample)
			buf = AppendIndent(buf[:0], sample, "  ", "  ")
		}
	})
	b.Run("Compact/encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			_ = json.Compact(&buf, indented.Bytes())
		}
	})
	b.Run("Compact/AppendCompact", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			_ = valid(indented.Bytes())
			buf = AppendCompact(buf[:0], indented.Bytes())
		}
	})
}
