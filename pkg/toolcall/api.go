package toolcall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/jsonscan"
)

// The hosted APIs' structured tool calls. A response body that is an API's response
// object (or its message, content or output list), or the data of its streaming events
// one after another, is read as that API gives its calls: each call with the API's id,
// its arguments as the API wrote them (a JSON string or an object), its text and
// reasoning blocks as content and reasoning, and nothing else run — server-side tools
// (web search, code execution, MCP calls the vendor made) are the vendor's, not ours.

// The APIs' formats.
const (
	// FormatOpenAI: OpenAI's Chat Completions — a chat.completion (its first choice),
	// its assistant message, or its chat.completion.chunk events — with tool_calls
	// {id, function: {name, arguments}} whose arguments are a JSON string, and the legacy
	// function_call. Every OpenAI-compatible server writes it (vLLM, SGLang, llama.cpp,
	// LiteLLM); their broken argument strings are repaired.
	FormatOpenAI Format = "openai"
	// FormatOpenAIResponses: OpenAI's Responses API — a response object, its output
	// list or one item, or its response.* streaming events — whose function_call items
	// carry call_id, name and a JSON string of arguments.
	FormatOpenAIResponses Format = "openai_responses"
	// FormatAnthropic: Anthropic's Messages API — a message, its content array, or its
	// streaming events (content_block_start, input_json_delta, content_block_stop, …) —
	// whose tool_use blocks carry id, name and an input object.
	FormatAnthropic Format = "anthropic"
	// FormatGemini: Gemini's generateContent — a response (its first candidate), a
	// Content, its parts, or streamed responses — whose functionCall parts carry name,
	// args and, where the API gives one, id.
	FormatGemini Format = "gemini"
	// FormatBedrock: Amazon Bedrock's Converse — a response, its message, its content, or
	// ConverseStream's events — whose toolUse blocks carry toolUseId, name and input.
	FormatBedrock Format = "bedrock"
	// FormatOllama: Ollama's /api/chat — a response or its streamed NDJSON chunks —
	// whose tool_calls carry an arguments object (and, in newer versions, an id).
	FormatOllama Format = "ollama"
)

// APIFormats lists the hosted APIs' formats.
func APIFormats() []Format {
	return []Format{FormatOpenAI, FormatOpenAIResponses, FormatAnthropic, FormatGemini, FormatBedrock, FormatOllama}
}

// ParseOutputFormat returns the API named s whose native next turn an output may carry
// (one of [APIFormats]); "" gives "".
func ParseOutputFormat(s string) (Format, error) {
	if s == "" || IsAPI(Format(s)) {
		return Format(s), nil
	}
	names := make([]string, 0, 6)
	for _, f := range APIFormats() {
		names = append(names, string(f))
	}
	return "", fmt.Errorf("unknown output format %q (one of %s)", s, strings.Join(names, ", "))
}

// IsAPI reports whether f is a hosted API's format.
func IsAPI(f Format) bool {
	switch f {
	case FormatOpenAI, FormatOpenAIResponses, FormatAnthropic, FormatGemini, FormatBedrock, FormatOllama:
		return true
	}
	return false
}

// repairs reports whether the API's argument strings may be broken JSON that is
// repaired: OpenAI-compatible servers and Ollama write them from a model's text. The
// others' arguments are objects the vendor's own decoder built (or, streamed, their
// fragments), read strictly.
func (f Format) repairs() bool {
	return f == FormatOpenAI || f == FormatOpenAIResponses || f == FormatOllama
}

// block kinds of an API response.
const (
	apiText = iota + 1
	apiReasoning
	apiCall
	apiOther // server-side tools' blocks, refusals' metadata: never run
)

