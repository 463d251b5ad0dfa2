package toolcall

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Turning what a block holds into calls.

// blk is the block a call was found in.
type blk struct {
	format     Format
	start, end int
	fixes      fixSet // repairs that apply to every call of the block
}

// parsed is a call read from a block, before it is numbered and checked.
type parsed struct {
	name  string
	id    string // the call's own id, where its format gives one
	args  []byte // a JSON object
	fixes fixSet
	err   string // why the call cannot be read; a sentence without final period
	cause error
	// whole: the call was read to its end although it fails (a value without a JSON
	// equivalent), so the calls after it are read on.
	whole bool
	// plain: err is the whole message, about the response rather than one call.
	plain bool
}

// add appends a call read from block b.
func (x *extractor) add(b blk, p parsed) {
	if len(x.calls) >= overflowCap*x.o.MaxCalls {
		x.overflow++
		return
	}
	if x.calls == nil {
		x.calls = make([]Call, 0, x.estimateCalls(b))
	}
	c := Call{
		Index:  len(x.calls),
		ID:     p.id,
		Name:   p.name,
		Format: b.format,
		Raw:    x.text[b.start:b.end],
		Start:  b.start,
		End:    b.end,
	}
	fixes := p.fixes | b.fixes
	if p.err == "" && len(p.args) > 0 && p.args[0] != '{' {
		// Arguments repaired into something else ({'a', 'b'} is a set, a list): a call's
		// arguments are an object, whatever the format.
		p.err = "expected the arguments as a JSON object, found " + jsonrepair.Kind(string(p.args))
	}
	if p.err == "" {
		args := p.args
		if len(args) == 0 {
			args = []byte("{}")
		} else if x.o.Schemas != nil && (!IsAPI(b.format) || b.format.repairs()) {
			if coerced, ok := x.coerce(p.name, args); ok {
				args = coerced
				fixes |= fixSchemaCoercion
			}
		}
		c.Arguments = json.RawMessage(args)
	} else {
		c.Arguments = json.RawMessage("{}")
		msg := p.err
		if !p.plain {
			msg = fmt.Sprintf("the %s %s could not be read: %s. %s",
				blockNoun(b.format), x.where(&c, b), p.err, formatHint(b.format))
		}
		c.Err = &messages.ToolError{Code: messages.CodeParseError, Message: msg, Err: p.cause}
	}
	c.Repairs = fixes.names()
	if c.Index >= x.o.MaxCalls {
		// Beyond the limit: answered, not run, so the model knows which calls to send again.
		c.Arguments = json.RawMessage("{}")
		c.Err = messages.Errorf(messages.CodeParseError,
			"the response has more than %d tool calls, the limit; this one (call %d) was not run: send it again in a later response",
			x.o.MaxCalls, c.Index+1)
	}
	x.calls = append(x.calls, c)
}

// where names a call that could not be read to the model that wrote it: by its line in
// text it wrote, and in a hosted API's response (one line of JSON) by its place among
// the calls and the id the API gave it.
func (x *extractor) where(c *Call, b blk) string {
	if !IsAPI(b.format) {
		return fmt.Sprintf("at line %d", x.lineOf(b.start))
	}
	if c.ID != "" {
		return fmt.Sprintf("(call %d, id %s)", c.Index+1, messages.EchoName(c.ID))
	}
	return fmt.Sprintf("(call %d)", c.Index+1)
}

// overflowCap bounds the calls beyond MaxCalls that are answered one by one, in units of
// MaxCalls: a response of thousands of calls costs a bounded number of messages, the
// rest answered together by one failed call.
const overflowCap = 2

// estimateCalls guesses how many calls the response holds when its first one is read
// from b: one, plus as many again as the text after b holds b's first bytes (at most 16),
// so that a response of many calls grows its slice once rather than five times.
func (x *extractor) estimateCalls(b blk) int {
	open := x.text[b.start:min(b.end, b.start+6)]
	n := 1
	if len(open) == 6 && b.end < len(x.text) {
		n += min(strings.Count(x.text[b.end:], open), 15)
	}
	return min(n, x.o.MaxCalls)
}

