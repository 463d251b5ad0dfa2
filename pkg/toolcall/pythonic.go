package toolcall

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/jsonscan"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Pythonic calls: get_weather(city='Paris', days=3), alone, in a list, or one per line.

// pythonNative are the "repairs" that are plain Python syntax in a pythonic call.
const pythonNative = fixSet(jsonrepair.SingleQuotes | jsonrepair.PythonLiterals | jsonrepair.TrailingComma)

// pyCall reads NAME(key=value, …) at s[i]. ok is false when s[i] does not start a call
// at all; a call that starts but cannot be read has p.err set, and end is where the
// problem is.
func (x *extractor) pyCall(s string, i int) (p parsed, end int, ok bool) {
	j := i
	for j < len(s) && (isWordByte(s[j]) || s[j] == '.' || s[j] == '-') {
		j++
	}
	if j == i || !isLetter(s[i]) && s[i] != '_' {
		return parsed{}, i, false
	}
	name := strings.TrimSuffix(s[i:j], ".call") // Llama's built-ins: brave_search.call(query="…")
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	if j >= len(s) || s[j] != '(' {
		return parsed{}, i, false
	}
	// The keyword arguments are read here, their values by the repairer, as the
	// arguments of a call: a ')' ends them.
	rd := jsonrepair.Reader{MaxDepth: x.o.MaxDepth, Args: true, Python: true}
	out := make([]byte, 0, min(len(s)-j-1, 1<<10)+16)
	out = append(out, '{')
	var fixes fixSet
	noJSON := "" // why a value has no JSON equivalent
	pos := j + 1
	space := func() {
		var f jsonrepair.Repairs
		pos, f = jsonrepair.SkipSpace(s, pos)
		fixes |= fixSet(f)
	}
	for n := 0; ; {
		space()
		if pos >= len(s) {
			fixes |= fixSet(jsonrepair.UnclosedObject)
			break
		}
		c := s[pos]
		if c == ')' {
			pos++
			break
		}
		if c == ',' {
			pos++
			continue
		}
		ks := pos
		for pos < len(s) && isWordByte(s[pos]) {
			pos++
		}
		key := s[ks:pos]
		space()
		if key == "" || jsonscan.IsDigit(key[0]) || pos >= len(s) || s[pos] != '=' && s[pos] != ':' {
			at := ks
			if key != "" {
				at = pos
			}
			if x.quiet {
				return parsed{name: name, err: "not a call"}, at, true
			}
			se := jsonrepair.NewSyntaxError(s, at, "expected a keyword argument name=value or ')', found "+jsonrepair.Describe(s, at))
			return parsed{name: name, err: fmt.Sprintf("in %s(…) at line %d, column %d: %s", messages.EchoName(name), se.Line, se.Column, se.Msg), cause: se}, at, true
		}
		pos++
		space()
		if n > 0 {
			out = append(out, ',')
		}
		out = appendString(out, key)
		out = append(out, ':')
		if pos >= len(s) || s[pos] == ',' || s[pos] == ')' {
			fixes |= fixSet(jsonrepair.MissingValue)
			if pos >= len(s) {
				fixes |= fixSet(jsonrepair.TruncatedValue) // the text ended before the value began
			}
			out = append(out, "null"...)
			n++
			continue
		}
		valueAt, outAt := pos, len(out)
		var repairs jsonrepair.Repairs
		var ok bool
		if out, pos, repairs, ok = rd.AppendValue(out, s, valueAt); !ok {
			if x.quiet {
				return parsed{name: name, err: "not a call"}, rd.Stopped(), true
			}
			se := rd.Err()
			return parsed{name: name, err: fmt.Sprintf("in %s(…): %s", messages.EchoName(name), syntaxMessage(se)), cause: se}, se.Offset, true
		}
		if num, ok := leadingZeroNumber(s[valueAt:pos]); ok && x.schemaFor(name).prop(key).typeName() != "string" {
			// month=07: not Python, but what the model means is 7 (as vLLM reads it),
			// unless the tool wants a string.
			out = append(out[:outAt], num...)
		} else {
			fixes |= fixSet(repairs)
			if what := noJSONEquivalent(s[valueAt:pos], out[outAt:]); what != "" && noJSON == "" {
				noJSON = fmt.Sprintf("in %s(…), %s=%s is %s, which JSON cannot hold; pass it as a string or a number JSON can hold",
					messages.EchoName(name), messages.EchoName(key), messages.EchoArguments(s[valueAt:pos]), what)
			}
		}
		n++
	}
	if noJSON != "" {
		// The call was read to its end: it fails alone, and the calls after it are read.
		return parsed{name: name, err: noJSON, whole: true}, pos, true
	}
	out = append(out, '}')
	return parsed{name: name, args: out, fixes: fixes &^ pythonNative}, pos, true
}

// pyList reads [call, call, …] at s[i]. ok is false when it is not a list of calls.
func (x *extractor) pyList(s string, i int) (calls []parsed, end int, ok bool) {
	pos := i + 1
	for {
		for pos < len(s) && (s[pos] <= ' ' || s[pos] == ',') {
			pos++
		}
		if pos >= len(s) {
			return calls, pos, len(calls) > 0
		}
		if s[pos] == ']' {
			return calls, pos + 1, len(calls) > 0
		}
		p, e, ok := x.pyCall(s, pos)
		if !ok {
			return nil, pos, false
		}
		calls = append(calls, p)
		if p.err != "" && !p.whole {
			// The call fails alone when another follows it: "), NAME(".
			if next := nextPyCall(s, e); next >= 0 && !x.quiet && len(calls) < overflowCap*x.o.MaxCalls {
				pos = next
				continue
			}
			return calls, e, true
		}
		pos = e
	}
}

