package toolcall

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolbus/toolbus/pkg/jsonrepair"
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
	// FormatHarmony: gpt-oss's Harmony messages; a call is a message on the commentary
	// channel addressed to=functions.NAME, <|channel|>commentary to=functions.NAME
	// <|constrain|>json<|message|>{…}<|call|>; the analysis channel is reasoning.
	FormatHarmony Format = "harmony"
	// FormatGemma4: <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|> (Gemma 4).
	FormatGemma4 Format = "gemma4"
	// FormatFunctionGemma: <start_function_call>call:NAME{key:<escape>text<escape>}<end_function_call>.
	FormatFunctionGemma Format = "functiongemma"
	// FormatToolCode: Gemma 3's ```tool_code fence holding pythonic calls.
	FormatToolCode Format = "tool_code"
	// FormatMiniMax: <minimax:tool_call><invoke name="NAME"><parameter name="KEY">value
	// </parameter></invoke></minimax:tool_call> (MiniMax-M2).
	FormatMiniMax Format = "minimax_m2"
	// FormatSeedOSS: <seed:tool_call><function=NAME><parameter=KEY>value</parameter>
	// </function></seed:tool_call> (Seed-OSS), its reasoning in <seed:think>.
	FormatSeedOSS Format = "seed_oss"
	// FormatStep3: <｜tool_calls_begin｜><｜tool_call_begin｜><steptml:invoke name="NAME">
	// <steptml:parameter name="KEY">value</steptml:parameter></steptml:invoke>… (Step-3).
	FormatStep3 Format = "step3"
	// FormatApertus: <|tools_prefix|>[{"NAME": {…}}]<|tools_suffix|> (Apertus).
	FormatApertus Format = "apertus"
	// FormatCohere: <|START_ACTION|>[{"tool_call_id": "0", "tool_name": …, "parameters": {…}}]
	// <|END_ACTION|> (Command R7B, Command A), reasoning in <|START_THINKING|>.
	FormatCohere Format = "cohere"
	// FormatFunctionaryV31: <function=NAME>{…}</function> (Functionary v3.1, Llama 3.1's
	// custom tool format).
	FormatFunctionaryV31 Format = "functionary_v31"
	// FormatFunctionaryV32: >>>NAME\n{…}, >>>all\n for text (Functionary v3.2).
	FormatFunctionaryV32 Format = "functionary_v32"
	// FormatLFM2: <|tool_call_start|>[NAME(key=value), …]<|tool_call_end|> (LFM2, LFM2.5).
	FormatLFM2 Format = "lfm2"
	// FormatLongCat: <longcat_tool_call>{"name": …, "arguments": {…}}</longcat_tool_call>.
	FormatLongCat Format = "longcat"
	// FormatGigaChat: function call<|role_sep|>\n{"name": …, "arguments": {…}} (GigaChat 3)
	// or <|function_call|>{…} (GigaChat 3.1).
	FormatGigaChat Format = "gigachat"
	// FormatNemotron: <TOOLCALL>[{"name": …, "arguments": {…}}]</TOOLCALL> (Llama-Nemotron,
	// Nemotron Nano v2).
	FormatNemotron Format = "nemotron"
	// FormatGranite: <|tool_call|>[{"name": …, "arguments": {…}}] (Granite 3.x).
	FormatGranite Format = "granite"
	// FormatPhi4Mini: functools[{"name": …, "arguments": {…}}] (Phi-4-mini).
	FormatPhi4Mini Format = "phi4_mini"
)

// Formats lists every format, in the order of the constants.
func Formats() []Format {
	return []Format{
		FormatToolCallTag, FormatQwen3Coder, FormatGLM, FormatLlamaJSON, FormatPythonic,
		FormatMistral, FormatDeepSeekV3, FormatDeepSeekV31, FormatKimiK2, FormatDeepSeekV32,
		FormatToolCallsTag, FormatFunctionCalls, FormatJSON, FormatHarmony, FormatGemma4,
		FormatFunctionGemma, FormatToolCode, FormatMiniMax, FormatSeedOSS, FormatStep3,
		FormatApertus, FormatCohere, FormatFunctionaryV31, FormatFunctionaryV32, FormatLFM2,
		FormatLongCat, FormatGigaChat, FormatNemotron, FormatGranite, FormatPhi4Mini,
		FormatOpenAI, FormatOpenAIResponses, FormatAnthropic, FormatGemini, FormatBedrock, FormatOllama,
	}
}