// copyArgs copies raw into the run's argument slab: the arguments of a response's
// calls share one allocation. Each gets a slice capped at its own length, so appending
// to one never touches the next.
func (x *extractor) copyArgs(raw string) []byte {
	if len(raw) > cap(x.slab)-len(x.slab) {
		if len(raw) > 1024 {
			return []byte(raw)
		}
		// Room for this call's arguments and as many more of the same size as the
		// response is expected to hold.
		more := max(cap(x.calls)-len(x.calls), 1)
		x.slab = make([]byte, 0, max(min(more*len(raw), 4096), len(raw)))
	}
	n := len(x.slab)
	x.slab = append(x.slab, raw...)
	return x.slab[n:len(x.slab):len(x.slab)]
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
	case FormatDeepSeekV32:
		return "<｜DSML｜invoke> call"
	case FormatMistral:
		return "[TOOL_CALLS] call"
	case FormatOpenAI, FormatOllama:
		return apiName(f) + " tool call"
	case FormatOpenAIResponses:
		return "Responses function_call item"
	case FormatAnthropic:
		return "tool_use block"
	case FormatGemini:
		return "functionCall part"
	case FormatBedrock:
		return "toolUse block"
	case FormatLlamaJSON:
		return "<|python_tag|> call"
	case FormatPythonic:
		return "pythonic call"
	case FormatHarmony:
		return "Harmony message"
	case FormatGemma4:
		return "<|tool_call> call"
	case FormatFunctionGemma:
		return "<start_function_call> call"
	case FormatToolCode:
		return "tool_code call"
	case FormatMiniMax:
		return "<minimax:tool_call> block"
	case FormatSeedOSS:
		return "<seed:tool_call> block"
	case FormatApertus:
		return "<|tools_prefix|> block"
	case FormatCohere:
		return "<|START_ACTION|> block"
	case FormatFunctionaryV31:
		return "<function=…> call"
	case FormatFunctionaryV32:
		return ">>> call"
	case FormatLFM2:
		return "<|tool_call_start|> block"
	case FormatLongCat:
		return "<longcat_tool_call> block"
	case FormatNemotron:
		return "<TOOLCALL> block"
	case FormatGranite:
		return "<|tool_call|> block"
	case FormatPhi4Mini:
		return "functools[…] block"
	}
	return "tool call"
}

func formatHint(f Format) string {
	switch f {
	case FormatOpenAI, FormatOpenAIResponses, FormatOllama, FormatAnthropic, FormatGemini, FormatBedrock:
		return "Call the tool again with its arguments as one complete JSON object."
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
	case FormatDeepSeekV32:
		return `Write each call as <｜DSML｜invoke name="TOOL_NAME"><｜DSML｜parameter name="NAME" string="true">value</｜DSML｜parameter></｜DSML｜invoke> inside <｜DSML｜function_calls>.`
	case FormatHarmony:
		return "Write each call as a commentary message to=functions.TOOL_NAME whose body is a JSON object of arguments."
	case FormatGemma4:
		return `Write each call as <|tool_call>call:TOOL_NAME{name:<|"|>text<|"|>,number:1}<tool_call|>.`
	case FormatFunctionGemma:
		return "Write each call as <start_function_call>call:TOOL_NAME{name:<escape>text<escape>}<end_function_call>."
	case FormatToolCode:
		return "Write each call as TOOL_NAME(name=value, ...) with Python literals as values, in a tool_code fence."
	case FormatMiniMax, FormatStep3:
		return `Write each call as <invoke name="TOOL_NAME"><parameter name="NAME">value</parameter></invoke>.`
	case FormatSeedOSS:
		return "Write each call as <seed:tool_call><function=TOOL_NAME><parameter=NAME>value</parameter></function></seed:tool_call>."
	case FormatApertus:
		return `Write the calls as <|tools_prefix|>[{"TOOL_NAME": {...}}]<|tools_suffix|>.`
	case FormatCohere:
		return `Write the calls as <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "TOOL_NAME", "parameters": {...}}]<|END_ACTION|>.`
	case FormatFunctionaryV31:
		return "Write each call as <function=TOOL_NAME>{...}</function> with a JSON object of arguments."
	case FormatFunctionaryV32:
		return "Write each call as >>>TOOL_NAME followed by a line holding a JSON object of arguments."
	case FormatLFM2:
		return "Write the calls as <|tool_call_start|>[TOOL_NAME(name=value, ...)]<|tool_call_end|> with Python literals as values."
	case FormatLongCat, FormatNemotron, FormatGranite, FormatPhi4Mini, FormatGigaChat:
		return `Write each call as {"name": "TOOL_NAME", "arguments": {...}} with valid JSON.`
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
	for n := 0; x.overflow == 0; n++ {
		for pos < to && (s[pos] <= ' ' || s[pos] == ';' || s[pos] == ',' && n > 0) {
			pos++
		}
		if pos >= to || n > 0 && s[pos] != '{' && s[pos] != '[' {
			return pos
		}
		v, end, fixes, err := x.repairValue(s, pos)
		if err != nil {
			// One call that cannot be read fails alone: the calls on the lines after it
			// are read on (JSON Lines, as MiniMax-M1 writes them).
			next := nextLineValue(s, pos, to)
			x.fail(b, salvageName(s[pos:next]), err, "%s", syntaxMessage(err))
			if next == to {
				return to
			}
			pos = next
			continue
		}
		x.callsFromValue(b, v, fixes)
		pos = end
	}
	return to
}

// nextLineValue returns where the next line of s[from:to] that starts with '{' starts
// (after its indentation), or to.
func nextLineValue(s string, from, to int) int {
	for i := from; i < to; {
		j := strings.IndexByte(s[i:to], '\n')
		if j < 0 {
			return to
		}
		i += j + 1
		k := i
		for k < to && (s[k] == ' ' || s[k] == '\t') {
			k++
		}
		if k < to && s[k] == '{' {
			return k
		}
	}
	return to
}

// syntaxMessage words a jsonrepair error for a call's message.
func syntaxMessage(err error) string {
	var se *jsonrepair.SyntaxError
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
				x.fail(b, "", nil, "expected each element of the array to be a call object {\"name\": …, \"arguments\": {…}}, found %s", jsonrepair.Kind(e))
				continue
			}
			p := x.callFromObject(e)
			p.fixes |= fixes
			x.add(b, p)
		}
	default:
		x.fail(b, "", nil, `expected a JSON object {"name": …, "arguments": {…}}, found %s`, jsonrepair.Kind(v))
	}
}