// nextPyCall returns where the next call of a list starts after a call that could not be
// read at s[from]: at the NAME of the first "), NAME(" after it; -1 when there is none.
func nextPyCall(s string, from int) int {
	for i := from; i < len(s); i++ {
		j := strings.IndexByte(s[i:], ')')
		if j < 0 {
			return -1
		}
		i += j
		k := i + 1
		for k < len(s) && (s[k] == ' ' || s[k] == '\n' || s[k] == '\t') {
			k++
		}
		if k >= len(s) || s[k] != ',' {
			continue
		}
		k++
		for k < len(s) && (s[k] == ' ' || s[k] == '\n' || s[k] == '\t') {
			k++
		}
		if startsPyCall(s, k) {
			return k
		}
	}
	return -1
}

// startsPyCall reports whether s[i:] starts with NAME(.
func startsPyCall(s string, i int) bool {
	n := i
	for n < len(s) && (isWordByte(s[n]) || s[n] == '.') {
		n++
	}
	return n > i && n < len(s) && s[n] == '(' && (isLetter(s[i]) || s[i] == '_')
}

// noJSONEquivalent says what a pythonic value is when it has no JSON equivalent: a
// bytes literal (b'…'), a number beyond float64 (1e999). src is the value as written,
// out as the repairer wrote it.
func noJSONEquivalent(src string, out []byte) string {
	src = strings.TrimSpace(src)
	if len(src) >= 3 && (src[0] == 'b' || src[0] == 'B') && (src[1] == '\'' || src[1] == '"') ||
		len(src) >= 4 && strings.ContainsRune("rRbB", rune(src[0])) && strings.ContainsRune("rRbB", rune(src[1])) && (src[2] == '\'' || src[2] == '"') {
		if strings.ContainsAny(src[:2], "bB") {
			return "a Python bytes literal"
		}
	}
	if len(out) > 0 && (out[0] == '-' || jsonscan.IsDigit(out[0])) {
		if f, err := strconv.ParseFloat(string(out), 64); err != nil || math.IsInf(f, 0) {
			return "a number too large for a 64-bit float"
		}
	}
	return ""
}

// pyCalls reads the pythonic calls in text[from:to] as calls of block b: a list, or
// calls one per line.
func (x *extractor) pyCalls(b blk, from, to int) {
	s := x.text[:to]
	if s[from] == '[' {
		calls, _, ok := x.pyList(s, from)
		if !ok {
			x.fail(b, "", nil, "expected a list of calls [TOOL_NAME(name=value, ...)], found %s", jsonrepair.Describe(s, from+1))
			return
		}
		for _, p := range calls {
			x.add(b, p)
		}
		return
	}
	pos := from
	for pos < to && x.overflow == 0 {
		p, e, ok := x.pyCall(s, pos)
		if !ok {
			x.fail(b, "", nil, "expected a call TOOL_NAME(name=value, ...), found %s", jsonrepair.Describe(s, pos))
			return
		}
		x.add(b, p)
		if p.err != "" && !p.whole {
			// The call fails alone: the calls on the lines after it are read.
			next := to
			for i := e; i < to; i++ {
				if s[i] == '\n' && startsPyCall(s[:to], i+1) {
					next = i + 1
					break
				}
			}
			if next == to {
				return
			}
			e = next
		}
		pos = e
		for pos < to && (s[pos] <= ' ' || s[pos] == ';' || s[pos] == ',') {
			pos++
		}
	}
}

// lfm2 reads LFM2's <|tool_call_start|>[NAME(key=value), …]<|tool_call_end|>. A call
// that cannot be read fails alone: the calls around it are read.
func (x *extractor) lfm2(at, limit int) (int, bool) {
	from := at + len(litText[litLFM2])
	bodyEnd, end, closed := x.blockEnd(from, limit, litLFM2, litKimiCallEnd)
	b := blk{format: FormatLFM2, start: at, end: end}
	if !closed {
		b.fixes |= fixUnclosedTag
	}
	ts, te := trimSpan(x.text, from, bodyEnd)
	switch {
	case ts == te:
		x.fail(b, "", nil, "the block is empty")
	case x.text[ts] == '{' || x.text[ts] == '[' && jsonAhead(x.text[:te], ts+1):
		x.jsonCalls(b, ts, te)
	case x.text[ts] == '[' && strings.TrimSpace(x.text[ts+1:te]) == "]":
		// [] or [ ]: no call
	default:
		x.pyCalls(b, ts, te)
	}
	return end, true
}

// leadingZeroNumber returns the number written with leading zeros in text (07, -007.5)
// as JSON (7, -7.5); ok is false for anything else.
func leadingZeroNumber(text string) (string, bool) {
	t := strings.TrimSpace(text)
	neg := strings.HasPrefix(t, "-")
	if neg {
		t = t[1:]
	}
	if len(t) < 2 || t[0] != '0' || !jsonscan.IsDigit(t[1]) {
		return "", false
	}
	digits := strings.TrimLeft(t, "0")
	if digits == "" || digits[0] == '.' {
		digits = "0" + digits
	}
	if jsonscan.Number(digits, 0) != len(digits) {
		return "", false
	}
	if neg {
		digits = "-" + digits
	}
	return digits, true
}
