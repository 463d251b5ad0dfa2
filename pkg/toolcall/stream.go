package toolcall

import (
	"slices"
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
)

// ExtractPartial reads the part of a response a model has written so far, while it is
// still writing. It returns what [Extract] finds in that text and how many of its calls,
// from the first, are settled: read exactly as Extract reads them in the whole
// response, whatever the model writes next. A settled call may run before the response
// ends; the others wait for more text, or for its end.
//
// A call is settled when its block is complete — closed by its closing tag
// (</tool_call>, <|tool_call_end|>, …), or, in the formats without one (bare JSON,
// pythonic lists, Llama's <|python_tag|>, Mistral's [TOOL_CALLS]), followed by text
// that is not blank — and no text to come can make it reasoning: under
// [ReasoningAuto], a call before any <think> or </think> is never settled, since a
// </think> written later would make it reasoning (see [Options].Reasoning). A call
// the text ends inside of is not settled: at the end of the response it is cut off
// (a parse_error) or repaired, as Extract decides. Nor is a call after a Harmony header
// the text ends in (<|channel|> without its <|message|> yet), which may turn out to
// hold it.
//
// A response over MaxInputSize settles nothing.
func ExtractPartial(text string, opts *Options) (Extraction, int) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if len(text) > o.MaxInputSize {
		return Extract(text, &o), 0
	}
	ex, api, complete := extract(text, o)
	if api {
		// The API says when a call is complete (its block's stop, its arguments' done
		// event, the next call's start, the finish reason).
		return ex, complete
	}
	x := extractor{runState: runState{text: text, o: o}, gen: 1}
	if _, open := x.promptReasoning(true); open {
		return ex, 0
	}
	n := 0
	header := openHarmonyHeader(text)
	for _, c := range ex.Calls {
		if c.End > len(text) || !settled(text, c) || header >= 0 && c.End > header {
			break
		}
		n++
	}
	return ex, n
}

// openHarmonyHeader returns where a Harmony header starts that the text ends in (a
// <|channel|> or <|start|> within maxHarmonyHeader bytes of the end, no <|message|>
// after it yet), or -1: a <|message|> written next makes what follows it header, no
// call (FuzzStream: <|channel|><tool_call>…</tool_call> then <|message|>).
func openHarmonyHeader(text string) int {
	from := max(0, len(text)-maxHarmonyHeader)
	if strings.Contains(text[from:], litText[litHarmonyMessage]) {
		from += strings.LastIndex(text[from:], litText[litHarmonyMessage])
	}
	at := -1
	for _, m := range []lit{litHarmonyChannel, litHarmonyStart} {
		if i := strings.Index(text[from:], litText[m]); i >= 0 && (at < 0 || from+i < at) {
			at = from + i
		}
	}
	return at
}

// settled reports whether call c, read from text, has a complete block. A call that
// failed, whose value the text ends in, or that has a string the repairer had to close
// waits for the end of the response: more text may complete what it lacks (a closing
// tag written inside a string continues the string, not the call; a quote written later
// closes an unclosed string elsewhere, and the block reads otherwise).
func settled(text string, c Call) bool {
	if c.Err != nil || c.Raw == "" || slices.Contains(c.Repairs, jsonrepair.TruncatedValue.String()) ||
		slices.Contains(c.Repairs, jsonrepair.UnclosedString.String()) ||
		!closedByTag(c.Format) && slices.Contains(c.Repairs, jsonrepair.UnquotedString.String()) {
		// An unquoted value may hold a quote that a quote written later pairs with, so
		// that the block reads otherwise (FuzzStream: `{"args"{"k" A"0}}, "` then `""`):
		// without a closing tag to end it, such a call waits for the response's end.
		return false
	}
	if closedByTag(c.Format) {
		return !slices.Contains(c.Repairs, RepairUnclosedTag)
	}
	return !onlySpace(text[c.End:])
}

// onlySpace reports whether s holds nothing but what the repairer skips between tokens
// as whitespace (jsonrepair.IsSpace): text after a call that more text may still
// continue.
func onlySpace(s string) bool {
	for _, r := range s {
		if !jsonrepair.IsSpace(r) {
			return false
		}
	}
	return true
}

// Stream extracts the calls of a response as the model writes it: Write takes each
// chunk and returns the calls it settled (see [ExtractPartial]); Close returns the
// extraction of the whole response, which is [Extract]'s, and the calls Write did not
// return. The calls Write returns are always the first calls of that extraction,
// unchanged.
type Stream struct {
	opts Options
	text strings.Builder
	sent int
}

// NewStream starts the extraction of one response. A nil opts means the zero Options.
func NewStream(opts *Options) *Stream {
	s := &Stream{}
	if opts != nil {
		s.opts = *opts
	}
	return s
}

// Write adds chunk to the response and returns the calls it settled, in order.
func (s *Stream) Write(chunk string) []Call {
	s.text.WriteString(chunk)
	ex, n := ExtractPartial(s.text.String(), &s.opts)
	if n <= s.sent {
		return nil
	}
	calls := ex.Calls[s.sent:n]
	s.sent = n
	return calls
}

// Text returns the response written so far.
func (s *Stream) Text() string { return s.text.String() }

// Close ends the response: it returns the whole extraction and its calls Write did not
// return.
func (s *Stream) Close() (Extraction, []Call) {
	ex := Extract(s.text.String(), &s.opts)
	rest := ex.Calls[min(s.sent, len(ex.Calls)):]
	s.sent = len(ex.Calls)
	return ex, rest
}
