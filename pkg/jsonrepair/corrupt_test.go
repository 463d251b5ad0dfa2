package jsonrepair

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The generated corruptions: valid tool arguments, each broken in one way a model
// breaks JSON, and the arguments that must come back.

// jsonWriter writes a value as JSON and records where its structural bytes are, so
// that a corruption can hit a quote, a comma or a colon that is syntax, never one inside
// a string.
type jsonWriter struct {
	b      strings.Builder
	style  int   // 0 compact, 1 spaced ({"a": 1, "b": 2}), 2 indented
	quotes []int // opening and closing quotes of keys and string values
	keyQ   [][2]int
	commas []int
	colons []int
	lits   [][2]int // true, false, null
	// ends[i] is the offset after the value of the i-th top-level member.
	ends []int
	// valueEnds are the closing quotes of string values (not keys); innerClosers the
	// ] and } of every array and object but the outermost.
	valueEnds, innerClosers []int
}

func (w *jsonWriter) str(s string) int {
	open := w.b.Len()
	w.quotes = append(w.quotes, open)
	b, _ := json.Marshal(s)
	// json.Marshal escapes <, > and & for HTML; a model writes them plainly.
	t := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(b))
	w.b.WriteString(t)
	w.quotes = append(w.quotes, w.b.Len()-1)
	return open
}

func (w *jsonWriter) newline(depth int) {
	if w.style == 2 {
		w.b.WriteString("\n" + strings.Repeat("  ", depth))
	}
}

func (w *jsonWriter) value(v any, depth int) {
	switch x := v.(type) {
	case nil, bool:
		start := w.b.Len()
		b, _ := json.Marshal(x)
		w.b.Write(b)
		w.lits = append(w.lits, [2]int{start, w.b.Len()})
	case float64:
		w.b.WriteString(strconv.FormatFloat(x, 'f', -1, 64))
	case string:
		w.str(x)
		w.valueEnds = append(w.valueEnds, w.b.Len()-1)
	case []any:
		w.b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.commas = append(w.commas, w.b.Len())
				w.b.WriteByte(',')
				if w.style == 1 {
					w.b.WriteByte(' ')
				}
			}
			w.newline(depth + 1)
			w.value(e, depth+1)
		}
		if len(x) > 0 {
			w.newline(depth)
		}
		if depth > 0 {
			w.innerClosers = append(w.innerClosers, w.b.Len())
		}
		w.b.WriteByte(']')
	case obj:
		w.b.WriteByte('{')
		for i, m := range x {
			if i > 0 {
				w.commas = append(w.commas, w.b.Len())
				w.b.WriteByte(',')
				if w.style == 1 {
					w.b.WriteByte(' ')
				}
			}
			w.newline(depth + 1)
			open := w.str(m.k)
			w.keyQ = append(w.keyQ, [2]int{open, w.b.Len() - 1})
			w.colons = append(w.colons, w.b.Len())
			w.b.WriteByte(':')
			if w.style > 0 {
				w.b.WriteByte(' ')
			}
			w.value(m.v, depth+1)
			if depth == 0 {
				w.ends = append(w.ends, w.b.Len())
			}
		}
		if len(x) > 0 {
			w.newline(depth)
		}
		if depth > 0 {
			w.innerClosers = append(w.innerClosers, w.b.Len())
		}
		w.b.WriteByte('}')
	}
}

// obj is an object with its members in order.
type obj []member

type member struct {
	k string
	v any
}

func (o obj) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.k)
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// The strings arguments hold: quotes, code, paths, Unicode, markup, JSON in a string.
var argStrings = []string{
	"Paris", "New York, NY", "hello world", "", " leading and trailing ",
	`He said "stop" twice`, `a "quoted" word, and another "one"`, "it's Tom's", `She wrote: 'yes'`,
	"for i in range(10):\n    print(i)", "if (a < b && c > d) { return x[0]; }",
	"SELECT name, email FROM users WHERE id = 42;", `grep -E "^[a-z]+$" file.txt`,
	`console.log("a, b: c");`, "def f(x):\n    return {'k': x}",
	"/usr/local/bin/toolbus", "./src/main.go", `C:\Users\ana\report.docx`, "~/notes/2024-01-01.md",
	"naïve café", "東京タワー", "Привет, мир", "emoji 🚀 and ✓", "½ cup, 3 °C",
	"<b>bold</b> & <i>it</i>", "https://example.com/a?b=1&c=2#frag", "user@example.com",
	"line one\nline two", "tab\tseparated", `{"nested": "json"}`, "[1, 2, 3]",
	"50%", "3.14", "true", "null", "O'Brien", "10:30", "a,b,c", "key: value",
}

