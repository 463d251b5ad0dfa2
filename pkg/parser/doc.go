// Package parser is the first stage: it reads each model response, extracts every tool
// call with [toolcall.Extract], and produces one [messages.ToolCall] per call. A block
// that cannot be understood, or arguments that do not fit the tool's schema, travel as a
// call carrying its error, which the executor answers without running anything; a
// response without a call gets its no_tool_call output here, so every response is
// answered exactly once.
//
// [Stage.Parse] is the stage function, run by the bus's stage runner; [Plan] and
// [CheckArguments] are its pure parts.
package parser