// apiBlock is one block of an API response's content, in order.
type apiBlock struct {
	kind     int
	text     []byte // text, reasoning, or a call's arguments as text
	id, name string
	// args is a call's arguments as a JSON value (an object, null) when the API gave
	// them so; otherwise text holds them, to be read as JSON.
	args     string
	hasArgs  bool
	done     bool
	start    int // where its item or first event is in the response
	end      int
	key      string // the stream's key of the block (its index)
	fromText bool   // args came as a JSON string or fragments, not an object
	// cut: the response ended inside an event that was part of the block; the block
	// is never run, whatever a repair of the event would make of it.
	cut bool
	// open: the API said more of the call is coming (Gemini's willContinue); it is not
	// complete until it says the call ended, whatever else ends.
	open bool
	// err: an event of the stream that could not be read, answered in its place.
	err string
}

// apiReader gathers the blocks of one API response.
type apiReader struct {
	format Format
	blocks []*apiBlock
	// finished: the response says it ended (a finish reason, message_stop, …).
	finished bool
	stream   bool
	at       int // offset of the value being read
	atEnd    int
	firstSum uint64 // the hash of the stream's first event (its resume key)
	// cutting: the event being read is the repaired rest of an event the response
	// ended inside; every block it touches is cut.
	cutting bool
	// partial is the Gemini call whose arguments Vertex AI is streaming, if any, and
	// partialArgs what came of them.
	partial     *apiBlock
	partialArgs pathArgs
}

func (r *apiReader) add(kind int) *apiBlock {
	b := &apiBlock{kind: kind, start: r.at, end: r.atEnd, cut: r.cutting}
	r.blocks = append(r.blocks, b)
	return b
}

// find returns the block of a stream keyed key, or nil.
func (r *apiReader) find(key string) *apiBlock {
	for i := len(r.blocks) - 1; i >= 0; i-- {
		if r.blocks[i].key == key {
			if r.cutting {
				r.blocks[i].cut = true
			}
			return r.blocks[i]
		}
	}
	return nil
}

// appendText adds text of kind to the last block when it is of that kind, else to a
// new one.
func (r *apiReader) appendText(kind int, s string) {
	if s == "" {
		return
	}
	if n := len(r.blocks); n > 0 && r.blocks[n-1].kind == kind {
		r.blocks[n-1].text = append(r.blocks[n-1].text, s...)
		return
	}
	b := r.add(kind)
	b.text = append(b.text, s...)
}

// call adds a call block.
func (r *apiReader) call(id, name string, args json.RawMessage, done bool) *apiBlock {
	b := r.add(apiCall)
	b.id, b.name, b.done = id, name, done
	b.setArgs(args)
	return b
}

// setArgs sets the arguments from a JSON value: a string holds them as text.
func (b *apiBlock) setArgs(args json.RawMessage) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		return
	}
	if args[0] == '"' {
		var s string
		if json.Unmarshal(args, &s) == nil {
			b.text = append(b.text[:0], s...)
			b.fromText, b.hasArgs, b.args = true, false, ""
			return
		}
	}
	b.args, b.hasArgs, b.fromText = string(args), true, false
	b.text = b.text[:0]
}

// sseData returns the data of the events of an SSE stream written as such (lines
// "event: …", "data: …"), one value after another, when text is one; the "[DONE]" an
// OpenAI stream ends with is left out.
func sseData(text string) (string, bool) {
	t := strings.TrimLeft(text, " \t\r\n")
	if !strings.HasPrefix(t, "data:") && !strings.HasPrefix(t, "event:") {
		return text, false
	}
	var b strings.Builder
	for line := range strings.Lines(t) {
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			d = strings.TrimSpace(d)
			if d != "[DONE]" {
				b.WriteString(d)
				b.WriteByte('\n')
			}
		}
	}
	return b.String(), true
}

// apiValues splits text into the JSON values written one after another (a whole
// response is one; a stream's events are many). A "[DONE]" between them is skipped.
// complete is false when the text ends inside a value, which is then left out.
func apiValues(text string, from, maxDepth int) (vals []span, complete bool) {
	pos := from
	for {
		pos = jsonscan.SkipSpace(text, pos)
		if pos >= len(text) {
			return vals, true
		}
		if strings.HasPrefix(text[pos:], "[DONE]") {
			pos += len("[DONE]")
			continue
		}
		end, res := jsonscan.Value(text, pos, maxDepth, jsonscan.Strict)
		if res != jsonscan.OK {
			return vals, false
		}
		vals = append(vals, span{pos, end})
		pos = end
	}
}