var argKeys = []string{
	"path", "query", "city", "units", "limit", "verbose", "code", "language", "items",
	"options", "note", "timeout_s", "tags", "filter", "name", "content", "depth", "ids",
	"url", "matrix", "enabled", "threshold", "text", "pattern",
}

// genValue returns a random argument value; depth bounds the nesting.
func genValue(rng *rand.Rand, depth int) any {
	n := 9
	if depth >= 2 {
		n = 6
	}
	switch rng.IntN(n) {
	case 0, 1, 2:
		return argStrings[rng.IntN(len(argStrings))]
	case 3:
		return []float64{0, 1, 42, -7, 3.5, 1e-3, 100000, 2.25}[rng.IntN(8)]
	case 4:
		return []any{true, false, nil}[rng.IntN(3)]
	case 5:
		return float64(rng.IntN(1000))
	case 6, 7:
		a := make([]any, rng.IntN(4))
		for i := range a {
			a[i] = genValue(rng, depth+1)
		}
		return a
	default:
		return genObject(rng, depth+1, 1+rng.IntN(3))
	}
}

func genObject(rng *rand.Rand, depth, members int) obj {
	o := obj{}
	used := map[string]bool{}
	for len(o) < members {
		k := argKeys[rng.IntN(len(argKeys))]
		if used[k] {
			continue
		}
		used[k] = true
		o = append(o, member{k, genValue(rng, depth)})
	}
	return o
}

// corruption breaks the JSON w wrote; it returns the broken text and the arguments
// that must come back, or ok false when the text has nothing it can break.
type corruption struct {
	kind  string
	apply func(rng *rand.Rand, w *jsonWriter, args obj) (text string, want any, ok bool)
}

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

func deleteAt(s string, i int) string { return s[:i] + s[i+1:] }

var corruptions = []corruption{
	{"drop a quote", func(rng *rand.Rand, w *jsonWriter, args obj) (string, any, bool) {
		if len(w.quotes) == 0 {
			return "", nil, false
		}
		return deleteAt(w.b.String(), pick(rng, w.quotes)), args, true
	}},
	{"duplicate a quote", func(rng *rand.Rand, w *jsonWriter, args obj) (string, any, bool) {
		if len(w.quotes) == 0 {
			return "", nil, false
		}
		s, i := w.b.String(), pick(rng, w.quotes)
		return s[:i] + `"` + s[i:], args, true
	}},
	{"drop a comma", func(rng *rand.Rand, w *jsonWriter, args obj) (string, any, bool) {
		if len(w.commas) == 0 {
			return "", nil, false
		}
		return deleteAt(w.b.String(), pick(rng, w.commas)), args, true
	}},
	{"drop a colon", func(rng *rand.Rand, w *jsonWriter, args obj) (string, any, bool) {
		return deleteAt(w.b.String(), pick(rng, w.colons)), args, true
	}},
	{"single quotes", func(rng *rand.Rand, w *jsonWriter, args obj) (string, any, bool) {
		// As Python writes a dict: 'key': 'value', with \' inside and " unescaped.
		s := w.b.String()
		var b strings.Builder
		quote := map[int]bool{}
		for _, q := range w.quotes {
			quote[q] = true
		}
		inStr := false
		for i := 0; i < len(s); i++ {
			switch {
			case quote[i]:
				b.WriteByte('\'')
				inStr = !inStr
			case inStr && s[i] == '\\' && s[i+1] == '"':
				b.WriteByte('"')
				i++
			case inStr && s[i] == '\'':
				b.WriteString(`\'`)
			default:
				b.WriteByte(s[i])
			}
		}
		return b.String(), args, true
	}},
	{"Python literals", func(rng *rand.Rand, w *jsonWriter, args obj) (string, any, bool) {
		if len(w.lits) == 0 {
			return "", nil, false
		}
		s := w.b.String()
		var b strings.Builder
		last := 0
		for _, l := range w.lits {
			b.WriteString(s[last:l[0]])
			b.WriteString(map[string]string{"true": "True", "false": "False", "null": "None"}[s[l[0]:l[1]]])
			last = l[1]
		}
		b.WriteString(s[last:])
		return b.String(), args, true
	}},
	{"unquoted keys", func(rng *rand.Rand, w *jsonWriter, args obj) (string, any, bool) {
		s := w.b.String()
		var b strings.Builder
		last := 0
		for _, k := range w.keyQ {
			b.WriteString(s[last:k[0]])
			b.WriteString(s[k[0]+1 : k[1]]) // argKeys are identifiers
			last = k[1] + 1
		}
		b.WriteString(s[last:])
		return b.String(), args, true
	}},
	{"trailing garbage", func(rng *rand.Rand, w *jsonWriter, args obj) (string, any, bool) {
		tails := []string{" Let me know if you need anything else.", "\n```", "</s>", "<|eot_id|>",
			"\n\nI will now call the tool.", " // done", ";", "\n}"}
		return w.b.String() + pick(rng, tails), args, true
	}},
	{"cut after a complete value", func(rng *rand.Rand, w *jsonWriter, args obj) (string, any, bool) {
		if len(w.ends) < 2 {
			return "", nil, false
		}
		k := rng.IntN(len(w.ends) - 1) // never after the last: that leaves only the '}'
		s := w.b.String()[:w.ends[k]]
		if rng.IntN(2) == 0 {
			s += ","
		}
		return s, args[:k+1], true
	}},
}

