package messages

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzScan holds scanValue, appendCompact and appendIndent to encoding/json's Valid,
// Compact and Indent.
func FuzzScan(f *testing.F) {
	for _, s := range []string{
		`{"a": [1, 2.5e-3, -0, {"b": "ü <&> \u2028 \ud83d\ude00"}], "c": {}, "d": [ ], "e": true, "f": false, "g": null}`,
		"  \n[ ]\t", `"\"\\\/\b\f\n\r\t"`, `{"a":}`, `[1,]`, `{"a" 1}`, `01`, `1.`, `-`, `1e`, `1E+2`, `tru`, `nul`,
		"\"\xff\xfe\"", "\"\x01\"", `"\x"`, `"\u12G4"`, `[[[[]]]]`, `{"a":{"b":{"c":[{}]}}}`, `1 2`, ``, ` `, `{} `,
		`[1 2]`, `{"a":1,}`, `{,}`, `[,1]`, `"abc`, `{"a":1}}`, `]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		valid := json.Valid(d)
		if got := Valid(d); got != valid {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", d, got, valid)
		}
		// Each value the scanner finds inside is one json.Valid accepts.
		if end, ok := scanValue(d, skipSpace(d, 0)); ok && !json.Valid(d[skipSpace(d, 0):end]) {
			t.Fatalf("scanValue(%q) took %q, which json.Valid refuses", d, d[:end])
		}
		if !valid {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, d); err != nil {
			t.Fatal(err)
		}
		if got := appendCompact([]byte("x"), d); string(got) != "x"+want.String() {
			t.Fatalf("appendCompact(%q) = %q, json.Compact gives %q", d, got[1:], want.Bytes())
		}
		want.Reset()
		v := bytes.Trim(d, " \t\r\n")
		if err := json.Indent(&want, v, ">", "\t"); err != nil {
			t.Fatal(err)
		}
		if got := appendIndent([]byte("x"), v, ">", "\t"); string(got) != "x"+want.String() {
			t.Fatalf("appendIndent(%q) = %q, json.Indent gives %q", d, got[1:], want.Bytes())
		}
	})
}

// TestScanDepth: nesting is valid up to encoding/json's limit and not beyond it, empty
// innermost containers included.
func TestScanDepth(t *testing.T) {
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, inner := range []string{"", "1", `{}`} {
			d := []byte(strings.Repeat("[", n) + inner + strings.Repeat("]", n))
			if got, want := Valid(d), json.Valid(d); got != want {
				t.Errorf("depth %d around %q: validJSON %v, json.Valid %v", n, inner, got, want)
			}
		}
	}
	if Valid([]byte(strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1))) {
		t.Error("a value nested deeper than encoding/json's limit is valid")
	}
}

var scanSample = []byte(`{"solved_for":"t","value":7.8125,"unit":"mm","answer":"t = 7.8125 mm","method":"thin-walled cylinder: t = p·d / (2·σ)","inputs":{"p":{"value":25,"unit":"bar"},"d":{"value":100,"unit":"mm"},"sigma":{"value":160,"unit":"MPa"}},"notes":["hoop stress governs","no corrosion allowance"]}`)

func BenchmarkScan(b *testing.B) {
	b.Run("Valid/encoding-json", func(b *testing.B) {
		for b.Loop() {
			_ = json.Valid(scanSample)
		}
	})
	b.Run("Valid/scanValue", func(b *testing.B) {
		for b.Loop() {
			_ = Valid(scanSample)
		}
	})
	var indented bytes.Buffer
	_ = json.Indent(&indented, scanSample, "  ", "  ")
	b.Run("Indent/encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			_ = json.Indent(&buf, scanSample, "  ", "  ")
		}
	})
	b.Run("Indent/appendIndent", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			_ = Valid(scanSample)
			buf = appendIndent(buf[:0], scanSample, "  ", "  ")
		}
	})
	b.Run("Compact/encoding-json", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			_ = json.Compact(&buf, indented.Bytes())
		}
	})
	b.Run("Compact/appendCompact", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			_ = Valid(indented.Bytes())
			buf = appendCompact(buf[:0], indented.Bytes())
		}
	})
}
