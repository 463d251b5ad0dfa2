package toolcall

import "strings"

// The sections of calls that newer models open with a token of their own, holding calls
// of a shape read elsewhere: XML-style invokes and functions (MiniMax-M2, Seed-OSS,
// Step-3) and JSON (Apertus, Cohere, LongCat, Nemotron, Granite 3, Phi-4-mini, GigaChat).

// Step-3 writes a value inline, so its whitespace is the model's (vLLM's tests:
// TestStep3ParameterWhitespace).
var (
	stepInvoke = invokeTags{"<steptml:invoke", "</steptml:invoke>",
		xmlStyle{keyOpen: "<steptml:parameter name=", keyClose: ">", valClose: "</steptml:parameter>", exact: true}}
	minimaxInvoke = invokeTags{"<invoke", "</invoke>", minimaxStyle}
)

// xmlSection reads the XML-style calls of the section that marker m opens at text[at].
func (x *extractor) xmlSection(m lit, at, limit int) (int, bool) {
	var close lit
	var format Format
	switch m {
	case litMiniMax:
		close, format = litMiniMaxEnd, FormatMiniMax
	case litSeedToolCall:
		close, format = litSeedToolCallEnd, FormatSeedOSS
	case litStep3:
		close, format = litStep3End, FormatStep3
	default: // a Step-3 call without its section
		close, format = litStep3CallEnd, FormatStep3
	}
	from := at + len(litText[m])
	bodyEnd, end, closed := x.blockEnd(from, limit, m, close)
	b := blk{format: format, start: at, end: end}
	if !closed {
		b.fixes |= fixUnclosedTag
	}
	n := len(x.calls)
	switch format {
	case FormatSeedOSS:
		x.qwenFunctions(b, from, bodyEnd)
	case FormatStep3:
		x.invokes(b, from, bodyEnd, stepInvoke)
	default:
		x.invokes(b, from, bodyEnd, minimaxInvoke)
	}
	for i := n; i < len(x.calls); i++ {
		x.calls[i].Format = format // qwenFunctions may say functionary_v31 for a JSON body
	}
	if len(x.calls) == n && x.overflow == 0 {
		x.fail(b, "", nil, "the block holds no call")
	}
	return end, true
}

// jsonSectionKind returns the closer of a JSON section's marker m (none: the section
// ends with its JSON) and its format.
func jsonSectionKind(m lit) (close lit, format Format) {
	switch m {
	case litApertus:
		return litApertusEnd, FormatApertus
	case litCohere:
		return litCohereEnd, FormatCohere
	case litLongCat:
		return litLongCatEnd, FormatLongCat
	case litNemotron:
		return litNemotronEnd, FormatNemotron
	case litGranite:
		return 0, FormatGranite
	case litPhi4:
		return 0, FormatPhi4Mini
	}
	return 0, FormatGigaChat
}

// jsonSection reads the JSON calls of the section that marker m opens at text[at].
func (x *extractor) jsonSection(m lit, at, limit int) (int, bool) {
	close, format := jsonSectionKind(m)
	start, from := at, at+len(litText[m])
	switch m {
	case litPhi4:
		from-- // the [ is the array's
	case litRoleSep:
		// GigaChat 3: "function call<|role_sep|>", its header for a call.
		head := strings.TrimRight(x.text[:at], " \n")
		if !strings.HasSuffix(head, "function call") {
			return at + len(litText[m]), false
		}
		start = len(head) - len("function call")
		if before := strings.TrimRight(x.text[:start], " \n"); strings.HasSuffix(before, "<|message_sep|>") {
			start = len(before) - len("<|message_sep|>")
		}
		x.trimContent(start, at)
	}
	b := blk{format: format, start: start, end: limit}
	bodyEnd, closed := limit, close == 0
	if close != 0 {
		bodyEnd, b.end, closed = x.blockEnd(from, limit, m, close)
	}
	if !closed {
		b.fixes |= fixUnclosedTag
	}
	ts, te := trimSpan(x.text, from, bodyEnd)
	if ts == te {
		if close == 0 {
			return from, false
		}
		x.fail(b, "", nil, "the block is empty")
		return b.end, true
	}
	if close == 0 && x.text[ts] != '{' && !(x.text[ts] == '[' && jsonAhead(x.text[:te], ts+1)) {
		return from, false // functools[ in prose
	}
	n := len(x.calls)
	x.anyKey = m == litApertus
	e := x.jsonCalls(b, ts, te)
	x.anyKey = false
	if close == 0 || !closed {
		if m == litRoleSep || m == litGigaChatCall {
			if i, _ := trimSpan(x.text, e, limit); strings.HasPrefix(x.text[i:], "</s>") {
				e = i + len("</s>")
			}
		}
		x.endCallsAt(n, e)
		return e, true
	}
	return b.end, true
}

// trimContent drops text[from:to], the end of the content read so far, from content.
func (x *extractor) trimContent(from, to int) {
	n := len(x.content)
	if n == 0 || x.content[n-1].end != to {
		return
	}
	x.content[n-1].end = max(from, x.content[n-1].start)
	if x.content[n-1].start == x.content[n-1].end {
		x.content = x.content[:n-1]
	}
}
