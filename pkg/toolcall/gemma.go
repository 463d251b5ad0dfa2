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
		quoted := strings.Contains(s[i:bodyEnd], gemmaQuote(m))
		args, missingComma := unquoteGemma(s[i:bodyEnd], gemmaQuote(m))
		v, _, fixes, err := x.repairValue(args, 0)
		if missingComma {
			fixes |= fixSet(jsonrepair.MissingComma)
		}
		if err == nil && fixes&fixSet(jsonrepair.UnescapedQuote) != 0 && quoted {
			// Every quote the repairer saw is a token's: it took one for a quote inside a
			// string, joining two strings of the model's into one it never wrote.
			q := gemmaQuote(m)
			x.fail(b, name, nil, "a %s inside a value: each string is written key:%stext%s and cannot hold the token", q, q, q)
			break
		}
		if err != nil {
			x.fail(b, name, err, "%s", syntaxMessage(err))
			break
		}
		// Bare keys are the format, not a repair.
		x.add(b, parsed{name: name, args: []byte(v), fixes: fixes &^ fixSet(jsonrepair.UnquotedKeys|jsonrepair.TrailingText)})
	}
	return end, true
}

// unquoteGemma rewrites text whose strings are quoted by the token q as JSON: each
// quoted string becomes a JSON string (a string the text ends in stays open, for the
// repairer to see the cut) and each bare key a quoted one, so that a call written as
// the format says is strict JSON and no repair heuristic reads its strings. The token
// is the only quote of the format, so a string ends there whatever follows: where the
// model wrote no comma before the next member (k:<escape>a<escape>n:<escape>b<escape>),
// one is written, and missingComma says so — else the repairer, seeing "a"n:"b", could
// take the quotes for ones inside a string and run the call with one string made of
// two (vLLM reads each key:value pair by itself; so does this).
func unquoteGemma(text, q string) (out string, missingComma bool) {
	if !strings.Contains(text, q) {
		return text, false
	}
	b := make([]byte, 0, len(text)+16)
	atKey := false // the last token written was { or ,
	for {
		i := strings.Index(text, q)
		if i < 0 {
			break
		}
		b, atKey = appendGemmaKeys(b, text[:i], atKey)
		text = text[i+len(q):]
		j := strings.Index(text, q)
		if j < 0 {
			str := appendString(nil, text)
			return string(append(b, str[:len(str)-1]...)), missingComma
		}
		b = appendString(b, text[:j])
		atKey = false
		text = text[j+len(q):]
		if k, _ := jsonrepair.SkipSpace(text, 0); k < len(text) && !strings.ContainsRune(",:}]", rune(text[k])) {
			b = append(b, ',')
			missingComma, atKey = true, true
		}
	}
	b, _ = appendGemmaKeys(b, text, atKey)
	return string(b), missingComma
}

// appendGemmaKeys appends seg, text between Gemma's strings, quoting each bare key (a
// word followed by ':' where a key may start); atKey says whether one may at seg[0].
func appendGemmaKeys(b []byte, seg string, atKey bool) ([]byte, bool) {
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '{' || c == ',':
			atKey = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case atKey && (isWordByte(c) || c == '-' || c == '.'):
			j := i
			for j < len(seg) && (isWordByte(seg[j]) || seg[j] == '-' || seg[j] == '.') {
				j++
			}
			k, _ := jsonrepair.SkipSpace(seg, j)
			if k < len(seg) && seg[k] == ':' {
				b = appendString(b, seg[i:j])
				i = j - 1
				atKey = false
				continue
			}
			atKey = false
		default:
			atKey = false
		}
		b = append(b, c)
	}
	return b, atKey
}
