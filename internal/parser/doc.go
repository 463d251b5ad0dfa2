// Package parser is the first stage: it reads each model response from the responses
// stream, extracts every tool call with [toolcall.Extract], and publishes one
// [messages.ToolCall] per call. A block that cannot be understood is answered at once
// with a parse_error result, and a response without a call gets its no_tool_call output
// here, so every response is answered exactly once.
//
// [Plan] is the pure part; [Service] is the plumbing.
package parser
