package jsonrepair

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolbus/toolbus/internal/corpus"
	"github.com/toolbus/toolbus/pkg/jsonscan"
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
		checkEscapes(t, s, out, repairSet(repairs))
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
	f.Add(`f(a='\x41\0\101\N{X}', b='C:\new')`, uint16(3), true)
	f.Fuzz(func(t *testing.T, s string, from uint16, args bool) {
		if len(s) == 0 {
			return
		}
		at := int(from) % len(s)
		// An odd from reads a call's arguments as Python literals, as pythonic calls do.
		// from%3 == 2 reads it as a call's arguments, refusing what reads two ways.
		rd := Reader{MaxDepth: 20, Args: args, Python: args && from%2 == 1, Arguments: from%3 == 2}
		v, end, repairs, ok := rd.Value(s, at)
		checkRead(t, &rd, s, at, []byte(v), end, repairs, ok)
		prefix := []byte("[0,")
		out, end, repairs, ok := rd.AppendValue(prefix, s, at)
		if ok && !bytes.HasPrefix(out, prefix) {
			t.Fatalf("AppendValue(%q, %d) lost what it appended to: %q", s, at, out)
		}
		checkRead(t, &rd, s, at, out[len(prefix):], end, repairs, ok)
	})
}

// checkRead checks what a Reader's read of s at from must satisfy.
func checkRead(t *testing.T, rd *Reader, s string, from int, v []byte, end int, repairs Repairs, ok bool) {
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
	checkEscapes(t, s[from:end], v, repairs)
}

// checkEscapes checks that out, the JSON a repair made of the text in, lost none of
// in's \u escapes, where a repairer that fails to read an escape and goes on drops
// it and the text after it ({"a": x\u"} as {"a":"x"}). Each \u of in is in the
// strings of out, keys and values, decoded: a \u with four hex digits (no surrogate)
// as its character or as the six characters written (a backslash that is a
// character: "\\u00e9", C:\u1234 in a path, x\u00e9 unquoted); a \u with fewer
// hex digits and then another character, which no decoding makes a character, as the
// characters written, or the repair fails. The text of an escape counts as often as in
// holds it, so that one kept cannot stand for another dropped. Text that in holds
// around or beside the value, which a repair drops on purpose (prose, comments, a
// fence, a value the text ends in), exempts it: those repairs say so.
func checkEscapes(t *testing.T, in string, out []byte, repairs Repairs) {
	t.Helper()
	if repairs&(LeadingText|TrailingText|Comments|CodeFence|TruncatedValue) != 0 || !strings.Contains(in, `\u`) {
		return
	}
	want := map[string]int{} // the text of each escape: how often in holds it
	for i := strings.Index(in, `\u`); i >= 0; i = indexFrom(in, `\u`, i+1) {
		j := i + 2
		for j < len(in) && j < i+6 && jsonscan.IsHex(in[j]) {
			j++
		}
		if j < i+6 && j == len(in) {
			continue // the text ends in it: a character cut off, or one to come
		}
		want[in[i:j]]++
	}
	var strs strings.Builder // out's strings, a NUL after each so that none runs into the next
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("repair of %q = %q: %v", in, out, err)
		}
		if str, ok := tok.(string); ok {
			strs.WriteString(str)
			strs.WriteByte(0)
		}
	}
	got := strs.String()
	for esc, n := range want {
		have := strings.Count(got, esc)
		if len(esc) == 6 {
			cp, _ := strconv.ParseUint(esc[2:], 16, 32)
			if utf8.ValidRune(rune(cp)) { // not a surrogate
				have += strings.Count(got, string(rune(cp)))
			} else {
				continue
			}
		}
		if have < n {
			t.Fatalf("repair of %q = %q lost %q: %d of %d kept", in, out, esc, have, n)
		}
	}
}

// indexFrom returns the index of the first sub in s at or after i, or -1.
func indexFrom(s, sub string, i int) int {
	if k := strings.Index(s[i:], sub); k >= 0 {
		return i + k
	}
	return -1
}

// repairSet is the set of the repairs Repair names.
func repairSet(names []string) Repairs {
	var set Repairs
	for _, name := range names {
		for i, n := range repairNames {
			if n == name {
				set |= 1 << i
			}
		}
	}
	return set
}
