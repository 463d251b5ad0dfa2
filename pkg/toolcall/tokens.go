package toolcall

import (
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// The special-token formats: Llama's <|python_tag|> and <|python_start|>, Mistral's
// [TOOL_CALLS], DeepSeek's and Kimi K2's call sections.

// argsAt reads the JSON object of a call's arguments in text[from:to], which may be
// fenced; empty text means no arguments.
func (x *extractor) argsAt(from, to int) (parsed, int) {
	from, to = trimSpan(x.text, from, to)
	if from == to {
		return parsed{args: []byte("{}")}, to
	}
	var p parsed
	if fs, fe, ok := jsonrepair.FenceBody(x.text[from:to]); ok {
		from, to = trimSpan(x.text, from+fs, from+fe)
		p.fixes |= fixSet(jsonrepair.CodeFence)
		if from == to {
			return parsed{args: []byte("{}")}, to
		}
	}
	v, end, fixes, err := x.repairValue(x.text[:to], from)
	if err != nil {
		p.err, p.cause = syntaxMessage(err), err
		return p, to
	}
	if v[0] != '{' {
		p.err = "the arguments must be a JSON object, found " + jsonrepair.Kind(v)
		return p, end
	}
	p.args, p.fixes = []byte(v), p.fixes|fixes
	return p, end
}

func (x *extractor) pythonTag(at, limit int) (int, bool) {
	from := at + len(litText[litPythonTag])
	// The calls run to <|eom_id|> or <|eot_id|>, else as far as they parse.
	stop, end := limit, -1
	for _, l := range [...]lit{litEomID, litEotID} {
		if i := x.findBefore(l, from, limit); i >= 0 && i < stop {
			stop, end = i, i+len(litText[l])
		}
	}
	b := blk{format: FormatLlamaJSON, start: at, end: stop}
	if end >= 0 {
		b.end = end
	}
	s := x.text[:stop]
	n := len(x.calls)
	pos := from
	for pos < stop && x.overflow == 0 {
		for pos < stop && (s[pos] <= ' ' || s[pos] == ';') {
			pos++
		}
		if pos >= stop {
			break
		}
		if s[pos] == '{' || s[pos] == '[' {
			pos = x.jsonCalls(b, pos, stop)
			continue
		}
		p, e, ok := x.pyCall(s, pos)
		if !ok {
			break
		}
		x.add(b, p)
		if p.err != "" {
			pos = stop
			break
		}
		pos = e
	}
	if len(x.calls) == n && x.overflow == 0 {
		x.fail(b, "", nil, `expected {"name": "TOOL_NAME", "parameters": {...}} after <|python_tag|>, found %s`, jsonrepair.Describe(s, pos))
	}
	if end < 0 {
		x.endCallsAt(n, pos)
		return pos, true
	}
	return end, true
}

func (x *extractor) pythonStart(at, limit int) (int, bool) {
	from := at + len(litText[litPythonStart])
	bodyEnd, end := limit, limit
	if i := x.findBefore(litPythonEnd, from, limit); i >= 0 {
		bodyEnd, end = i, i+len(litText[litPythonEnd])
	}
	b := blk{format: FormatPythonic, start: at, end: end}
	ts, te := trimSpan(x.text, from, bodyEnd)
	switch {
	case ts == te:
		x.fail(b, "", nil, "the block is empty")
	case x.text[ts] == '{' || x.text[ts] == '[' && jsonAhead(x.text[:te], ts+1):
		// Llama 4 writes JSON calls in the block too.
		b.format = FormatLlamaJSON
		n := len(x.calls)
		x.endCallsAt(n, x.jsonCalls(b, ts, te))
	default:
		x.pyCalls(b, ts, te)
	}
	return end, true
}

// jsonAhead reports whether s[i:], after spaces, starts a JSON object.
func jsonAhead(s string, i int) bool {
	i = jsonscan.SkipSpace(s, i)
	return i < len(s) && s[i] == '{'
}

// callsArrayAfter returns where an array of call objects ([{) starts in the line at
// s[from:limit], or -1.
func callsArrayAfter(s string, from, limit int) int {
	end := min(limit, lineEnd(s, from), from+256)
	for i := from; i < end; i++ {
		if s[i] == '[' && jsonAhead(s[:limit], i+1) {
			return i
		}
	}
	return -1
}

func (x *extractor) mistral(at, limit int) (int, bool) {
	s := x.text[:limit]
	pos, _ := trimSpan(s, at+len(litText[litMistral]), limit)
	b := blk{format: FormatMistral, start: at, end: limit}
	if pos >= limit {
		x.fail(b, "", nil, "nothing follows [TOOL_CALLS]")
		return limit, true
	}
	if s[pos] == '[' || s[pos] == '{' {
		// Before v11: a JSON array of calls.
		v, end, fixes, err := x.repairValue(s, pos)
		if err != nil {
			x.fail(b, salvageName(s[pos:]), err, "%s", syntaxMessage(err))
			return limit, true
		}
		b.end = end
		x.callsFromValue(b, v, fixes)
		return end, true
	}
	// v11 and later: NAME{…}, NAME[ARGS]{…}, NAME[CALL_ID]id[ARGS]{…}.
	i := pos
	for i < limit && (isWordByte(s[i]) || s[i] == '-' || s[i] == '.') {
		i++
	}
	name := s[pos:i]
	var id string
	for name != "" {
		if strings.HasPrefix(s[i:], "[ARGS]") {
			i += len("[ARGS]")
		} else if strings.HasPrefix(s[i:], "[CALL_ID]") {
			i += len("[CALL_ID]")
			idFrom := i
			for i < limit && isWordByte(s[i]) {
				i++
			}
			id = s[idFrom:i]
		} else {
			break
		}
	}
	if i, _ = trimSpan(s, i, limit); name == "" || i >= limit || s[i] != '{' {
		if j := callsArrayAfter(s, pos, limit); j >= 0 {
			// [TOOL_CALLS] and a word or two before the array of calls.
			v, end, fixes, err := x.repairValue(s, j)
			if err == nil && v[0] == '[' {
				b.end = end
				x.callsFromValue(b, v, fixes|fixSet(jsonrepair.LeadingText))
				return end, true
			}
		}
		b.end = lineEnd(s, pos)
		if !x.known(name) {
			name = ""
		}
		x.fail(b, name, nil, "expected a JSON array of calls or TOOL_NAME{arguments} after [TOOL_CALLS], found %s", jsonrepair.Describe(s, pos))
		return b.end, true
	}
	p, end := x.argsAt(i, limit)
	p.name, p.id = name, id
	b.end = end
	x.add(b, p)
	return end, true
}

func lineEnd(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(s)
}

// A callSection describes DeepSeek's and Kimi's formats: a section of calls, each
// between callBegin and callEnd, its name and its arguments parted by sep.
type callSection struct {
	open, end, call, callEnd lit
	sep                      string
}

var (
	deepSeekSection = callSection{litDeepSeek, litDeepSeekEnd, litDeepSeekCall, litDeepSeekCallEnd, "<｜tool▁sep｜>"}
	kimiSection     = callSection{litKimi, litKimiEnd, litKimiCall, litKimiCallEnd, "<|tool_call_argument_begin|>"}
)

func (x *extractor) deepSeek(m lit, at, limit int) (int, bool) {
	return x.section(deepSeekSection, m, at, limit)
}

func (x *extractor) kimi(m lit, at, limit int) (int, bool) {
	return x.section(kimiSection, m, at, limit)
}

// section reads a call section that starts at text[at] with marker m: the section's
// opening token, or a call's when the model left out the section.
func (x *extractor) section(cs callSection, m lit, at, limit int) (int, bool) {
	var bodyEnd, end int
	if m == cs.open {
		bodyEnd, end, _ = x.blockEnd(at+len(litText[cs.open]), limit, cs.open, cs.end)
	} else {
		// One call on its own: it ends with its end token, else at the next call.
		_, end, _ = x.blockEnd(at+len(litText[cs.call]), limit, cs.call, cs.callEnd)
		bodyEnd = end
	}
	callBegin, callEnd := litText[cs.call], litText[cs.callEnd]
	s := x.text[:bodyEnd]
	pos := at
	for x.overflow == 0 {
		i := strings.Index(s[pos:], callBegin)
		if i < 0 {
			break
		}
		start := pos + i
		body := start + len(callBegin)
		next := bodyEnd
		if j := strings.Index(s[body:], callBegin); j >= 0 {
			next = body + j
		}
		b := blk{start: start, end: next}
		ce := next
		if j := strings.Index(s[body:next], callEnd); j >= 0 {
			ce, b.end = body+j, body+j+len(callEnd)
		} else {
			b.fixes |= fixUnclosedTag
		}
		x.sectionCall(cs, b, body, ce)
		pos = b.end
	}
	return end, true
}

// sectionCall reads NAME sep ARGS in text[from:to].
func (x *extractor) sectionCall(cs callSection, b blk, from, to int) {
	s := x.text[:to]
	sep := strings.Index(s[from:], cs.sep)
	if cs == kimiSection {
		b.format = FormatKimiK2
	} else {
		b.format = FormatDeepSeekV31
	}
	if sep < 0 {
		x.fail(b, "", nil, "expected %s between the tool name and its arguments", cs.sep)
		return
	}
	name := strings.TrimSpace(s[from : from+sep])
	argsFrom := from + sep + len(cs.sep)
	var id string
	if cs == kimiSection {
		// functions.get_weather:0, which is also the call's id (Kimi's API returns it
		// as the tool_call id, and the next turn answers it so).
		if strings.HasPrefix(name, "functions.") {
			id = name
		}
		name = strings.TrimPrefix(name, "functions.")
		if c := strings.LastIndexByte(name, ':'); c >= 0 && c+1 < len(name) && strings.Trim(name[c+1:], "0123456789") == "" {
			name = name[:c]
		}
	} else if as, ae := trimSpan(s, argsFrom, to); as < ae && s[as] != '{' && s[as] != '[' {
		// DeepSeek V3: function<｜tool▁sep｜>NAME\n```json\n{…}\n```
		b.format = FormatDeepSeekV3
		nl := strings.IndexByte(s[as:ae], '\n')
		if nl < 0 {
			nl = ae - as
		}
		name = strings.TrimSpace(s[as : as+nl])
		argsFrom = as + nl
	}
	p, _ := x.argsAt(argsFrom, to)
	p.name, p.id = name, id
	if name == "" && p.err == "" {
		p.err = "the tool name is missing"
	}
	x.add(b, p)
}