type corruptCase struct {
	kind, in string
	want     any
}

// corruptCases builds n argument objects and breaks each in every way that applies.
func corruptCases(n int) []corruptCase {
	rng := rand.New(rand.NewPCG(17, 2026))
	var cases []corruptCase
	for i := 0; i < n; i++ {
		args := genObject(rng, 0, 1+rng.IntN(5))
		w := &jsonWriter{style: i % 3}
		w.value(args, 0)
		for _, c := range corruptions {
			text, want, ok := c.apply(rng, w, args)
			if !ok {
				continue
			}
			cases = append(cases, corruptCase{c.kind, text, want})
		}
	}
	return cases
}

func wantAnswer(t testing.TB, v any) repairAnswer {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return decodeAnswer(string(b))
}

// TestCorruptionRecovery breaks 300 valid argument objects in every way of corruptions
// and requires the original arguments back from RepairArguments: 95% or more in all,
// with the rate per kind logged (-v; README.md quotes them). Where toolbus
// answers an error, the call fails with a parse_error the model can act on; where it
// answers other arguments, a tool would run with them: those are counted too.
func TestCorruptionRecovery(t *testing.T) {
	type tally struct{ n, ok, wrong int }
	kinds := map[string]*tally{}
	var all tally
	var wrongs []string
	for _, c := range corruptCases(300) {
		k := kinds[c.kind]
		if k == nil {
			k = &tally{}
			kinds[c.kind] = k
		}
		k.n++
		all.n++
		got := repairAnswer{}
		if out, _, err := RepairArguments(c.in); err == nil {
			got = decodeAnswer(string(out))
		}
		switch {
		case sameAnswer(got, wantAnswer(t, c.want)):
			k.ok++
			all.ok++
		case got.ok:
			k.wrong++
			all.wrong++
			if len(wrongs) < 40 {
				wrongs = append(wrongs, fmt.Sprintf("%s: %q\n      got  %v", c.kind, c.in, got))
			}
		}
	}
	names := slices.Sorted(maps.Keys(kinds))
	var report strings.Builder
	fmt.Fprintf(&report, "| corruption | cases | recovered | other arguments |\n| --- | --- | --- | --- |\n")
	for _, name := range names {
		k := kinds[name]
		fmt.Fprintf(&report, "| %s | %d | %.1f%% | %.1f%% |\n", name, k.n, 100*float64(k.ok)/float64(k.n), 100*float64(k.wrong)/float64(k.n))
	}
	fmt.Fprintf(&report, "| **all** | %d | **%.1f%%** | %.1f%% |\n", all.n, 100*float64(all.ok)/float64(all.n), 100*float64(all.wrong)/float64(all.n))
	t.Logf("recovery per corruption:\n%s", report.String())
	if testing.Verbose() {
		for _, w := range wrongs {
			t.Log(w)
		}
	}
	if rate := float64(all.ok) / float64(all.n); rate < 0.95 {
		t.Errorf("recovered %.1f%% of the corrupted arguments (bar: 95%%)", 100*rate)
	}
}
