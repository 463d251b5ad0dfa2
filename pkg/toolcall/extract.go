package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolbus/toolbus/pkg/messages"
)

// lit identifies a literal the extractor searches for: the markers that start a block,
// then the closers searched from outside a bounded block.
type lit uint8

const (
	// Markers, in priority order when two start at the same byte.
	litThink lit = iota
	litToolCall
	litToolCalls
	litFunctionCalls
	litFunctionEq
	litPythonTag
	litPythonStart
	litMistral
	litDeepSeek
	litDeepSeekCall
	litKimi
	litKimiCall
	litFence
	litBrace
	litBracket
	numMarkers

	// Closers.
	litThinkEnd
	litToolCallEnd
	litToolCallsEnd
	litFunctionCallsEnd
	litPythonEnd
	litEomID
	litEotID
	litDeepSeekEnd
	litDeepSeekCallEnd
	litKimiEnd
	litKimiCallEnd
	litFunctionEnd
	numLits
)

var litText = [numLits]string{
	litThink:            "<think>",
	litToolCall:         "<tool_call>",
	litToolCalls:        "<tool_calls>",
	litFunctionCalls:    "<function_calls>",
	litFunctionEq:       "<function=",
	litPythonTag:        "<|python_tag|>",
	litPythonStart:      "<|python_start|>",
	litMistral:          "[TOOL_CALLS]",
	litDeepSeek:         "<｜tool▁calls▁begin｜>",
	litDeepSeekCall:     "<｜tool▁call▁begin｜>",
	litKimi:             "<|tool_calls_section_begin|>",
	litKimiCall:         "<|tool_call_begin|>",
	litFence:            "```",
	litBrace:            "{",
	litBracket:          "[",
	litThinkEnd:         "</think>",
	litToolCallEnd:      "</tool_call>",
	litToolCallsEnd:     "</tool_calls>",
	litFunctionCallsEnd: "</function_calls>",
	litPythonEnd:        "<|python_end|>",
	litEomID:            "<|eom_id|>",
	litEotID:            "<|eot_id|>",
	litDeepSeekEnd:      "<｜tool▁calls▁end｜>",
	litDeepSeekCallEnd:  "<｜tool▁call▁end｜>",
	litKimiEnd:          "<|tool_calls_section_end|>",
	litKimiCallEnd:      "<|tool_call_end|>",
	litFunctionEnd:      "</function>",
}

// cursor caches where a literal next occurs, so that searching the text for it again
// and again from increasing offsets stays linear.
type cursor struct {
	from int // where the last search started
	at   int // what it found, -1 for nothing
	done bool
}

// span is a byte range of the text.
type span struct{ start, end int }

// extractor holds the state of one Extract.
type extractor struct {
	text    string
	o       *Options
	markers []lit // enabled, in priority order
	groups  []markerGroup
	group   [4]markerGroup // backs groups
	cur     [numLits]cursor
	calls   []Call
	content []span
	reason  []span
	// budget bounds the bytes spent trying bare JSON that turns out not to be a call.
	budget   int
	overflow int // calls beyond MaxCalls
	// line numbering, advanced lazily
	lineAt, line int
	schemas      map[string]*schema
}

func newExtractor(text string, o *Options) *extractor {
	x := &extractor{text: text, o: o, budget: 2*len(text) + 4096, line: 1}
	x.markers = enabledMarkers(o)
	x.groups = append(x.group[:0], markerGroups[&x.markers[0]]...)
	return x
}

// The markers each format enables, in priority order; think and fences always count.
var (
	autoMarkers = []lit{litThink, litToolCall, litToolCalls, litFunctionCalls, litFunctionEq,
		litPythonTag, litPythonStart, litMistral, litDeepSeek, litDeepSeekCall, litKimi,
		litKimiCall, litFence}
	autoKnownMarkers = append(slices.Clip(autoMarkers), litBrace, litBracket)
	pinnedMarkers    = map[Format][]lit{
		FormatToolCallTag:   {litThink, litToolCall, litFence},
		FormatGLM:           {litThink, litToolCall, litFence},
		FormatQwen3Coder:    {litThink, litToolCall, litFunctionEq, litFence},
		FormatLlamaJSON:     {litThink, litPythonTag, litFence},
		FormatPythonic:      {litThink, litPythonStart, litFence},
		FormatMistral:       {litThink, litMistral, litFence},
		FormatDeepSeekV3:    {litThink, litDeepSeek, litDeepSeekCall, litFence},
		FormatDeepSeekV31:   {litThink, litDeepSeek, litDeepSeekCall, litFence},
		FormatKimiK2:        {litThink, litKimi, litKimiCall, litFence},
		FormatToolCallsTag:  {litThink, litToolCalls, litFence},
		FormatFunctionCalls: {litThink, litFunctionCalls, litFence},
		FormatJSON:          {litThink, litFence, litBrace, litBracket},
	}
)

