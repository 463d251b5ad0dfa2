package toolcall

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
	"github.com/toolbus/toolbus/pkg/messages"
)

// span is a byte range of the text.
type span struct{ start, end int }

// extractor holds the state of one Extract. Extractors are reused (see extractors), so
// that a call costs no allocation beyond its results.
type extractor struct {
	runState
	// The cursors are kept from run to run, too large to clear each time: a cursor
	// counts only for the run whose number (gen) it holds.
	cur [numLits]cursor
	gen uint64
	// rec holds the members of the last object read, whichever run read it: spans of
	// equal objects are equal.
	rec memberSpans
	rd  jsonrepair.Reader // for readValue
	// schemas holds the tools' schemas as parsed, by tool name.
	schemas map[string]cachedSchema
}

// runState is the state of an extractor that each Extract starts afresh.
type runState struct {
	text    string
	o       Options
	markers []lit // enabled, in priority order
	groups  []markerGroup
	group   [8]markerGroup // backs groups
	calls   []Call
	content []span
	reason  []span
	// budget bounds the bytes spent trying bare JSON that turns out not to be a call.
	budget   int
	slab     []byte // backs the calls' arguments (copyArgs)
	quiet    bool   // trying text that may not be calls: errors need no position
	anyKey   bool   // {"NAME": {…}} names a tool whether it is known or not (Apertus)
	overflow int    // calls beyond MaxCalls
	// api: the response is a hosted API's (apiResponse); its content and reasoning
	// are decoded text, not spans, and settledCalls counts its first calls complete.
	api                      bool
	apiContent, apiReasoning string
	settledCalls, unsettled  int
	// line numbering, advanced lazily
	lineAt, line int
}

var extractors = sync.Pool{New: func() any { return new(extractor) }}

// newExtractor returns an extractor of text from the pool; release returns it.
func newExtractor(text string, o Options) *extractor {
	x := extractors.Get().(*extractor)
	x.gen++
	x.runState = runState{text: text, o: o, content: x.content[:0], reason: x.reason[:0],
		budget: 2*len(text) + 4096, line: 1}
	set := enabledMarkers(&x.o)
	x.markers = set.markers
	x.groups = append(x.group[:0], set.groups...)
	return x
}

// release returns x to the pool. Nothing Extract returned may point into x.
func (x *extractor) release() {
	if cap(x.content) > 1024 || cap(x.reason) > 1024 {
		return // a rare response; let its spans go
	}
	x.runState = runState{content: x.content[:0], reason: x.reason[:0]}
	x.rec.obj = ""
	x.rd = jsonrepair.Reader{}
	extractors.Put(x)
}

func (x *extractor) run() {
	pos := 0
	// A reasoning model's template may open <think> in the prompt, so that the response
	// holds only the closing tag.
	if end, _ := x.promptReasoning(false); end >= 0 {
		x.reasoning(0, min(end, len(x.text)))
		pos = min(end+len(litText[litThinkEnd]), len(x.text))
	}
	if x.wholeResponse(pos) {
		return
	}
	if x.o.Format == FormatFunctionaryV32 {
		start, _ := trimSpan(x.text, pos, len(x.text))
		if end := x.functionaryStart(start); end > start {
			x.addContent(pos, start)
			pos = end
		}
	}
	x.scan(pos, len(x.text))
}

// promptReasoning returns where the reasoning opened in the prompt ends (at its
// </think>; the text's length when it never does), or -1 when there is none; and whether
// text written after x.text may still change that (a stream's later chunks), when
// wantOpen.
func (x *extractor) promptReasoning(wantOpen bool) (end int, open bool) {
	switch x.o.Reasoning {
	case ReasoningTagged:
		return -1, false
	case ReasoningOpen:
		if i := x.find(litThinkEnd, 0); i >= 0 {
			return i, false
		}
		return len(x.text), true
	}
	i := x.find(litThinkEnd, 0)
	if i < 0 {
		// A </think> written later would make everything before it reasoning, unless a
		// <think> comes first, or the model is one that marks its reasoning otherwise.
		return -1, wantOpen && !ownReasoning(x.text)
	}
	if ownReasoning(x.text[:i]) {
		return -1, false
	}
	return i, false
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
	if at > 0 && x.text[at-1] == '`' && m > litToolCall && m < litFence {
		return at + len(litText[m]), false // `<|tool_call>` named in prose, as inline code
	}
	switch m {
	case litThink, litSeedThink, litMistralThink, litCohereThink, litKimiThink, litGemmaThink:
		return x.think(m, at, limit), true
	case litHarmonyStart, litHarmonyChannel:
		return x.harmony(at, limit)
	case litGemma4, litFunctionGemma:
		return x.gemma(m, at, limit)
	case litMiniMax, litSeedToolCall, litStep3, litStep3Call:
		return x.xmlSection(m, at, limit)
	case litApertus, litCohere, litLongCat, litNemotron, litGranite, litPhi4, litRoleSep, litGigaChatCall:
		return x.jsonSection(m, at, limit)
	case litCohereResponse, litCohereResponseEnd:
		return at + len(litText[m]), true // Cohere's answer: its text is content, its tokens not
	case litFunctionary:
		return x.functionaryV32(at, limit)
	case litLFM2:
		return x.lfm2(at, limit)
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
	case litDSMLFunctionCalls, litDSMLToolCalls, litDSMLInvoke:
		return x.dsml(m, at, limit)
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

func (x *extractor) result() Extraction {
	for i := range x.calls {
		x.cutOff(&x.calls[i])
	}
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
				"the response has more than %d tool calls, the limit; the calls after the first %d were not run, and the calls after the first %d are not listed",
				x.o.MaxCalls, x.o.MaxCalls, len(ex.Calls)),
		})
	}
	return ex
}