// The keys a call object may name its tool and its arguments with, best first.
var (
	nameKeys = []string{`"name"`, `"tool"`, `"tool_name"`, `"function_name"`, `"function"`}
	argsKeys = []string{`"arguments"`, `"parameters"`, `"args"`, `"params"`, `"input"`}
)

// memberRole says whether a call object's key names the tool (isName) or the
// arguments, and its rank among nameKeys or argsKeys; ok is false for other keys. It is
// the position of key in either list, as one switch (a few comparisons instead of ten).
func memberRole(key string) (rank int, isName, ok bool) {
	switch key {
	case `"name"`:
		return 0, true, true
	case `"tool"`:
		return 1, true, true
	case `"tool_name"`:
		return 2, true, true
	case `"function_name"`:
		return 3, true, true
	case `"function"`:
		return 4, true, true
	case `"arguments"`:
		return 0, false, true
	case `"parameters"`:
		return 1, false, true
	case `"args"`:
		return 2, false, true
	case `"params"`:
		return 3, false, true
	case `"input"`:
		return 4, false, true
	}
	return 0, false, false
}

// callFromObject reads one call from a valid JSON object.
func (x *extractor) callFromObject(obj string) parsed {
	if obj == "" || obj[0] != '{' {
		// Text that opened with '{' and was repaired into something else: {'a', 'b'}
		// is a set, an array.
		return parsed{err: "expected a JSON object with the call's \"name\", found " + jsonrepair.Kind(obj)}
	}
	var name, args, fn string
	nameRank, argsRank := len(nameKeys), len(argsKeys)
	n := 0
	var onlyKey, onlyValue string
	for it := objectMembers(obj, &x.rec); ; n++ {
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
		switch i, isName, ok := memberRole(k); {
		case !ok:
		case isName && i < nameRank:
			name, nameRank = v, i
		case !isName && i < argsRank:
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
			if k := decodeString(onlyKey); x.known(k) || x.anyKey && k != "" {
				return parsed{name: k, args: x.copyArgs(onlyValue)}
			}
		}
		return parsed{err: `the call has no "name"`}
	}
	if name[0] != '"' {
		return parsed{err: fmt.Sprintf(`"name" must be a string, found %s`, jsonrepair.Kind(name))}
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
		return x.copyArgs(raw), 0, "", nil
	case raw[0] == '"':
		// A JSON string holding the arguments, as OpenAI's API writes them.
		v, fixes, err := x.limits().RepairArguments(decodeString(raw))
		if err != nil {
			msg := err.Error()
			var se *jsonrepair.SyntaxError
			if errors.As(err, &se) {
				msg = se.Msg
			}
			return nil, 0, `the "arguments" string does not hold a JSON object: ` + msg, err
		}
		return v, fixSet(fixes | jsonrepair.StringArguments), "", nil
	}
	return nil, 0, fmt.Sprintf(`"arguments" must be a JSON object, found %s`, jsonrepair.Kind(raw)), nil
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