// markerGroups holds the groups of each set of markers, keyed by the set's first
// element.
var markerGroups = func() map[*lit][]markerGroup {
	sets := [][]lit{autoMarkers, autoKnownMarkers}
	for _, set := range pinnedMarkers {
		sets = append(sets, set)
	}
	out := make(map[*lit][]markerGroup, len(sets))
	for _, set := range sets {
		var groups []markerGroup
		for _, m := range set {
			first := litText[m][0]
			i := slices.IndexFunc(groups, func(g markerGroup) bool { return g.first == first })
			if i < 0 {
				i = len(groups)
				groups = append(groups, markerGroup{first: first})
			}
			groups[i].markers[groups[i].n] = m
			groups[i].n++
		}
		out[&set[0]] = groups
	}
	return out
}()

func enabledMarkers(o *Options) []lit {
	if o.Format == FormatAuto {
		if len(o.KnownTools) > 0 {
			return autoKnownMarkers
		}
		return autoMarkers
	}
	if m, ok := pinnedMarkers[o.Format]; ok {
		return m
	}
	return autoMarkers
}

// A markerGroup finds the enabled markers that start with one byte, with one scan for
// that byte instead of one per marker.
type markerGroup struct {
	first   byte
	markers [16]lit
	n       int
	// the cached result of the last search
	from, at int
	found    lit
	done     bool
}

// next returns the first marker of the group at or after from in text, or -1.
func (g *markerGroup) next(text string, from int) (lit, int) {
	if g.done && from >= g.from && (g.at < 0 || g.at >= from) {
		return g.found, g.at
	}
	g.from, g.done, g.at = from, true, -1
	for i := from; i < len(text); i++ {
		j := strings.IndexByte(text[i:], g.first)
		if j < 0 {
			break
		}
		i += j
		for _, m := range g.markers[:g.n] {
			if strings.HasPrefix(text[i:], litText[m]) && (m != litBrace && m != litBracket || bareCandidate(text, i)) {
				g.found, g.at = m, i
				return m, i
			}
		}
	}
	return g.found, g.at
}

// find returns the first occurrence of l at or after from, or -1.
func (x *extractor) find(l lit, from int) int {
	c := &x.cur[l]
	if c.done && from >= c.from && (c.at < 0 || c.at >= from) {
		return c.at
	}
	c.from, c.done = from, true
	if from > len(x.text) {
		c.at = -1
		return -1
	}
	if i := strings.Index(x.text[from:], litText[l]); i >= 0 {
		c.at = from + i
	} else {
		c.at = -1
	}
	return c.at
}

// findBefore is find limited to occurrences that start before limit.
func (x *extractor) findBefore(l lit, from, limit int) int {
	if i := x.find(l, from); i >= 0 && i+len(litText[l]) <= limit {
		return i
	}
	return -1
}

func (x *extractor) run() {
	pos := 0
	// A reasoning model's template may open <think> in the prompt, so that the response
	// holds only the closing tag.
	if i := x.find(litThinkEnd, 0); i >= 0 && !strings.Contains(x.text[:i], litText[litThink]) {
		x.reason = append(x.reason, span{0, i})
		pos = i + len(litText[litThinkEnd])
	}
	if x.wholeResponse(pos) {
		return
	}
	x.scan(pos, len(x.text))
}

// scan extracts the calls in text[pos:limit], keeping the rest as content.
func (x *extractor) scan(pos, limit int) {
	for pos < limit {
		if x.overflow > 0 {
			return
		}
		m, at := x.nextMarker(pos, limit)
		if at < 0 {
			x.addContent(pos, limit)
			return
		}
		x.addContent(pos, at)
		end, isCall := x.block(m, at, limit)
		end = min(max(end, at+1), limit)
		if !isCall {
			x.addContent(at, end)
		}
		pos = end
	}
}

