package toolcall

import "strings"

// Harmony, gpt-oss's format: a response is messages, each a header and a body,
//
//	<|start|>assistant<|channel|>analysis<|message|>…<|end|>
//	<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>
//	<|start|>assistant<|channel|>final<|message|>…<|return|>
//
// The prompt ends with <|start|>assistant, so a response opens with <|channel|> (or
// with " to=functions.NAME" when the recipient is in the role header). A message whose
// header addresses it to=functions.NAME is a call, on whichever channel: the recipient
// is the header's, written in special tokens, and Harmony's own parser, vLLM's and
// llama.cpp's all read it so (the format's guide: the model calls tools as part of its
// chain-of-thought; docs/models.md says why). Otherwise the analysis channel is
// reasoning, and calls quoted in its text never run; the final channel and commentary
// without a recipient (a preamble) are content. A message to one of gpt-oss's built-in tools
// (to=browser.search, to=python), which toolbus does not serve, is kept as reasoning.
// The content type after the recipient (<|constrain|>json, or a bare json) is ignored.
// The last message may lack its <|call|>: it ends with the response.

// maxHarmonyHeader bounds a message header (role, channel, recipient, content type), so
// that a token in prose far from any <|message|> is not read as one.
const maxHarmonyHeader = 256

// harmonyEnds are the tokens that end a message's body, the next message's first.
var harmonyEnds = [...]lit{litHarmonyCall, litHarmonyEnd, litHarmonyReturn, litHarmonyStart, litHarmonyChannel}

// harmony reads the message whose header starts at text[at] (<|start|> or <|channel|>).
func (x *extractor) harmony(at, limit int) (int, bool) {
	s := x.text[:limit]
	start := at
	if strings.HasPrefix(s[at:], litText[litHarmonyChannel]) {
		start = x.roleHeader(at)
	}
	msg := x.findBefore(litHarmonyMessage, at, limit)
	if msg < 0 || msg-at > maxHarmonyHeader {
		return at + 1, false // a header the text ends in, or no message at all
	}
	header := s[at:msg]
	if i := strings.Index(header[1:], "<|start|>"); i >= 0 {
		return at + 1 + i, true // an empty message: its tokens only
	}
	header = s[start:msg]
	body := msg + len(litText[litHarmonyMessage])
	bodyEnd, end, closed := limit, limit, false
	for _, l := range harmonyEnds {
		if i := x.findBefore(l, body, limit); i >= 0 && i < bodyEnd {
			bodyEnd, end, closed = i, i+len(litText[l]), true
			if l == litHarmonyStart || l == litHarmonyChannel {
				end = i // the next message's
			}
		}
	}
	channel, recipient := harmonyHeader(header)
	name, isFunction := strings.CutPrefix(recipient, "functions.")
	switch {
	case channel == "analysis" && !isFunction || recipient != "" && !isFunction:
		x.addReason(body, bodyEnd)
	case isFunction:
		b := blk{format: FormatHarmony, start: start, end: end}
		if !closed {
			b.fixes |= fixUnclosedTag
		}
		p, _ := x.argsAt(body, bodyEnd)
		p.name = name
		if p.name == "" && p.err == "" {
			p.err = "the recipient to=functions. names no tool"
		}
		x.add(b, p)
	default:
		x.addContent(body, bodyEnd)
	}
	return end, true
}

// roleHeader returns where the message whose <|channel|> is at text[at] starts: before a
// recipient in its role header (" to=functions.NAME" right after the prompt's
// <|start|>assistant), which is then no content.
func (x *extractor) roleHeader(at int) int {
	from := max(0, at-256)
	if i := strings.LastIndexByte(x.text[from:at], '>'); i >= 0 {
		from += i + 1
	}
	seg := strings.TrimSpace(x.text[from:at])
	seg = strings.TrimSpace(strings.TrimPrefix(seg, "assistant"))
	if !strings.HasPrefix(seg, "to=") || strings.ContainsAny(seg, " \n") {
		return at
	}
	if n := len(x.content); n > 0 && x.content[n-1].end == at && x.content[n-1].start <= from {
		x.content[n-1].end = from
		if x.content[n-1].start == from {
			x.content = x.content[:n-1]
		}
	}
	return from
}

// harmonyHeader reads a message header: its channel and its recipient.
func harmonyHeader(h string) (channel, recipient string) {
	if i := strings.Index(h, "<|channel|>"); i >= 0 {
		c := h[i+len("<|channel|>"):]
		end := strings.IndexAny(c, " \t\n<")
		if end < 0 {
			end = len(c)
		}
		channel = c[:end]
	}
	if i := strings.Index(h, "to="); i >= 0 && (i == 0 || h[i-1] <= ' ' || h[i-1] == '>') {
		r := h[i+3:]
		end := strings.IndexAny(r, " \t\n<")
		if end < 0 {
			end = len(r)
		}
		recipient = r[:end]
	}
	return channel, recipient
}