// FormatAliases maps the models whose calls are written in another model's format to
// that format: ParseFormat accepts these names too.
func FormatAliases() map[string]Format {
	return map[string]Format{
		"hermes": FormatToolCallTag, "qwen": FormatToolCallTag, "ernie": FormatToolCallTag,
		"granite4": FormatToolCallTag, "granite3": FormatGranite,
		"hunyuan": FormatToolCallsTag, "minimax_m1": FormatToolCallsTag, "jamba": FormatToolCallsTag,
		"minimax": FormatMiniMax, "gpt_oss": FormatHarmony,
		"gemma3": FormatToolCode, "xlam": FormatJSON, "command_r_plus": FormatJSON,
		"command_a": FormatCohere, "command_r7b": FormatCohere,
		"kimi_k2_thinking": FormatKimiK2, "functionary_v3_1": FormatFunctionaryV31,
		"functionary_v3_2": FormatFunctionaryV32, "llama3_2": FormatPythonic, "llama4_pythonic": FormatPythonic,
		"olmo3": FormatFunctionCalls, "firefunction": FormatPhi4Mini, "apriel": FormatToolCallsTag,
	}
}

// ParseFormat returns the format named s, by its name or by an alias of
// [FormatAliases]; "" and "auto" give FormatAuto.
func ParseFormat(s string) (Format, error) {
	if s == "" || s == "auto" {
		return FormatAuto, nil
	}
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	if f, ok := FormatAliases()[s]; ok {
		return f, nil
	}
	return "", fmt.Errorf("unknown tool-call format %q", s)
}

// Call is one tool call found in a response.
type Call struct {
	// Index is the call's 0-based position in the response.
	Index int
	// ID is the call's id where its format gives one: the hosted APIs' (OpenAI's
	// tool_call id, Anthropic's tool_use id, …), Kimi K2's functions.NAME:N, Mistral's
	// [CALL_ID]. Empty otherwise.
	ID   string
	Name string
	// Arguments is a JSON object ("{}" when the call has none) when Err is nil.
	Arguments json.RawMessage
	// Format is the syntax the call was found in.
	Format Format
	// Raw is the text of the block the call was found in, as the model wrote it;
	// Start and End are its byte offsets in the response. Several calls share a block
	// when the model wrote them together (a JSON array, a pythonic list).
	Raw        string
	Start, End int
	// Repairs lists what was fixed to read the call, in a stable order: the ids of
	// jsonrepair.Repairs up to string_arguments, RepairUnclosedTag,
	// RepairSchemaCoercion, then the repairer's others.
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
	// Reasoning is the text inside <think>…</think> and the other families' reasoning
	// markers (see the package doc); calls in it are never extracted, except Kimi K2's.
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
	// ReasoningAuto: the text inside <think>…</think> (and the other families'
	// markers), and the text before a </think> that no <think> or other reasoning
	// marker precedes (a template that opens <think> in the prompt, so that the response
	// holds only the closing tag). A streamed call before any think tag waits for the
	// end of the response, a </think> may still come, unless the response shows a
	// family's own reasoning syntax (Harmony channels, <seed:think>, [THINK], …).
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

// Default limits, used where Options leaves a field zero.
const (
	DefaultMaxInputSize = jsonrepair.DefaultMaxInputSize // bytes of one response
	DefaultMaxDepth     = jsonrepair.DefaultMaxDepth     // nested objects and arrays
	DefaultMaxCalls     = 64                             // calls in one response

	// maxDepthCap bounds Options.MaxDepth: the repairer recurses once per level.
	maxDepthCap = 10000
)

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
func Extract(text string, opts *Options) Extraction {
	var o Options
	if opts != nil {
		o = *opts
	}
	ex, _, _ := extract(text, o.withDefaults())
	return ex
}

// extract is Extract with options already defaulted; for a hosted API's response it
// also says how many of its first calls the API marked complete (settled).
func extract(text string, o Options) (ex Extraction, api bool, settled int) {
	if len(text) > o.MaxInputSize {
		return Extraction{Calls: []Call{{
			Arguments: json.RawMessage("{}"),
			Err: messages.Errorf(messages.CodeParseError,
				"the response is %d bytes, more than the limit of %d; no tool call was read from it", len(text), o.MaxInputSize),
		}}}, false, 0
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
			api, settled = false, 0
		}
	}()
	x := newExtractor(text, o)
	if !x.apiResponse() {
		x.run()
	}
	ex = x.result()
	if x.api {
		ex.Content, ex.Reasoning = x.apiContent, x.apiReasoning
		api, settled = true, x.settledCalls
	}
	x.release() // not after a panic: the extractor may be in any state
	return ex, api, settled
}