// resume is where a stream's events were read up to: data[:end] (its hash sum), the
// reader's state after them, and the span of its first event, which keys it.
type resume struct {
	first  span
	key    uint64
	end    int
	sum    uint64
	format Format
	reader *apiReader
}

// resumeCache keeps the resume points of the streams read last, a bounded number.
type resumeCache struct {
	mu    sync.Mutex
	by    map[uint64]*resume
	order []uint64 // keys, oldest first
	max   int
}

var (
	resumes   = &resumeCache{by: map[uint64]*resume{}, max: 512}
	resumeKey = maphash.MakeSeed()
)

// prefixSum is the hash of data[:end].
func prefixSum(data string, end int) uint64 { return maphash.String(resumeKey, data[:end]) }

// lookup returns the resume point of the stream data begins, if one is kept and data
// holds all that it read.
func (c *resumeCache) lookup(data string, maxDepth int) *resume {
	i := jsonscan.SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil
	}
	end, res := jsonscan.Value(data, i, maxDepth, jsonscan.Strict)
	if res != jsonscan.OK {
		return nil
	}
	key := prefixSum(data, end)
	c.mu.Lock()
	r := c.by[key]
	c.mu.Unlock()
	if r == nil || r.first != (span{i, end}) || r.end > len(data) || prefixSum(data, r.end) != r.sum {
		return nil
	}
	return r
}

