package toolcall

import (
	"slices"
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// Calls without a marker: code fences, bare JSON naming a known tool, and a whole
// response that is a pythonic list or, with the format pinned, JSON.

// fence reads a ``` code fence. It is content unless its body is tool calls: explicit
// markup such as <tool_call>, or JSON or pythonic calls that name known tools.
func (x *extractor) fence(at, limit int) (int, bool) {
	s := x.text
	nl := strings.IndexByte(s[at:limit], '\n')
	if nl < 0 || strings.Contains(s[at+3:at+nl], "`") {
		return at + 3, false // not an opening fence line
	}
	info := strings.TrimSpace(s[at+3 : at+nl])
	from := at + nl + 1
	bodyEnd, end := limit, limit
	if c := x.findBefore(litFence, from, limit); c >= 0 {
		bodyEnd, end = c, c+3
	}
	ts, te := trimSpan(s, from, bodyEnd)
	if ts == te {
		return end, false
	}
	t := s[ts:te]
	for _, m := range x.markers {
		if m != litFence && m != litBrace && m != litBracket && strings.HasPrefix(t, litText[m]) {
			x.scan(ts, te)
			return end, true
		}
	}
	b := blk{format: FormatJSON, start: at, end: end, fixes: fixSet(jsonrepair.CodeFence)}
	if t[0] == '{' || t[0] == '[' {
		if calls, e, ok := x.candidateCalls(ts, te); ok && jsonscan.SkipSpace(s[:te], e) == te {
			x.addAll(b, calls)
			return end, true
		}
		return end, false
	}
	if strings.EqualFold(info, "tool_code") && (x.o.Format == FormatAuto || x.o.Format == FormatToolCode) {
		// Gemma 3 writes its calls in a tool_code fence, sometimes as print(CALL).
		if strings.HasPrefix(t, "print(") && t[len(t)-1] == ')' {
			ts, te = ts+len("print("), te-1
		}
		if _, _, isCall := x.pyCall(s[:te], ts); isCall {
			b.format, b.fixes = FormatToolCode, 0
			x.pyCalls(b, ts, te)
			return end, true
		}
	}
	switch strings.ToLower(info) {
	case "", "python", "py", "tool_code", "tool_call":
		if calls, e, ok := x.candidatePyCalls(ts, te); ok && jsonscan.SkipSpace(s[:te], e) == te {
			b.format = FormatPythonic
			x.addAll(b, calls)
			return end, true
		}
	}
	return end, false
}

func (x *extractor) addAll(b blk, calls []parsed) {
	for _, p := range calls {
		x.add(b, p)
	}
}

// acceptName reports whether a call found without a marker names a tool that may be
// called: a known tool, or any tool when the format is pinned and no tools are known.
func (x *extractor) acceptName(name string) bool {
	if len(x.o.KnownTools) == 0 {
		return x.o.Format != FormatAuto
	}
	return x.known(name)
}

// candidateCalls reads the JSON value at text[from] and returns its calls when it is
// shaped like calls of accepted tools, else ok false with end past the value.
func (x *extractor) candidateCalls(from, to int) (calls []parsed, end int, ok bool) {
	v, end, fixes, ok := x.readValue(x.text[:to], from)
	if !ok {
		x.budget -= x.rd.Stopped() - from
		return nil, from, false
	}
	x.budget -= end - from
	if arr, ok := toolCallsMember(v, &x.rec); ok {
		v = arr // {"tool_calls": [...]}: an OpenAI message written into the content
	}
	take := func(obj string) bool {
		if !callShaped(obj, &x.rec) {
			return false
		}
		p := x.callFromObject(obj)
		if p.err != "" || !x.acceptName(p.name) {
			return false
		}
		p.fixes |= fixes
		calls = append(calls, p)
		return true
	}
	switch v[0] {
	case '{':
		ok = take(v)
	case '[':
		ok = true
		for it := arrayElements(v); ok; {
			e, more := it.next()
			if !more {
				break
			}
			ok = e[0] == '{' && take(e)
		}
		ok = ok && len(calls) > 0
	}
	return calls, end, ok
}

// toolCallsMember returns the array of calls of an object shaped like an OpenAI
// assistant message, {"tool_calls": [...]} with at most "role", "content" and
// "refusal" besides.
func toolCallsMember(v string, rec *memberSpans) (string, bool) {
	if v[0] != '{' {
		return "", false
	}
	calls := ""
	for it := objectMembers(v, rec); ; {
		k, vs, ve, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case `"tool_calls"`:
			if v[vs] != '[' {
				return "", false
			}
			calls = v[vs:ve]
		case `"role"`, `"content"`, `"refusal"`:
		default:
			return "", false
		}
	}
	return calls, calls != ""
}