// nextMarker returns the enabled marker that occurs first in text[pos:limit].
func (x *extractor) nextMarker(pos, limit int) (lit, int) {
	best, bestAt := lit(0), -1
	for i := range x.groups {
		m, at := x.groups[i].next(x.text, pos)
		if at >= 0 && at+len(litText[m]) <= limit && (bestAt < 0 || at < bestAt) {
			best, bestAt = m, at
		}
	}
	return best, bestAt
}

// block reads the block that marker m starts at text[at], adding its calls. It returns
// where the block ends, and false when it turned out not to be calls, so that its
// text is content.
func (x *extractor) block(m lit, at, limit int) (end int, isCall bool) {
	switch m {
	case litThink:
		return x.think(at, limit), true
	case litToolCall:
		return x.toolCallTag(at, limit)
	case litToolCalls:
		return x.toolCallsTag(at, limit)
	case litFunctionCalls:
		return x.functionCallsTag(at, limit)
	case litFunctionEq:
		return x.bareQwenFunction(at, limit)
	case litPythonTag:
		return x.pythonTag(at, limit)
	case litPythonStart:
		return x.pythonStart(at, limit)
	case litMistral:
		return x.mistral(at, limit)
	case litDeepSeek, litDeepSeekCall:
		return x.deepSeek(m, at, limit)
	case litKimi, litKimiCall:
		return x.kimi(m, at, limit)
	case litFence:
		return x.fence(at, limit)
	case litBrace, litBracket:
		return x.bareJSON(at, limit)
	}
	return at + 1, false
}

func (x *extractor) addContent(start, end int) {
	if start >= end {
		return
	}
	if n := len(x.content); n > 0 && x.content[n-1].end == start {
		x.content[n-1].end = end
		return
	}
	x.content = append(x.content, span{start, end})
}

func (x *extractor) think(at, limit int) int {
	start := at + len(litText[litThink])
	end := x.findBefore(litThinkEnd, start, limit)
	if end < 0 {
		x.reason = append(x.reason, span{start, limit})
		return limit
	}
	x.reason = append(x.reason, span{start, end})
	return end + len(litText[litThinkEnd])
}

func (x *extractor) result() Extraction {
	ex := Extraction{
		Calls:     x.calls,
		Content:   x.join(x.content, ""),
		Reasoning: x.join(x.reason, "\n"),
	}
	if x.overflow > 0 {
		ex.Calls = append(ex.Calls, Call{
			Index:     len(ex.Calls),
			Arguments: json.RawMessage("{}"),
			Err: messages.Errorf(messages.CodeParseError,
				"the response has more than %d tool calls, the limit; the calls after the first %d were not run",
				x.o.MaxCalls, x.o.MaxCalls),
		})
	}
	return ex
}

func (x *extractor) join(spans []span, sep string) string {
	switch len(spans) {
	case 0:
		return ""
	case 1:
		return strings.TrimSpace(x.text[spans[0].start:spans[0].end])
	}
	var b strings.Builder
	for _, s := range spans {
		part := x.text[s.start:s.end]
		if sep != "" {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteString(sep)
			}
		}
		b.WriteString(part)
	}
	return strings.TrimSpace(b.String())
}

// lineOf returns the 1-based line of offset i; offsets asked for mostly increase.
func (x *extractor) lineOf(i int) int {
	if i < x.lineAt {
		x.lineAt, x.line = 0, 1
	}
	x.line += strings.Count(x.text[x.lineAt:i], "\n")
	x.lineAt = i
	return x.line
}

// blk is the block a call was found in.
type blk struct {
	format     Format
	start, end int
	fixes      fixSet // repairs that apply to every call of the block
}

// parsed is a call read from a block, before it is numbered and checked.
type parsed struct {
	name  string
	args  []byte // a JSON object
	fixes fixSet
	err   string // why the call cannot be read; a sentence without final period
	cause error
}

// add appends a call read from block b.
func (x *extractor) add(b blk, p parsed) {
	if len(x.calls) >= x.o.MaxCalls {
		x.overflow++
		return
	}
	c := Call{
		Index:  len(x.calls),
		Name:   p.name,
		Format: b.format,
		Raw:    x.text[b.start:b.end],
		Start:  b.start,
		End:    b.end,
	}
	fixes := p.fixes | b.fixes
	if p.err == "" {
		args := p.args
		if len(args) == 0 {
			args = []byte("{}")
		} else if x.o.Schemas != nil {
			if coerced, ok := x.coerce(p.name, args); ok {
				args = coerced
				fixes.add(fixSchemaCoercion)
			}
		}
		c.Arguments = json.RawMessage(args)
	} else {
		c.Arguments = json.RawMessage("{}")
		c.Err = &messages.ToolError{
			Code: messages.CodeParseError,
			Message: fmt.Sprintf("the %s at line %d could not be read: %s. %s",
				blockNoun(b.format), x.lineOf(b.start), p.err, formatHint(b.format)),
			Err: p.cause,
		}
	}
	c.Repairs = fixes.names()
	x.calls = append(x.calls, c)
}