// store keeps r, the latest resume point of its stream.
func (c *resumeCache) store(r *resume) {
	// The key is the hash of the stream's first event, as lookup computes it.
	r.key = r.reader.firstSum
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.by[r.key]; !ok {
		c.order = append(c.order, r.key)
		if len(c.order) > c.max {
			delete(c.by, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.by[r.key] = r
}

// clone returns a copy of r that shares nothing r may change.
func (r *apiReader) clone() *apiReader {
	c := *r
	c.blocks = make([]*apiBlock, len(r.blocks), len(r.blocks)+4)
	for i, b := range r.blocks {
		nb := *b
		nb.text = append([]byte(nil), b.text...)
		c.blocks[i] = &nb
		if r.partial == b {
			c.partial = &nb
		}
	}
	c.partialArgs = append(pathArgs(nil), r.partialArgs...)
	return &c
}

// apiShaped reports, without allocating, whether the JSON value at text[i] (an object,
// or an array whose first element is one) has a member that an API's response, item or
// event has and a call written as bare JSON has not.
func apiShaped(text string, i, maxDepth int) bool {
	end, res := jsonscan.Value(text, i, maxDepth, jsonscan.Strict)
	if res != jsonscan.OK {
		// A stream's first event followed by more: read the first alone.
		return false
	}
	v := text[i:end]
	if v[0] == '[' {
		it := arrayElements(v)
		e, ok := it.next()
		if !ok || e == "" || e[0] != '{' {
			return false
		}
		v = e
	}
	if v[0] != '{' {
		return false
	}
	for it := objectMembers(v, nil); ; {
		k, _, _, ok := it.next()
		if !ok {
			return false
		}
		switch k {
		case `"choices"`, `"object"`, `"type"`, `"candidates"`, `"output"`, `"message"`, `"role"`,
			`"parts"`, `"functionCall"`, `"function_call"`, `"toolUse"`, `"reasoningContent"`, `"text"`,
			`"messageStart"`, `"contentBlockStart"`, `"contentBlockDelta"`, `"contentBlockStop"`,
			`"messageStop"`, `"metadata"`, `"call_id"`:
			return true
		}
	}
}

// SplitEvents returns the events of a hosted API's stream written one after another
// (each event's data: JSON values back to back or one per line, or SSE "data:" lines),
// each as the orchestrator forwards it, one chunk per event; nil when text is not such
// a stream (one value, or not an API's).
func SplitEvents(text string) []string {
	data, _ := sseData(text)
	vals, complete := apiValues(data, 0, DefaultMaxDepth)
	if len(vals) < 2 || !complete {
		return nil
	}
	if f, _ := detectAPI(data[vals[0].start:vals[0].end]); f == "" {
		return nil
	}
	events := make([]string, len(vals))
	for i, v := range vals {
		events[i] = data[v.start:v.end] + "\n"
	}
	return events
}

// detectAPI returns the API whose response, or whose first streaming event, v (a JSON
// value) is, and whether it is a stream's event; "" when it is none.
func detectAPI(v string) (f Format, event bool) {
	if v == "" {
		return "", false
	}
	if v[0] == '[' {
		var items []map[string]json.RawMessage
		if json.Unmarshal([]byte(v), &items) != nil {
			return "", false
		}
		// The first item that tells: a text part ({"text"}) is Gemini's and Bedrock's alike.
		for _, it := range items {
			if f := detectItem(it); f != "" {
				return f, false
			}
		}
		return "", false
	}
	var m map[string]json.RawMessage
	if v[0] != '{' || json.Unmarshal([]byte(v), &m) != nil {
		return "", false
	}
	typ, object, role := str(m["type"]), str(m["object"]), str(m["role"])
	switch {
	case object == "chat.completion.chunk":
		return FormatOpenAI, true
	case object == "chat.completion" || has(m, "choices"):
		return FormatOpenAI, false
	case object == "response":
		return FormatOpenAIResponses, false
	case strings.HasPrefix(typ, "response."):
		return FormatOpenAIResponses, true
	case typ == "message" && has(m, "content") && role == "assistant":
		return FormatAnthropic, false
	case typ == "message_start" || typ == "content_block_start" || typ == "content_block_delta" ||
		typ == "content_block_stop" || typ == "message_delta" || typ == "message_stop" || typ == "ping":
		return FormatAnthropic, true
	case has(m, "candidates"):
		return FormatGemini, false
	case has(m, "messageStart") || has(m, "contentBlockStart") || has(m, "contentBlockDelta") ||
		has(m, "contentBlockStop") || has(m, "messageStop") || has(m, "metadata") && len(m) == 1:
		return FormatBedrock, true
	case has(m, "output") && strings.HasPrefix(strings.TrimSpace(string(m["output"])), "{"):
		return FormatBedrock, false
	case has(m, "message") && (has(m, "done") || has(m, "created_at")):
		return FormatOllama, false
	case role == "model" && has(m, "parts"):
		return FormatGemini, false
	case role == "assistant" && (has(m, "tool_calls") || has(m, "function_call")):
		return FormatOpenAI, false
	case role == "assistant" && has(m, "content"):
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(m["content"], &blocks) == nil && len(blocks) > 0 {
			if has(blocks[0], "type") {
				return FormatAnthropic, false
			}
			return FormatBedrock, false
		}
	case typ == "function_call" && has(m, "call_id"):
		return FormatOpenAIResponses, false
	}
	return "", false
}

// detectItem returns the API whose content list or output list begins with item.
func detectItem(item map[string]json.RawMessage) Format {
	switch str(item["type"]) {
	case "function_call", "reasoning", "web_search_call", "file_search_call", "computer_call",
		"code_interpreter_call", "mcp_call", "custom_tool_call", "image_generation_call":
		return FormatOpenAIResponses
	case "message":
		if has(item, "role") && has(item, "content") {
			return FormatOpenAIResponses
		}
	case "tool_use", "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result":
		return FormatAnthropic
	case "text":
		return FormatAnthropic
	}
	switch {
	case has(item, "functionCall") || has(item, "function_call") && !has(item, "type"):
		return FormatGemini
	case has(item, "toolUse") || has(item, "reasoningContent"):
		return FormatBedrock
	}
	return ""
}

func has(m map[string]json.RawMessage, k string) bool { _, ok := m[k]; return ok }

// str is a JSON string value, or "".
func str(v json.RawMessage) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}

// apiResponse reads x.text as a hosted API's response when the format is pinned to
// one, or, detected, when the text is one (a single JSON value, or streaming events,
// shaped as an API's); it reports whether it did.
func (x *extractor) apiResponse() bool {
	pinned := x.o.Format
	if pinned != FormatAuto && !IsAPI(pinned) {
		return false
	}
	t := x.text
	i := jsonscan.SkipSpace(t, 0)
	if i >= len(t) {
		return false
	}
	if c := t[i]; c != '{' && c != '[' && c != 'd' && c != 'e' {
		if IsAPI(pinned) {
			x.apiFail(pinned, 0, len(t), "the response was sent as the %s API's (%s), but it is text beginning %q", apiName(pinned), pinned, head(t[i:]))
			return true
		}
		return false
	}
	if !IsAPI(pinned) && (t[i] == '{' || t[i] == '[') && !apiShaped(t, i, x.o.MaxDepth) {
		// The text formats' bare JSON takes this path: no allocation for it.
		return false
	}
	data, sse := sseData(t)
	if sse && data == "" && !IsAPI(pinned) {
		return false
	}
	// A stream read before up to a point (the parser reads a streamed response again at
	// each chunk) is read on from there: reading it is linear in its events, not
	// quadratic.
	res := resumes.lookup(data, x.o.MaxDepth)
	from := 0
	if res != nil {
		from = res.end
	}
	vals, complete := apiValues(data, from, x.o.MaxDepth)
	if res != nil {
		vals = append([]span{res.first}, vals...)
	}
	if len(vals) == 0 {
		if IsAPI(pinned) {
			x.apiFail(pinned, 0, len(t), "the response was sent as the %s API's (%s), but it is not valid JSON", apiName(pinned), pinned)
			return true
		}
		return false
	}
	f, event := detectAPI(data[vals[0].start:vals[0].end])
	if f == "" && IsAPI(pinned) && len(vals) > 1 {
		f, event = pinned, true
	}
	if pinned != FormatAuto {
		if f != pinned && f != "" && !(pinned == FormatOllama && f == FormatOpenAI) && !(pinned == FormatOpenAI && f == FormatOllama) {
			x.apiFail(pinned, 0, len(t), "the response was sent as the %s API's (%s), but it reads as the %s API's", apiName(pinned), pinned, apiName(f))
			return true
		}
		if f == "" {
			f = pinned
		}
		if f == FormatOpenAI && pinned == FormatOllama || f == FormatOllama && pinned == FormatOpenAI {
			f = pinned
		}
	}
	if f == "" {
		return false
	}
	if res != nil {
		event = true // only a stream of several events is resumed
	}
	if !event && (len(vals) > 1 || !complete) {
		// Several whole responses one after another: Gemini's and Ollama's streams.
		if f != FormatGemini && f != FormatOllama && f != FormatOpenAI {
			if pinned == FormatAuto {
				return false
			}
		}
		event = true
	}
	// A lone whole response settles nothing before its stream ends: more values after
	// it make it a stream of several, read otherwise.
	lone := !event && len(vals) == 1 && res == nil
	r := &apiReader{format: f, stream: event, firstSum: prefixSum(data, vals[0].end)}
	read := vals
	if res != nil && res.format == f && event {
		r, read = res.reader.clone(), vals[1:]
	}
	for _, v := range read {
		r.at, r.atEnd = v.start, v.end
		if sse {
			r.at, r.atEnd = 0, len(t)
		}
		val := data[v.start:v.end]
		if !event {
			if err := r.whole(val); err != nil {
				x.apiFail(f, r.at, r.atEnd, "the %s response: %s", apiName(f), err.Error())
				return true
			}
			continue
		}
		if err := r.event(val); err != nil {
			// Answered in its place; the events around it are read.
			b := r.add(apiCall)
			b.err, b.done = fmt.Sprintf("the %s stream's event at byte %d could not be read: %s", apiName(f), v.start, err.Error()), true
		}
	}
	if event && len(vals) > 1 {
		last := vals[len(vals)-1].end
		resumes.store(&resume{first: vals[0], end: last, sum: prefixSum(data, last), format: f, reader: r})
		if !complete || !r.stream {
			r = r.clone() // the stored reader is read, never written
		}
	}
	if !complete && event {
		// The response ended inside an event: what it began is read, repaired, and
		// every block it touches is cut (a call's start, a fragment of its arguments),
		// so that no call is lost and none runs with what the event did not finish.
		last := 0
		if n := len(vals); n > 0 {
			last = vals[n-1].end
		}
		if v, _, _, ok := x.readValue(data, last); ok && v != "" && (v[0] == '{' || v[0] == '[') {
			r.at, r.atEnd, r.cutting = last, len(data), true
			if sse {
				r.at, r.atEnd = 0, len(t)
			}
			_ = r.event(v)
			r.cutting = false
		}
	}
	if !r.stream {
		r.finished = true
	}
	x.apiCalls(r)
	if lone {
		x.settledCalls = 0
	}
	return true
}

func head(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return s
}

// apiName is the API's name in messages.
func apiName(f Format) string {
	switch f {
	case FormatOpenAI:
		return "OpenAI Chat Completions"
	case FormatOpenAIResponses:
		return "OpenAI Responses"
	case FormatAnthropic:
		return "Anthropic Messages"
	case FormatGemini:
		return "Gemini"
	case FormatBedrock:
		return "Bedrock Converse"
	case FormatOllama:
		return "Ollama"
	}
	return string(f)
}

// apiFail answers the whole response with one parse error.
func (x *extractor) apiFail(f Format, start, end int, format string, args ...any) {
	x.api = true
	x.add(blk{format: f, start: start, end: end}, parsed{plain: true,
		err: fmt.Sprintf(format, args...) + "; no tool call was read from it"})
}

// apiCalls turns the blocks read into the extraction's calls, content and reasoning.
func (x *extractor) apiCalls(r *apiReader) {
	x.api = true
	var content, reasoning []string
	n := 0
	for _, b := range r.blocks {
		if b.kind == apiCall {
			n++
		}
	}
	if n > 0 && x.calls == nil {
		x.calls = make([]Call, 0, min(n, overflowCap*x.o.MaxCalls))
	}
	for _, b := range r.blocks {
		switch b.kind {
		case apiText:
			content = append(content, string(b.text))
		case apiReasoning:
			reasoning = append(reasoning, string(b.text))
		case apiCall:
			if x.overflow > 0 {
				continue
			}
			done := (b.done || r.finished) && !b.cut && !b.open
			p := x.apiArguments(r.format, b, done)
			p.name, p.id = strings.TrimSpace(b.name), b.id
			if p.name == "" && p.err == "" && b.err == "" {
				p.err = "the call has no name"
			}
			// A block of a stream resumed from an earlier text spans that text's bytes:
			// an SSE stream's block is the whole text, which may now be shorter (the
			// same events, written with fewer spaces or blank lines).
			end := min(b.end, len(x.text))
			x.add(blk{format: r.format, start: min(b.start, end), end: end}, p)
			if !done {
				x.unsettled++
			}
			if x.unsettled == 0 {
				x.settledCalls = len(x.calls)
			}
		}
	}
	x.apiContent = strings.TrimSpace(strings.Join(content, ""))
	x.apiReasoning = strings.TrimSpace(strings.Join(reasoning, "\n"))
}

// apiArguments reads a call block's arguments as a JSON object: an object the API gave
// as it is; a string (or streamed fragments) as JSON, repaired where the API allows
// it, and a parse error where its text ends inside a value (the model was cut off).
func (x *extractor) apiArguments(f Format, b *apiBlock, done bool) parsed {
	if b.err != "" {
		return parsed{err: b.err, plain: true}
	}
	if b.cut {
		return parsed{err: "the call was cut off: the response ended inside the event that carried it, so it was not run"}
	}
	if b.open {
		return parsed{err: "the call was cut off: the response ended before the rest of its arguments came, so it was not run"}
	}
	if b.hasArgs {
		switch b.args[0] {
		case '{':
			return parsed{args: []byte(b.args)}
		case 'n':
			return parsed{args: []byte("{}")}
		}
		return parsed{err: "the arguments must be a JSON object, found " + jsonrepair.Kind(b.args)}
	}
	s := string(b.text)
	if strings.TrimSpace(s) == "" {
		return parsed{args: []byte("{}")}
	}
	if !f.repairs() && done {
		t := strings.TrimSpace(s)
		if end, res := jsonscan.Value(t, 0, x.o.MaxDepth, jsonscan.Strict); res != jsonscan.OK || end != len(t) {
			return parsed{err: "the arguments are not valid JSON: " + strconv.Quote(head(t))}
		}
		if t[0] != '{' {
			return parsed{err: "the arguments must be a JSON object, found " + jsonrepair.Kind(t)}
		}
		return parsed{args: []byte(t)}
	}
	v, fixes, err := x.limits().RepairArguments(s)
	if err != nil {
		msg := err.Error()
		var se *jsonrepair.SyntaxError
		if errors.As(err, &se) {
			msg = se.Msg
		}
		return parsed{err: "the arguments do not hold a JSON object: " + msg, cause: err}
	}
	if !f.repairs() && fixes&^(jsonrepair.UnclosedObject|jsonrepair.UnclosedArray) != 0 && fixes&(jsonrepair.TruncatedValue|jsonrepair.UnclosedString) == 0 {
		// The stream of a strict API ended before the call's end: its closers alone
		// are supplied, nothing else is repaired.
		return parsed{err: "the arguments are not valid JSON: " + strconv.Quote(head(strings.TrimSpace(s)))}
	}
	if fixes&(jsonrepair.TruncatedValue|jsonrepair.UnclosedString) != 0 {
		where := "its arguments"
		if p := lastPath(v); p != "" {
			where = "the value of " + strconv.Quote(p)
		}
		return parsed{err: "the call was cut off: its arguments end inside " + where + " (the model stopped before it finished the call), so it was not run"}
	}
	return parsed{args: v, fixes: fixSet(fixes &^ jsonrepair.StringArguments)}
}

// whole reads a whole response (or its message, content or output list).
func (r *apiReader) whole(v string) error {
	switch r.format {
	case FormatOpenAI, FormatOllama:
		return r.openAIWhole(v)
	case FormatOpenAIResponses:
		return r.responsesWhole(v)
	case FormatAnthropic:
		return r.anthropicWhole(v)
	case FormatGemini:
		return r.geminiWhole(v)
	case FormatBedrock:
		return r.bedrockWhole(v)
	}
	return fmt.Errorf("no reader for %s", r.format)
}

// event reads one streaming event.
func (r *apiReader) event(v string) error {
	switch r.format {
	case FormatOpenAI:
		return r.openAIEvent(v)
	case FormatOllama:
		return r.ollamaEvent(v)
	case FormatOpenAIResponses:
		return r.responsesEvent(v)
	case FormatAnthropic:
		return r.anthropicEvent(v)
	case FormatGemini:
		return r.geminiWhole(v)
	case FormatBedrock:
		return r.bedrockEvent(v)
	}
	return fmt.Errorf("no reader for %s", r.format)
}

func decodeInto(v string, dst any, what string) error {
	if err := json.Unmarshal([]byte(v), dst); err != nil {
		return fmt.Errorf("the %s could not be read: %s", what, jsonError(err))
	}
	return nil
}

// jsonError says what encoding/json found wrong, without Go's type names.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%q is %s where the API has another type", te.Field, te.Value)
	}
	return err.Error()
}
