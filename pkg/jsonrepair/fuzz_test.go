package jsonrepair

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/toolbus/toolbus/internal/corpus"
)

// The seed corpus of FuzzRepair is testdata/fuzz/FuzzRepair/ (every input of the txtar
// corpus, written by TestRepairCorpus -update) plus the inputs below; FuzzReader's is
// the txtar corpus itself.

func FuzzRepair(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `{a: 'b',}`, `[1, 2`, `{"a": "x" + "y"}`, "```json\n{}\n```", `"\u00e9"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, repairs, err := Repair(s)
		if err != nil {
			if out != nil || repairs != nil {
				t.Fatalf("error %v with output %q %v", err, out, repairs)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not a *SyntaxError", err)
			}
			if se.Msg == msgRepairBug {
				t.Fatalf("Repair(%q) wrote invalid JSON", s)
			}
			return
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("Repair(%q) = %q, not valid JSON", s, out)
		}
		if json.Valid([]byte(s)) && utf8.ValidString(s) && (string(out) != s || repairs != nil) {
			t.Fatalf("Repair(%q) changed valid JSON: %q %v", s, out, repairs)
		}
		again, repairs2, err := Repair(string(out))
		if err != nil || !bytes.Equal(again, out) || repairs2 != nil {
			t.Fatalf("Repair is not idempotent on %q: %q %v %v", out, again, repairs2, err)
		}
	})
}

// FuzzReader reads a value at every offset a text gives it, as a value and as the
// arguments of a call.
func FuzzReader(f *testing.F) {
	for _, s := range corpus.Inputs(f, repairCorpus) {
		f.Add(s, uint16(0), false)
	}
	f.Add(`f(a=1, b=[2, 'x'), c=True)`, uint16(4), true)
	f.Fuzz(func(t *testing.T, s string, from uint16, args bool) {
		if len(s) == 0 {
			return
		}
		at := int(from) % len(s)
		rd := Reader{MaxDepth: 20, Args: args}
		v, end, _, ok := rd.Value(s, at)
		checkRead(t, &rd, s, at, []byte(v), end, ok)
		prefix := []byte("[0,")
		out, end, _, ok := rd.AppendValue(prefix, s, at)
		if ok && !bytes.HasPrefix(out, prefix) {
			t.Fatalf("AppendValue(%q, %d) lost what it appended to: %q", s, at, out)
		}
		checkRead(t, &rd, s, at, out[len(prefix):], end, ok)
	})
}

// checkRead checks what a Reader's read of s at from must satisfy.
func checkRead(t *testing.T, rd *Reader, s string, from int, v []byte, end int, ok bool) {
	t.Helper()
	se := rd.Err()
	if !ok {
		if se == nil || se.Msg == msgRepairBug {
			t.Fatalf("read of %q at %d failed with %v", s, from, se)
		}
		if stop := rd.Stopped(); stop < se.Offset || stop > len(s) {
			t.Fatalf("read of %q at %d stopped at %d, failed at %d", s, from, stop, se.Offset)
		}
		return
	}
	if se != nil || !json.Valid(v) || !utf8.Valid(v) {
		t.Fatalf("read of %q at %d = %q, %v", s, from, v, se)
	}
	if end <= from || end > len(s) || rd.Stopped() != end {
		t.Fatalf("read of %q at %d ended at %d (stopped %d)", s, from, end, rd.Stopped())
	}
}