// callShaped reports whether a JSON object has only the members of a call, so that a
// tool's definition ({"name", "description", "parameters": {schema}}) or other data
// that happens to have a "name" is not run.
func callShaped(obj string, rec *memberSpans) bool {
	for it := objectMembers(obj, rec); ; {
		k, vs, ve, ok := it.next()
		if !ok {
			return true
		}
		switch v := obj[vs:ve]; {
		case k == `"type"` || k == `"id"`:
		case slices.Contains(nameKeys, k):
		case slices.Contains(argsKeys, k):
			if v[0] == '{' && looksLikeSchema(v) {
				return false
			}
		default:
			return false
		}
	}
}

func looksLikeSchema(obj string) bool {
	typ, props := false, false
	for it := objectMembers(obj, nil); ; {
		k, vs, ve, ok := it.next()
		if !ok {
			return typ && props
		}
		typ = typ || k == `"type"` && obj[vs:ve] == `"object"`
		props = props || k == `"properties"`
	}
}

// candidatePyCalls reads pythonic calls of accepted tools at text[from]: a list, or
// calls one per line.
func (x *extractor) candidatePyCalls(from, to int) (calls []parsed, end int, ok bool) {
	s := x.text[:to]
	x.quiet = true
	defer func() { x.quiet = false }()
	if s[from] == '[' {
		calls, end, ok = x.pyList(s, from)
	} else {
		pos := from
		for pos < to {
			p, e, isCall := x.pyCall(s, pos)
			if !isCall {
				break
			}
			calls, end, ok = append(calls, p), e, true
			if p.err != "" && !p.whole {
				break
			}
			for pos = e; pos < to && (s[pos] <= ' ' || s[pos] == ';'); pos++ {
			}
		}
	}
	x.budget -= end - from
	for _, p := range calls {
		if p.err != "" && !p.whole || !x.acceptName(p.name) {
			return nil, from, false
		}
	}
	return calls, end, ok
}

// bareCandidate reports whether the '{' or '[' at text[i] may start calls: an object
// with a quoted first key, an array of such objects, or a list of NAME(…).
func bareCandidate(text string, i int) bool {
	j := jsonscan.SkipSpace(text, i+1)
	if j >= len(text) {
		return false
	}
	if text[i] == '{' {
		return text[j] == '"' || text[j] == '\''
	}
	if text[j] == '{' {
		return true
	}
	k := j
	for k < len(text) && (isWordByte(text[k]) || text[k] == '.') {
		k++
	}
	return k > j && k < len(text) && text[k] == '('
}

// bareJSON tries the '{' or '[' at text[at], a bareCandidate, as calls of known tools.
func (x *extractor) bareJSON(at, limit int) (int, bool) {
	s := x.text[:limit]
	if x.budget <= 0 {
		return at + 1, false
	}
	b := blk{format: FormatJSON, start: at}
	if s[at] == '{' || s[jsonscan.SkipSpace(s, at+1)] == '{' {
		calls, end, ok := x.candidateCalls(at, limit)
		if !ok {
			return max(end, at+1), false
		}
		b.end = end
		x.addAll(b, calls)
		if j := jsonscan.SkipSpace(s, end); j < limit && s[j] == ';' {
			return j + 1, true
		}
		return end, true
	}
	calls, end, ok := x.candidatePyCalls(at, limit)
	if !ok {
		return at + 1, false
	}
	b.format, b.end = FormatPythonic, end
	x.addAll(b, calls)
	return end, true
}

// wholeResponse reads a response that is nothing but a pythonic list of calls, or,
// with FormatLlamaJSON pinned, nothing but JSON calls.
func (x *extractor) wholeResponse(pos int) bool {
	ts, te := trimSpan(x.text, pos, len(x.text))
	if ts == te {
		return false
	}
	t := x.text[ts:te]
	switch x.o.Format {
	case FormatAuto, FormatPythonic:
		if t[0] != '[' || t[len(t)-1] != ']' {
			return false
		}
		calls, end, ok := x.pyList(x.text[:te], ts)
		failed := ok && calls[len(calls)-1].err != "" && !calls[len(calls)-1].whole
		if !ok || !failed && end != te || failed && x.o.Format == FormatAuto {
			return false
		}
		x.addAll(blk{format: FormatPythonic, start: ts, end: te}, calls)
		return true
	case FormatLlamaJSON:
		if t[0] != '{' && t[0] != '[' {
			return false
		}
		n := len(x.calls)
		end := x.jsonCalls(blk{format: FormatLlamaJSON, start: ts, end: te}, ts, te)
		x.endCallsAt(n, end)
		x.scan(end, len(x.text))
		return true
	}
	return false
}