// fail adds a failed call for block b.
func (x *extractor) fail(b blk, name string, cause error, format string, args ...any) {
	x.add(b, parsed{name: name, err: fmt.Sprintf(format, args...), cause: cause})
}

func blockNoun(f Format) string {
	switch f {
	case FormatToolCallTag, FormatQwen3Coder, FormatGLM:
		return "<tool_call> block"
	case FormatToolCallsTag:
		return "<tool_calls> block"
	case FormatFunctionCalls:
		return "<function_calls> block"
	case FormatMistral:
		return "[TOOL_CALLS] call"
	case FormatLlamaJSON:
		return "<|python_tag|> call"
	case FormatPythonic:
		return "pythonic call"
	case FormatDeepSeekV3, FormatDeepSeekV31, FormatKimiK2:
		return "tool call"
	}
	return "tool call"
}

func formatHint(f Format) string {
	switch f {
	case FormatQwen3Coder:
		return "Write each call as <tool_call><function=TOOL_NAME><parameter=NAME>value</parameter></function></tool_call>."
	case FormatGLM:
		return "Write each call as <tool_call>TOOL_NAME<arg_key>NAME</arg_key><arg_value>value</arg_value></tool_call>."
	case FormatPythonic, FormatFunctionCalls:
		return "Write each call as TOOL_NAME(name=value, ...) with Python literals as values."
	case FormatMistral:
		return `Write the calls as [TOOL_CALLS][{"name": "TOOL_NAME", "arguments": {...}}].`
	case FormatLlamaJSON:
		return `Write each call as {"name": "TOOL_NAME", "parameters": {...}}.`
	case FormatToolCallsTag:
		return `Write the calls as <tool_calls>[{"name": "TOOL_NAME", "arguments": {...}}]</tool_calls>.`
	case FormatDeepSeekV3, FormatDeepSeekV31:
		return "Write each call as <｜tool▁call▁begin｜>TOOL_NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>."
	case FormatKimiK2:
		return "Write each call as <|tool_call_begin|>functions.TOOL_NAME:0<|tool_call_argument_begin|>{...}<|tool_call_end|>."
	}
	return `Write each call as <tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call> with valid JSON.`
}

func (x *extractor) known(name string) bool {
	return slices.Contains(x.o.KnownTools, name)
}

// jsonCalls reads the JSON values in text[from:to] as calls of block b: an object per
// call, or arrays of them, separated by whitespace, ',' or ';'. It returns where the
// last value ended; what follows it is not part of any call.
func (x *extractor) jsonCalls(b blk, from, to int) int {
	s := x.text[:to]
	pos := from
	for n := 0; ; n++ {
		for pos < to && (s[pos] <= ' ' || s[pos] == ';' || s[pos] == ',' && n > 0) {
			pos++
		}
		if pos >= to || n > 0 && s[pos] != '{' && s[pos] != '[' {
			return pos
		}
		v, end, fixes, err := repairValue(s, pos, x.o.MaxDepth)
		if err != nil {
			x.fail(b, salvageName(s[pos:to]), err, "%s", syntaxMessage(err))
			return to
		}
		x.callsFromValue(b, v, fixes)
		pos = end
	}
}

// syntaxMessage words a RepairJSON error for a call's message.
func syntaxMessage(err error) string {
	var se *SyntaxError
	if errors.As(err, &se) {
		if se.Err != nil {
			return fmt.Sprintf("at line %d, column %d: %s", se.Line, se.Column, se.Msg)
		}
		return fmt.Sprintf("invalid JSON at line %d, column %d: %s", se.Line, se.Column, se.Msg)
	}
	return "invalid JSON: " + err.Error()
}

