package toolcall

import (
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
)

// Gemma's formats: Gemma 4 writes <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>,
// FunctionGemma <start_function_call>call:NAME{key:<escape>text<escape>}<end_function_call>:
// an object with bare keys whose strings are quoted by a token instead of ". Gemma 3
// writes pythonic calls in a ```tool_code fence (barejson.go).

// gemmaQuote is the token that quotes a string in the format marker m opens.
func gemmaQuote(m lit) string {
	if m == litFunctionGemma {
		return "<escape>"
	}
	return `<|"|>`
}

// gemma reads one call that marker m opens at text[at].
func (x *extractor) gemma(m lit, at, limit int) (int, bool) {
	return x.gemmaCall(m, at, at+len(litText[m]), limit)
}

// gemmaCall reads the call of the format marker m opens whose block starts at text[at]
// and its body at text[from]: after the marker, or at a bare call:NAME{…}.
func (x *extractor) gemmaCall(m lit, at, from, limit int) (int, bool) {
	close, format := litGemma4End, FormatGemma4
	if m == litFunctionGemma {
		close, format = litFunctionGemmaEnd, FormatFunctionGemma
	}
	bodyEnd, end, closed := x.blockEnd(from, limit, m, close)
	if t := x.findBefore(litGemmaTurnEnd, from, bodyEnd); m == litGemma4 && t >= 0 {
		bodyEnd, end, closed = t, t+len(litText[litGemmaTurnEnd]), true // Gemma 4 may end the call with its turn
	}
	b := blk{format: format, start: at, end: end}
	if !closed {
		b.fixes |= fixUnclosedTag
	}
	s := x.text[:bodyEnd]
	i, _ := trimSpan(s, from, bodyEnd)
	if strings.HasPrefix(s[i:], ":call:") {
		i++ // <|tool_call>:call:NAME, a stray colon
	}
	if strings.HasPrefix(s[i:], "call:") {
		i += len("call:")
	}
	ns := i
	for i < bodyEnd && (isWordByte(s[i]) || s[i] == '-' || s[i] == '.') {
		i++
	}
	name := s[ns:i]
	i, _ = trimSpan(s, i, bodyEnd)
	switch {
	case name == "":
		x.fail(b, "", nil, "expected call:TOOL_NAME{…}, found %s", jsonrepair.Describe(s, ns))
	case i >= bodyEnd:
		x.add(b, parsed{name: name})
	case s[i] != '{':
		x.fail(b, name, nil, "expected the arguments {key:value, …} after the tool name, found %s", jsonrepair.Describe(s, i))
	default:
		args := unquoteGemma(s[i:bodyEnd], gemmaQuote(m))
		v, _, fixes, err := x.repairValue(args, 0)
		if err != nil {
			x.fail(b, name, err, "%s", syntaxMessage(err))
			break
		}
		// Bare keys are the format, not a repair.
		x.add(b, parsed{name: name, args: []byte(v), fixes: fixes &^ fixSet(jsonrepair.UnquotedKeys|jsonrepair.TrailingText)})
	}
	return end, true
}

// unquoteGemma rewrites text whose strings are quoted by the token q as JSON-like text:
// each quoted string becomes a JSON string (a string the text ends in stays open, for
// the repairer to see the cut).
func unquoteGemma(text, q string) string {
	if !strings.Contains(text, q) {
		return text
	}
	var b []byte
	for {
		i := strings.Index(text, q)
		if i < 0 {
			break
		}
		b = append(b, text[:i]...)
		text = text[i+len(q):]
		j := strings.Index(text, q)
		if j < 0 {
			str := appendString(nil, text)
			return string(append(b, str[:len(str)-1]...))
		}
		b = appendString(b, text[:j])
		text = text[j+len(q):]
	}
	return string(append(b, text...))
}
