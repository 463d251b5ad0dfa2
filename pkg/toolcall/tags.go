package toolcall

import (
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// The tag formats: <tool_call> (JSON, Qwen3-Coder XML, GLM), <tool_calls> and
// <function_calls>.

// blockEnd finds where a block whose body starts at from ends: at its closer, else
// where the next block of its kind opens, else at limit.
func (x *extractor) blockEnd(from, limit int, open, close lit) (bodyEnd, end int, closed bool) {
	c := x.findBefore(close, from, limit)
	o := x.findBefore(open, from, limit)
	switch {
	case c >= 0 && (o < 0 || c < o):
		return c, c + len(litText[close]), true
	case o >= 0:
		return o, o, false
	}
	return limit, limit, false
}

// trimSpan returns text[from:to] without surrounding whitespace, as offsets.
func trimSpan(text string, from, to int) (int, int) {
	for from < to && text[from] <= ' ' {
		from++
	}
	for to > from && text[to-1] <= ' ' {
		to--
	}
	return from, to
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
}

// endCallsAt makes the calls added since call n end at end: the block of a missing
// closing tag ends with the last value read from it.
func (x *extractor) endCallsAt(n, end int) {
	for i := n; i < len(x.calls); i++ {
		x.calls[i].End = end
		x.calls[i].Raw = x.text[x.calls[i].Start:end]
	}
}

func (x *extractor) toolCallTag(at, limit int) (int, bool) {
	from := at + len(litText[litToolCall])
	if at > 0 && x.text[at-1] == '`' {
		return from, false // `<tool_call>` named in prose
	}
	bodyEnd, end, closed := x.blockEnd(from, limit, litToolCall, litToolCallEnd)
	if closed {
		bodyEnd, end = x.spanningJSON(from, bodyEnd, end, limit, litToolCallEnd)
	}
	b := blk{format: FormatToolCallTag, start: at, end: end}
	if !closed {
		b.fixes |= fixUnclosedTag
	}
	return x.toolCallBody(b, from, bodyEnd, closed), true
}

// spanningJSON handles a closing tag that the model wrote inside a JSON string of the
// call, as a file's content may: when the body is JSON cut off at the tag, and valid
// JSON that goes on past it ends right before another closing tag, the block ends there.
func (x *extractor) spanningJSON(from, bodyEnd, end, limit int, close lit) (int, int) {
	ts, te := trimSpan(x.text, from, bodyEnd)
	if ts == te || x.text[ts] != '{' || x.text[te-1] == '}' || x.budget <= 0 {
		return bodyEnd, end
	}
	e, res := jsonscan.Value(x.text[:limit], ts, x.o.MaxDepth, jsonscan.Strict)
	x.budget -= e - ts
	if res != jsonscan.OK || e <= bodyEnd {
		return bodyEnd, end
	}
	if i := jsonscan.SkipSpace(x.text[:limit], e); strings.HasPrefix(x.text[i:limit], litText[close]) {
		return i, i + len(litText[close])
	}
	return bodyEnd, end
}

// toolCallBody reads what a <tool_call> holds and returns where the block ends.
func (x *extractor) toolCallBody(b blk, from, to int, closed bool) int {
	ts, te := trimSpan(x.text, from, to)
	if ts == te {
		x.fail(b, "", nil, "the block is empty")
		return b.end
	}
	t := x.text[ts:te]
	n := len(x.calls)
	switch {
	case t[0] == '{' || t[0] == '[' || strings.HasPrefix(t, "```"):
		if fs, fe, ok := jsonrepair.FenceBody(t); ok {
			b.fixes |= fixSet(jsonrepair.CodeFence)
			x.jsonCalls(b, ts+fs, ts+fe)
			return b.end
		}
		end := x.jsonCalls(b, ts, te)
		if !closed {
			x.endCallsAt(n, end)
			return end
		}
	case strings.HasPrefix(t, "<function="):
		b.format = FormatQwen3Coder
		x.qwenFunctions(b, ts, te)
	case strings.Contains(t, "<arg_key>"):
		b.format = FormatGLM
		x.glmCall(b, ts, te)
	default:
		x.namedCall(b, ts, te)
	}
	return b.end
}

// namedCall reads a block that starts with a tool name: GLM's NAME alone or NAME
// followed by a JSON object, or a pythonic NAME(…).
func (x *extractor) namedCall(b blk, from, to int) {
	s := x.text[:to]
	i := from
	for i < to && (isWordByte(s[i]) || s[i] == '-' || s[i] == '.') {
		i++
	}
	name := s[from:i]
	rest, _ := trimSpan(s, i, to)
	switch {
	case name != "" && rest < to && s[rest] == '(':
		if p, _, ok := x.pyCall(s, from); ok {
			x.add(b, p)
		} else {
			x.fail(b, "", nil, "expected a tool name before '(', found %s", jsonrepair.Describe(s, from))
		}
	case name != "" && rest == to:
		b.format = FormatGLM
		x.add(b, parsed{name: name})
	case name != "" && s[rest] == '{':
		v, _, fixes, err := x.repairValue(s, rest)
		if err != nil {
			x.fail(b, name, err, "%s", syntaxMessage(err))
			return
		}
		if p := x.callFromObject(v); p.err == "" {
			// JSON that names its own tool, after a stray word.
			p.fixes |= fixes | fixSet(jsonrepair.LeadingText)
			x.add(b, p)
			return
		}
		b.format = FormatGLM
		x.add(b, parsed{name: name, args: []byte(v), fixes: fixes})
	default:
		x.fail(b, "", nil, `expected a JSON object {"name": …, "arguments": {…}}, found %s`, jsonrepair.Describe(s, from))
	}
}

// An xmlStyle says how an XML-style call writes its parameters: each key follows
// keyOpen and ends at keyClose; its value follows valOpen, if any, and ends at
// valClose (or where the next key starts).
// When stringAttr, a key may say string="false": its value is JSON. When exact, a
// string value is the text between the tags as written, its line breaks and spaces
// included (the format writes a value inline, so they are the model's); else one line
// break after the opening tag and one before the closing tag are the layout (Qwen3-Coder
// writes <parameter=k>\nvalue\n</parameter>). When nullText, a value written null is
// JSON null unless the parameter's schema allows a string only (nullValue).
type xmlStyle struct {
	keyOpen, keyClose, valOpen, valClose string
	stringAttr                           bool
	exact, nullText                      bool
}

var (
	qwenStyle   = xmlStyle{keyOpen: "<parameter=", keyClose: ">", valClose: "</parameter>"}
	glmStyle    = xmlStyle{keyOpen: "<arg_key>", keyClose: "</arg_key>", valOpen: "<arg_value>", valClose: "</arg_value>"}
	invokeStyle = xmlStyle{keyOpen: "<parameter name=", keyClose: ">", valClose: "</parameter>", stringAttr: true}
	// MiniMax-M2: vLLM's minimax_m2 parser reads null as None (its tests: a nullable
	// parameter's null is None) and keeps a value's whitespace.
	minimaxStyle = xmlStyle{keyOpen: "<parameter name=", keyClose: ">", valClose: "</parameter>", stringAttr: true,
		exact: true, nullText: true}
)

// xmlArgs reads the parameters in text[from:to] into a JSON object, typing each value
// by the tool's input schema.
func (x *extractor) xmlArgs(tool string, from, to int, st xmlStyle) (args []byte, fixes fixSet, msg string) {
	s := x.text[:to]
	sc := x.schemaFor(tool)
	out := append(make([]byte, 0, to-from+8), '{')
	pos := from
	for n := 0; ; n++ {
		k := strings.Index(s[pos:], st.keyOpen)
		if k < 0 {
			break
		}
		ks := pos + k + len(st.keyOpen)
		kc := strings.Index(s[ks:], st.keyClose)
		if kc < 0 {
			return nil, 0, "the parameter name after " + st.keyOpen + " is not closed with " + st.keyClose
		}
		rawKey := s[ks : ks+kc]
		key := xmlKey(rawKey)
		if key == "" {
			return nil, 0, "a parameter has an empty name"
		}
		vs := ks + kc + len(st.keyClose)
		if st.valOpen != "" {
			if i, _ := trimSpan(s, vs, to); strings.HasPrefix(s[i:], st.valOpen) {
				vs = i + len(st.valOpen)
			}
		}
		next := to
		if i := strings.Index(s[vs:], st.keyOpen); i >= 0 {
			next = vs + i
		}
		ve, after := next, next
		if i := strings.Index(s[vs:next], st.valClose); i >= 0 {
			ve, after = vs+i, vs+i+len(st.valClose)
		} else {
			fixes |= fixUnclosedTag
			if isBlank(x.text[ve:]) {
				fixes |= fixSet(jsonrepair.TruncatedValue) // the response ended inside this value
			}
		}
		val := s[vs:ve]
		if !st.exact {
			val = strings.TrimPrefix(val, "\n")
			val = strings.TrimSuffix(val, "\n")
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = appendString(out, key)
		out = append(out, ':')
		// DeepSeek writes string="false" on a parameter whose value is JSON.
		isJSON := st.stringAttr && xmlAttr(rawKey, "string") == "false"
		if st.nullText && nullValue(sc, key, val) {
			out = append(out, "null"...)
		} else {
			out = x.typedValue(out, sc.prop(key), val, isJSON)
		}
		pos = after
	}
	return append(out, '}'), fixes, ""
}

// nullValue says whether val, the value of parameter key of a tool whose schema is sc
// (nil: none known), is JSON null: written null (or Python's None), where the schema
// lets it be — any parameter but one whose schema allows a string and not null, which
// keeps the text "null" as the only reading its schema admits. (vLLM reads null as
// None even there, where the schema then refuses it.)
func nullValue(sc *schema, key, val string) bool {
	if t := strings.TrimSpace(val); t != "null" && t != "None" {
		return false
	}
	p := sc.prop(key)
	return p == nil || p.null || p.typ != "string"
}

// xmlKey reads a parameter name: city, "city", or "city" string="true".
func xmlKey(s string) string {
	s = strings.TrimSpace(s)
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		if i := strings.IndexByte(s[1:], s[0]); i >= 0 {
			return s[1 : 1+i]
		}
		return s[1:]
	}
	return s
}

// qwenFunctions reads <function=NAME>…</function> calls in text[from:to].
func (x *extractor) qwenFunctions(b blk, from, to int) {
	const open, close = "<function=", "</function>"
	s := x.text[:to]
	pos := from
	for x.overflow == 0 {
		i := strings.Index(s[pos:], open)
		if i < 0 {
			return
		}
		ns := pos + i + len(open)
		gt := strings.IndexByte(s[ns:], '>')
		if gt < 0 {
			x.fail(b, "", nil, "the function name after <function= is not closed with '>'")
			return
		}
		name := strings.TrimSpace(s[ns : ns+gt])
		body := ns + gt + 1
		next := to
		if j := strings.Index(s[body:], open); j >= 0 {
			next = body + j
		}
		fe, after := next, next
		p := parsed{name: name}
		if j := strings.Index(s[body:next], close); j >= 0 {
			fe, after = body+j, body+j+len(close)
		} else {
			p.fixes |= fixUnclosedTag
		}
		cb := b
		if bs, _ := trimSpan(s, body, fe); bs < fe && s[bs] == '{' && !strings.Contains(s[bs:fe], qwenStyle.keyOpen) {
			// Functionary v3.1 and Llama 3.1: <function=NAME>{…}</function>.
			cb.format = FormatFunctionaryV31
			args, _ := x.argsAt(bs, fe)
			args.name, args.fixes = name, args.fixes|p.fixes
			p = args
		} else {
			var fixes fixSet
			p.args, fixes, p.err = x.xmlArgs(name, body, fe, qwenStyle)
			p.fixes |= fixes
		}
		if name == "" {
			p.err = "the function name after <function= is empty"
		}
		x.add(cb, p)
		pos = after
	}
}

// glmCall reads NAME<arg_key>…</arg_key><arg_value>…</arg_value>… in text[from:to].
func (x *extractor) glmCall(b blk, from, to int) {
	k := strings.Index(x.text[from:to], glmStyle.keyOpen)
	name := strings.TrimSpace(x.text[from : from+k])
	p := parsed{name: name}
	p.args, p.fixes, p.err = x.xmlArgs(name, from+k, to, glmStyle)
	if name == "" {
		p.err = "the tool name is missing before the first <arg_key>"
	}
	x.add(b, p)
}

// bareQwenFunction reads a Qwen3-Coder <function=…> written without <tool_call>.
func (x *extractor) bareQwenFunction(at, limit int) (int, bool) {
	// Without </function> the call runs to the next one or to the end.
	_, end, _ := x.blockEnd(at+1, limit, litFunctionEq, litFunctionEnd)
	b := blk{format: FormatQwen3Coder, start: at, end: end}
	x.qwenFunctions(b, at, end)
	return end, true
}

func (x *extractor) toolCallsTag(at, limit int) (int, bool) {
	from := at + len(litText[litToolCalls])
	bodyEnd, end, closed := x.blockEnd(from, limit, litToolCalls, litToolCallsEnd)
	b := blk{format: FormatToolCallsTag, start: at, end: end}
	if !closed {
		b.fixes |= fixUnclosedTag
	}
	ts, te := trimSpan(x.text, from, bodyEnd)
	if ts == te {
		x.fail(b, "", nil, "the block is empty")
		return end, true
	}
	n := len(x.calls)
	if e := x.jsonCalls(b, ts, te); !closed {
		x.endCallsAt(n, e)
		return e, true
	}
	return end, true
}

func (x *extractor) functionCallsTag(at, limit int) (int, bool) {
	from := at + len(litText[litFunctionCalls])
	bodyEnd, end, closed := x.blockEnd(from, limit, litFunctionCalls, litFunctionCallsEnd)
	b := blk{format: FormatFunctionCalls, start: at, end: end}
	if !closed {
		b.fixes |= fixUnclosedTag
	}
	ts, te := trimSpan(x.text, from, bodyEnd)
	switch {
	case ts == te:
		x.fail(b, "", nil, "the block is empty")
	case strings.Contains(x.text[ts:te], "<invoke"):
		x.invokes(b, ts, te, plainInvoke)
	default:
		x.pyCalls(b, ts, te)
	}
	return end, true
}

// invokeTags are the tags of an <invoke> call: plain, or DeepSeek's DSML.
type invokeTags struct {
	open, close string
	params      xmlStyle
}

var (
	plainInvoke = invokeTags{"<invoke", "</invoke>", invokeStyle}
	dsmlInvoke  = invokeTags{"<｜DSML｜invoke", "</｜DSML｜invoke>",
		xmlStyle{keyOpen: "<｜DSML｜parameter name=", keyClose: ">", valClose: "</｜DSML｜parameter>", stringAttr: true}}
)

// invokes reads <invoke name="NAME"><parameter name="KEY">value</parameter></invoke>
// calls, or their DSML form, in text[from:to]. An invoke may hold a JSON object of
// arguments instead of parameters.
func (x *extractor) invokes(b blk, from, to int, tags invokeTags) {
	open, close := tags.open, tags.close
	s := x.text[:to]
	pos := from
	for x.overflow == 0 {
		i := strings.Index(s[pos:], open)
		if i < 0 {
			return
		}
		as := pos + i + len(open)
		gt := strings.IndexByte(s[as:], '>')
		if gt < 0 {
			x.fail(b, "", nil, "<invoke is not closed with '>'")
			return
		}
		name := xmlAttr(s[as:as+gt], "name")
		body := as + gt + 1
		next := to
		if j := strings.Index(s[body:], open); j >= 0 {
			next = body + j
		}
		ie, after := next, next
		p := parsed{name: name}
		if j := strings.Index(s[body:next], close); j >= 0 {
			ie, after = body+j, body+j+len(close)
		} else {
			p.fixes |= fixUnclosedTag
		}
		if bs, _ := trimSpan(s, body, ie); bs < ie && s[bs] == '{' {
			args, _ := x.argsAt(bs, ie)
			args.name, args.fixes = name, args.fixes|p.fixes
			p = args
		} else {
			var fixes fixSet
			p.args, fixes, p.err = x.xmlArgs(name, body, ie, tags.params)
			p.fixes |= fixes
		}
		if name == "" {
			p.err = open + `> has no name="TOOL_NAME"`
		}
		x.add(b, p)
		pos = after
	}
}

// dsml reads DeepSeek V3.2's calls: a <｜DSML｜function_calls> or <｜DSML｜tool_calls>
// section of invokes, or an invoke without the section, which runs to the next invoke.
func (x *extractor) dsml(m lit, at, limit int) (int, bool) {
	b := blk{format: FormatDeepSeekV32, start: at}
	from := at + len(litText[m])
	var bodyEnd, end int
	closed := true
	switch m {
	case litDSMLInvoke:
		from, end = at, limit
		if i := x.findBefore(litDSMLInvoke, at+1, limit); i >= 0 {
			end = i
		}
		if i := strings.Index(x.text[at:end], dsmlInvoke.close); i >= 0 {
			end = at + i + len(dsmlInvoke.close)
		}
		bodyEnd = end
	case litDSMLToolCalls:
		bodyEnd, end, closed = x.blockEnd(from, limit, m, litDSMLToolCallsEnd)
	default:
		bodyEnd, end, closed = x.blockEnd(from, limit, m, litDSMLFunctionCallsEnd)
	}
	b.end = end
	if !closed {
		b.fixes |= fixUnclosedTag
	}
	n := len(x.calls)
	x.invokes(b, from, bodyEnd, dsmlInvoke)
	if len(x.calls) == n && x.overflow == 0 {
		x.fail(b, "", nil, `expected <｜DSML｜invoke name="TOOL_NAME"> in the block`)
	}
	return end, true
}

// xmlAttr returns the value of attribute key in attrs (` name="x" other='y'`).
func xmlAttr(attrs, key string) string {
	for attrs != "" {
		i := strings.Index(attrs, key)
		if i < 0 {
			return ""
		}
		rest := strings.TrimLeft(attrs[i+len(key):], " ")
		if i > 0 && attrs[i-1] > ' ' || !strings.HasPrefix(rest, "=") {
			attrs = attrs[i+len(key):]
			continue
		}
		return xmlKey(strings.TrimLeft(rest[1:], " "))
	}
	return ""
}
