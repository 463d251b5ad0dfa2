package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Format names the syntax a call was written in. The zero value, FormatAuto, means
// "detect it" where a format is chosen.
type Format string

// The formats Extract understands.
const (
	FormatAuto Format = ""
	// FormatToolCallTag: <tool_call>{"name": …, "arguments": {…}}</tool_call>, or
	// {"tool": …, "parameters": {…}} inside it (Hermes, Qwen 2.5/3, QwQ, toolbus's seed).
	FormatToolCallTag Format = "tool_call"
	// FormatQwen3Coder: <tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>.
	FormatQwen3Coder Format = "qwen3_coder"
	// FormatGLM: <tool_call>NAME<arg_key>KEY</arg_key><arg_value>value</arg_value></tool_call>
	// (GLM 4.5 and later), or <tool_call>NAME\n{…}</tool_call> (GLM 4).
	FormatGLM Format = "glm"
	// FormatLlamaJSON: <|python_tag|>{"name": …, "parameters": {…}}; {…} (Llama 3.x, 4).
	FormatLlamaJSON Format = "llama3_json"
	// FormatPythonic: [get_weather(city='Paris'), other()], alone or inside
	// <|python_start|>…<|python_end|> (Llama 3.2+, Llama 4).
	FormatPythonic Format = "pythonic"
	// FormatMistral: [TOOL_CALLS][{"name": …, "arguments": {…}}] (before v11) or
	// [TOOL_CALLS]NAME{…} and [TOOL_CALLS]NAME[ARGS]{…} (v11+).
	FormatMistral Format = "mistral"
	// FormatDeepSeekV3: <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{…}\n```<｜tool▁call▁end｜>.
	FormatDeepSeekV3 Format = "deepseek_v3"
	// FormatDeepSeekV31: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{…}<｜tool▁call▁end｜>.
	FormatDeepSeekV31 Format = "deepseek_v31"
	// FormatKimiK2: <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|>.
	FormatKimiK2 Format = "kimi_k2"
	// FormatDeepSeekV32: DeepSeek V3.2's DSML, <｜DSML｜function_calls> (or tool_calls)
	// holding <｜DSML｜invoke name="NAME"><｜DSML｜parameter name="KEY" string="true">value
	// </｜DSML｜parameter></｜DSML｜invoke>; string="false" marks a JSON value, and an
	// invoke may hold a JSON object instead of parameters.
	FormatDeepSeekV32 Format = "deepseek_v32"
	// FormatToolCallsTag: <tool_calls>[{"name": …, "arguments": {…}}]</tool_calls> (Jamba).
	FormatToolCallsTag Format = "tool_calls"
	// FormatFunctionCalls: <function_calls> holding pythonic calls one per line (OLMo 3)
	// or <invoke name="NAME"><parameter name="KEY">value</parameter></invoke>.
	FormatFunctionCalls Format = "function_calls"
	// FormatJSON: a bare or ```json-fenced JSON object or array shaped like a call. In
	// auto-detection it counts only when it names one of Options.KnownTools.
	FormatJSON Format = "json"
)

// Formats lists every format, in the order of the constants.
func Formats() []Format {
	return []Format{
		FormatToolCallTag, FormatQwen3Coder, FormatGLM, FormatLlamaJSON, FormatPythonic,
		FormatMistral, FormatDeepSeekV3, FormatDeepSeekV31, FormatKimiK2, FormatDeepSeekV32,
		FormatToolCallsTag, FormatFunctionCalls, FormatJSON,
	}
}

// ParseFormat returns the format named s; "" and "auto" give FormatAuto.
func ParseFormat(s string) (Format, error) {
	if s == "" || s == "auto" {
		return FormatAuto, nil
	}
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown tool-call format %q", s)
}

// Call is one tool call found in a response.
type Call struct {
	// Index is the call's 0-based position in the response.
	Index int
	Name  string
	// Arguments is a JSON object ("{}" when the call has none) when Err is nil.
	Arguments json.RawMessage
	// Format is the syntax the call was found in.
	Format Format
	// Raw is the text of the block the call was found in, as the model wrote it;
	// Start and End are its byte offsets in the response. Several calls share a block
	// when the model wrote them together (a JSON array, a pythonic list).
	Raw        string
	Start, End int
	// Repairs lists what was fixed to read the call (the Repair… constants).
	Repairs []string
	// Err is set when the block was meant as a call but cannot be understood. Its code
	// is messages.CodeParseError and its message says where and why, for the model.
	// Name is set when it could still be read.
	Err *messages.ToolError
}