// cutOff marks a call the response ended inside of — inside a string, a number, a key
// or a literal of its arguments, where the model hit its token limit — as a parse_error,
// so that it is never run with a value cut short. Missing closers after complete values
// are only repaired: the call runs. A value cut at a closing tag the model did write is
// not a cut-off either: the model ended the call there.
func (x *extractor) cutOff(c *Call) {
	if c.Err != nil || !slices.Contains(c.Repairs, jsonrepair.TruncatedValue.String()) {
		return
	}
	if !slices.Contains(c.Repairs, RepairUnclosedTag) && (closedByTag(c.Format) || !isBlank(x.text[c.End:])) {
		return
	}
	where := "its arguments"
	if p := lastPath(c.Arguments); p != "" {
		where = "the value of " + strconv.Quote(p)
	}
	c.Err = messages.Errorf(messages.CodeParseError,
		"the call to %q was cut off: the response ended inside %s, so the call was not run; write the whole call again", c.Name, where)
}

// closedByTag reports whether a call of format f ends with a closing tag when complete.
func closedByTag(f Format) bool {
	switch f {
	case FormatLlamaJSON, FormatPythonic, FormatMistral, FormatJSON, FormatToolCode,
		FormatFunctionaryV32, FormatGigaChat, FormatGranite, FormatPhi4Mini:
		return false
	}
	return true
}

// lastPath returns the path of the last value in the JSON document raw, keys joined by
// "." and array indexes in brackets: where a document cut off at its end was cut.
func lastPath(raw json.RawMessage) string {
	type level struct {
		key   string
		index int // of the current element, for an array
		array bool
	}
	var stack []level
	path := func() string {
		var b strings.Builder
		for _, l := range stack {
			if l.array {
				b.WriteString("[" + strconv.Itoa(l.index) + "]")
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(l.key)
		}
		return b.String()
	}
	// value records that a value starts in the innermost container.
	last := ""
	value := func() {
		if n := len(stack); n > 0 && stack[n-1].array {
			stack[n-1].index++
		}
		last = path()
	}
	expectKey := false
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			return last
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				value()
				stack = append(stack, level{array: t == '[', index: -1})
				expectKey = t == '{'
			default:
				stack = stack[:len(stack)-1]
				expectKey = len(stack) > 0 && !stack[len(stack)-1].array
			}
		default:
			if k, ok := t.(string); ok && expectKey {
				stack[len(stack)-1].key = k
				expectKey = false
				continue
			}
			value()
			expectKey = len(stack) > 0 && !stack[len(stack)-1].array
		}
	}
}

// join returns the text of spans, trimmed: concatenated when sep is "", else each part
// trimmed and the parts that are not blank joined with sep.
func (x *extractor) join(spans []span, sep string) string {
	// The blank parts at either end count for nothing; often one part is left, which
	// needs no copy.
	for len(spans) > 0 && isBlank(x.text[spans[0].start:spans[0].end]) {
		spans = spans[1:]
	}
	for len(spans) > 0 && isBlank(x.text[spans[len(spans)-1].start:spans[len(spans)-1].end]) {
		spans = spans[:len(spans)-1]
	}
	switch len(spans) {
	case 0:
		return ""
	case 1:
		return strings.TrimSpace(x.text[spans[0].start:spans[0].end])
	}
	var b strings.Builder
	size := 0
	for _, s := range spans {
		size += s.end - s.start + len(sep)
	}
	b.Grow(size)
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

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// lineOf returns the 1-based line of offset i; offsets asked for mostly increase.
func (x *extractor) lineOf(i int) int {
	if i < x.lineAt {
		x.lineAt, x.line = 0, 1
	}
	x.line += strings.Count(x.text[x.lineAt:i], "\n")
	x.lineAt = i
	return x.line
}
