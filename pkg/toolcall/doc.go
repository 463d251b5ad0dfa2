// Package toolcall finds the tool calls in the text of a model's response. It owns one
// idea, from raw text to calls: it does not know NATS, tool catalogs or schemas beyond
// what [Options] hands it, and the JSON in a call is repaired by pkg/jsonrepair.
//
// # Extraction
//
// [Extract] returns every call in the order the model wrote it, the text around the
// calls as content, and the text inside <think>…</think> as reasoning; a call inside
// reasoning is never extracted. It never fails as a whole: a block that was meant as a
// call but cannot be read becomes a [Call] whose Err (code messages.CodeParseError) says
// where and why, in words a model can act on, next to the calls that could be read.
//
// Reasoning is the text inside <think>…</think> and the other families' markers
// (<seed:think>, [THINK], <|START_THINKING|>, ◁think▷, Gemma 4's <|channel>thought,
// Harmony's analysis channel), and,
// under [ReasoningAuto] (the default), the text before a </think> that no <think> or
// other reasoning marker precedes (a template that opens <think> in the prompt);
// [Options].Reasoning chooses [ReasoningTagged] or [ReasoningOpen] instead. Kimi K2's
// call sections are the exception: Kimi-K2-Thinking writes its calls inside its
// reasoning, and they are extracted there (as llama.cpp does).
//
// # Streams
//
// [ExtractPartial] reads the text a model has written so far and says how many of its
// first calls are settled — read as Extract will read them in the whole response,
// whatever comes next — so that they may run before the response ends; [Stream] wraps
// it for a response fed chunk by chunk. A call is settled when its block is complete (its
// closing tag, or non-blank text after a block that has none), it was read without error,
// and no later text can make it reasoning.
//
// # Formats
//
// The format is detected per block, or pinned with [Options].Format:
//
//   - <tool_call>{"name": …, "arguments": {…}}</tool_call> and {"tool": …, "parameters": …}
//     (Hermes, Qwen 2.5/3, QwQ), "arguments" also as a JSON string; a final block whose
//     closing tag is missing ([FormatToolCallTag]).
//   - Qwen3-Coder's <function=NAME><parameter=KEY>…</parameter></function> and GLM's
//     NAME<arg_key>…</arg_key><arg_value>…</arg_value> inside <tool_call> ([FormatQwen3Coder],
//     [FormatGLM]); their values are typed by the tool's input schema in [Options].Schemas.
//   - Llama 3/4 JSON after <|python_tag|>, several separated by ';' ([FormatLlamaJSON]).
//   - Pythonic [get_weather(city='Paris'), clock()], as the whole response, after a
//     sentence, or inside <|python_start|>…<|python_end|> ([FormatPythonic]; JSON calls
//     in that block are [FormatLlamaJSON]). A call with a value JSON cannot hold (a
//     bytes literal b'…', a number beyond float64 such as 1e999) fails alone with a
//     parse error; the calls around it are read.
//   - Mistral's [TOOL_CALLS][{…}] and [TOOL_CALLS]NAME{…} / NAME[ARGS]{…}, also with a
//     few words between the marker and the array ([FormatMistral]).
//   - DeepSeek V3 and V3.1 and Kimi K2 special tokens ([FormatDeepSeekV3],
//     [FormatDeepSeekV31], [FormatKimiK2]), and DeepSeek V3.2's DSML:
//     <｜DSML｜function_calls> holding <｜DSML｜invoke name="…"> calls whose parameters
//     say string="false" when their value is JSON ([FormatDeepSeekV32]).
//   - <tool_calls>[…]</tool_calls> (Jamba, [FormatToolCallsTag]) and <function_calls>
//     holding pythonic calls (OLMo 3) or <invoke name="…"> XML ([FormatFunctionCalls]).
//   - gpt-oss's Harmony messages ([FormatHarmony]): a message addressed
//     to=functions.NAME (in the channel header or the role header, with <|constrain|>json,
//     a bare json or no content type; its <|call|> may be missing at the end) is a call,
//     on commentary or on analysis, as Harmony's own parser reads the header; the rest
//     of the analysis channel is reasoning, the final channel content.
//   - Gemma 4's <|tool_call>call:NAME{key:<|"|>text<|"|>}<tool_call|> and FunctionGemma's
//     <start_function_call>call:NAME{key:<escape>text<escape>}<end_function_call>
//     ([FormatGemma4], [FormatFunctionGemma]); Gemma 3's ```tool_code fence ([FormatToolCode]).
//   - XML-style sections: MiniMax-M2's <minimax:tool_call> of <invoke> calls, Seed-OSS's
//     <seed:tool_call> of <function=…> calls, Step-3's <｜tool_calls_begin｜> of
//     <steptml:invoke> calls ([FormatMiniMax], [FormatSeedOSS], [FormatStep3]).
//   - JSON sections: Apertus's <|tools_prefix|>[{"NAME": {…}}], Cohere's <|START_ACTION|>,
//     LongCat's <longcat_tool_call>, Nemotron's <TOOLCALL>, Granite 3's <|tool_call|>,
//     Phi-4-mini's functools[…], GigaChat's function call<|role_sep|> and <|function_call|>
//     ([FormatApertus], [FormatCohere], [FormatLongCat], [FormatNemotron], [FormatGranite],
//     [FormatPhi4Mini], [FormatGigaChat]).
//   - Functionary: v3.1's <function=NAME>{…}</function> ([FormatFunctionaryV31]) and
//     v3.2's >>>NAME followed by a JSON object, >>>all for text ([FormatFunctionaryV32],
//     with the format pinned only: >>> also begins a Python prompt);
//     LFM2's <|tool_call_start|>[NAME(key=value)]<|tool_call_end|> ([FormatLFM2]).
//   - A bare or ```json-fenced JSON object or array shaped like a call, an OpenAI
//     assistant message written into the text ({"tool_calls": [...]}), or a pythonic
//     list, only when it names one of [Options].KnownTools, so that ordinary JSON in an
//     answer is never run ([FormatJSON]). A code fence is otherwise content: a call
//     written there as an example is not run, unless the fence holds nothing but calls.
//
// # Repair
//
// The JSON of a call goes through pkg/jsonrepair: valid JSON is read in one pass that
// also records an object's members, anything else is repaired, and a call's Repairs
// lists the repairer's ids ([jsonrepair.Repairs]) with Extract's own,
// [RepairUnclosedTag] and [RepairSchemaCoercion]. A call whose JSON cannot be read is a
// parse_error that quotes the repairer's [jsonrepair.SyntaxError], its line and column
// counted in the whole response.
//
// Text that ends inside a value — a string, a number, a key, a literal — is repaired
// and marked truncated_value. [Extract] does not let such a call run when the response
// itself ended there (the model hit its token limit: a value cut short is a wrong
// argument, not a sloppy one): the call is a parse_error saying which argument was
// cut, in every format. A call that lacks only closers after complete values (a final
// }, ] or closing tag) is repaired and runs.
//
// Where a tool's input schema is known, arguments are converted to the types it names
// ("10" to 10, "true" to true, "[1, 2]" to an array), at any depth (properties of
// objects, items of arrays, an Optional written as anyOf with null); a value that does
// not convert is left for schema validation to report, and a missing value is never
// invented.
//
// # Limits
//
// Every pass is linear in its input, and [Options] bounds the response size, the
// nesting depth of arguments and the calls per response (defaults
// [DefaultMaxInputSize], [DefaultMaxDepth], [DefaultMaxCalls]). Over a limit, the
// response or the call fails with a parse error; nothing panics.
package toolcall