// callsFromValue adds the calls of a valid JSON value: an object or an array of them.
func (x *extractor) callsFromValue(b blk, v string, fixes fixSet) {
	switch v[0] {
	case '{':
		p := x.callFromObject(v)
		p.fixes |= fixes
		x.add(b, p)
	case '[':
		for it := arrayElements(v); x.overflow == 0; {
			e, ok := it.next()
			if !ok {
				break
			}
			if e[0] != '{' {
				x.fail(b, "", nil, "expected each element of the array to be a call object {\"name\": …, \"arguments\": {…}}, found %s", jsonKind(e))
				continue
			}
			p := x.callFromObject(e)
			p.fixes |= fixes
			x.add(b, p)
		}
	default:
		x.fail(b, "", nil, `expected a JSON object {"name": …, "arguments": {…}}, found %s`, jsonKind(v))
	}
}

// The keys a call object may name its tool and its arguments with, best first.
var (
	nameKeys = []string{`"name"`, `"tool"`, `"tool_name"`, `"function_name"`, `"function"`}
	argsKeys = []string{`"arguments"`, `"parameters"`, `"args"`, `"params"`, `"input"`}
)

// callFromObject reads one call from a valid JSON object.
func (x *extractor) callFromObject(obj string) parsed {
	var name, args, fn string
	nameRank, argsRank := len(nameKeys), len(argsKeys)
	n := 0
	var onlyKey, onlyValue string
	for it := objectMembers(obj); ; n++ {
		k, vs, ve, ok := it.next()
		if !ok {
			break
		}
		v := obj[vs:ve]
		onlyKey, onlyValue = k, v
		if k == `"function"` && v[0] == '{' {
			fn = v
			continue
		}
		if i := slices.Index(nameKeys, k); i >= 0 && i < nameRank {
			name, nameRank = v, i
		}
		if i := slices.Index(argsKeys, k); i >= 0 && i < argsRank {
			args, argsRank = v, i
		}
	}
	if name == "" && fn != "" {
		// OpenAI style: {"type": "function", "function": {"name": …, "arguments": "…"}}
		return x.callFromObject(fn)
	}
	if name == "" {
		// {"get_weather": {"city": "Paris"}}: the tool's name as the only key.
		if n == 1 && onlyValue[0] == '{' {
			if k := decodeString(onlyKey); x.known(k) {
				return parsed{name: k, args: []byte(onlyValue)}
			}
		}
		return parsed{err: `the call has no "name"`}
	}
	if name[0] != '"' {
		return parsed{err: fmt.Sprintf(`"name" must be a string, found %s`, jsonKind(name))}
	}
	p := parsed{name: strings.TrimSpace(decodeString(name))}
	if p.name == "" {
		p.err = `"name" is empty`
		return p
	}
	p.args, p.fixes, p.err, p.cause = x.arguments(args)
	return p
}

// arguments turns the raw value of a call's arguments into a JSON object.
func (x *extractor) arguments(raw string) (args []byte, fixes fixSet, msg string, cause error) {
	switch {
	case raw == "" || raw == "null":
		return []byte("{}"), 0, "", nil
	case raw[0] == '{':
		return []byte(raw), 0, "", nil
	case raw[0] == '"':
		// A JSON string holding the arguments, as OpenAI's API writes them.
		v, fixes, err := repairArguments(decodeString(raw), x.o.MaxDepth, x.o.MaxInputSize)
		if err != nil {
			msg := err.Error()
			var se *SyntaxError
			if errors.As(err, &se) {
				msg = se.Msg
			}
			return nil, 0, `the "arguments" string does not hold a JSON object: ` + msg, err
		}
		fixes.add(fixStringArguments)
		return v, fixes, "", nil
	}
	return nil, 0, fmt.Sprintf(`"arguments" must be a JSON object, found %s`, jsonKind(raw)), nil
}

// decodeString decodes a valid JSON string.
func decodeString(raw string) string {
	if !strings.Contains(raw, `\`) {
		return raw[1 : len(raw)-1]
	}
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return ""
	}
	return s
}

func jsonKind(v string) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// salvageName finds the tool name in a call that cannot be parsed, so that its error
// result can still name the tool.
func salvageName(s string) string {
	for _, key := range []string{`"name"`, `"tool"`, `'name'`, `'tool'`} {
		i := strings.Index(s, key)
		if i < 0 {
			continue
		}
		rest := strings.TrimLeft(s[i+len(key):], " \t\r\n")
		if !strings.HasPrefix(rest, ":") {
			continue
		}
		rest = strings.TrimLeft(rest[1:], " \t\r\n")
		if rest == "" || rest[0] != '"' && rest[0] != '\'' {
			continue
		}
		if j := strings.IndexByte(rest[1:], rest[0]); j > 0 && j < 128 {
			return rest[1 : 1+j]
		}
	}
	return ""
}