// Extraction is what Extract found in a response.
type Extraction struct {
	// Calls are every call, in the order the model wrote them.
	Calls []Call
	// Content is the text that is neither a call nor reasoning, trimmed.
	Content string
	// Reasoning is the text inside <think>…</think>; calls in it are never extracted.
	Reasoning string
}

// Options configure Extract. The zero value (or nil) detects the format and applies
// the default limits.
type Options struct {
	// KnownTools are the names of the tools the model may call. Bare and fenced JSON
	// counts as a call only when it names one of them.
	KnownTools []string
	// Schemas maps a tool name to its JSON input schema. Where the schema says a
	// parameter is a number, integer, boolean, array or object, XML-style values and
	// JSON strings like "10" or "[1, 2]" are converted to it.
	Schemas map[string]json.RawMessage
	// Format pins the syntax when not FormatAuto: only that format's markers are looked
	// for (the <tool_call> tag serves FormatToolCallTag, FormatQwen3Coder and FormatGLM
	// alike), and a whole response of bare JSON or of a pythonic list counts as calls
	// without naming a known tool. A value that is not a Format counts as FormatAuto;
	// ParseFormat checks configuration.
	Format Format
	// MaxInputSize bounds the response in bytes (default DefaultMaxInputSize).
	MaxInputSize int
	// MaxDepth bounds the nesting of arguments (default DefaultMaxDepth).
	MaxDepth int
	// MaxCalls bounds the calls run from one response (default DefaultMaxCalls). Each
	// call after it, up to as many again, is a failed call saying so; the calls after
	// those are reported together as one failed call.
	MaxCalls int
	// Reasoning says where a response's reasoning is: ReasoningAuto (the zero value),
	// ReasoningTagged or ReasoningOpen.
	Reasoning Reasoning
}

// Reasoning says how a model marks its reasoning, the text whose calls never run.
type Reasoning string

const (
	// ReasoningAuto: the text inside <think>…</think>, and the text before a </think>
	// that no <think> precedes (a template that opens <think> in the prompt, so that
	// the response holds only the closing tag). A streamed call before any think tag
	// waits for the end of the response: a </think> may still come.
	ReasoningAuto Reasoning = ""
	// ReasoningTagged: only the text inside <think>…</think>; a </think> alone is
	// content. Streamed calls run as soon as their block is complete.
	ReasoningTagged Reasoning = "tagged"
	// ReasoningOpen: the response starts inside reasoning (the prompt opened <think>),
	// which ends at the first </think>; a response without one is all reasoning.
	ReasoningOpen Reasoning = "open"
)

// ParseReasoning returns the Reasoning named s; "" and "auto" give ReasoningAuto.
func ParseReasoning(s string) (Reasoning, error) {
	switch Reasoning(s) {
	case "", "auto":
		return ReasoningAuto, nil
	case ReasoningTagged, ReasoningOpen:
		return Reasoning(s), nil
	}
	return "", fmt.Errorf("unknown reasoning mode %q (auto, tagged or open)", s)
}

func (o Options) withDefaults() Options {
	if o.MaxInputSize <= 0 {
		o.MaxInputSize = DefaultMaxInputSize
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	o.MaxDepth = min(o.MaxDepth, maxDepthCap)
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultMaxCalls
	}
	return o
}

// Extract finds every tool call in the text of a model's response. It never fails:
// a call it cannot read is returned with Err set, next to the calls it could read.
// A nil opts means the zero Options.
func Extract(text string, opts *Options) (ex Extraction) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if len(text) > o.MaxInputSize {
		return Extraction{Calls: []Call{{
			Arguments: json.RawMessage("{}"),
			Err: messages.Errorf(messages.CodeParseError,
				"the response is %d bytes, more than the limit of %d; no tool call was read from it", len(text), o.MaxInputSize),
		}}}
	}
	defer func() {
		// A bug must cost one response, not the service.
		if v := recover(); v != nil {
			ex = Extraction{Content: strings.TrimSpace(text), Calls: []Call{{
				Arguments: json.RawMessage("{}"),
				Err: &messages.ToolError{Code: messages.CodeInternal,
					Message: "toolbus failed to read the tool calls of this response",
					Err:     fmt.Errorf("toolcall: panic: %v", v)},
			}}}
		}
	}()
	x := newExtractor(text, o)
	x.run()
	ex = x.result()
	x.release() // not after a panic: the extractor may be in any state
	return ex
}
