package messages

// Header names. Metadata rides in headers so that a response can be published with no
// client library and so that services can route without decoding bodies.
const (
	// HeaderResponseID names the response a message belongs to. On a response it is
	// optional: without it the parser uses Nats-Msg-Id, then the stream sequence.
	HeaderResponseID = "Toolbus-Response-Id"
	// HeaderConversation repeats the conversation of the subject.
	HeaderConversation = "Toolbus-Conversation"
	// MetaConversation is the key of an MCP request's _meta naming the conversation a
	// tools/call is made for: toolbus sends it with every call, and servers that keep
	// state (the engineering server's activations) key it by the conversation.
	MetaConversation = "toolbus/conversation"
	// MetaTenant names the conversation's tenant (Tenant) in the same _meta, when it
	// has one.
	MetaTenant = "toolbus/tenant"
	// HeaderCallIndex is the 0-based position of a call within its response.
	HeaderCallIndex = "Toolbus-Call-Index"
	// HeaderCallCount is the number of calls the parser found in the response.
	HeaderCallCount = "Toolbus-Call-Count"
	// HeaderCallNext is the index of the first call of the next segment of the response
	// ([ToolCall.Next]), when there is one.
	HeaderCallNext = "Toolbus-Call-Next"
	// HeaderFormat pins the tool-call syntax of one response ("tool_call", "llama_json",
	// "mistral", ...; see toolcall.Formats), overriding the configuration.
	HeaderFormat = "Toolbus-Format"
	// HeaderOutputFormat asks for the native next turn of an API beside a response's
	// output text ("openai", "openai_responses", "anthropic", "gemini", "bedrock",
	// "ollama"; see Output.Native), overriding the configuration's default.
	HeaderOutputFormat = "Toolbus-Output-Format"
	// HeaderReasoning says where one response's reasoning is ("auto", "tagged", "open";
	// see toolcall.Reasoning), overriding the configuration.
	HeaderReasoning = "Toolbus-Reasoning"
	// HeaderChunk numbers the chunks of a streamed response, from 1, in the order the
	// model wrote them.
	HeaderChunk = "Toolbus-Chunk"
	// HeaderFinal marks a streamed response's last chunk: "true", "1", "yes" or "on"
	// (any case; "false", "0", "no", "off" or none: not the last). Any other value ends
	// the response with a parse_error.
	HeaderFinal = "Toolbus-Final"
	// HeaderProgressOf, on a message of ProgressSubject, names the call under way whose
	// server reported progress ([CallProgress]); a streamed response's results, the
	// other messages there, carry none.
	HeaderProgressOf = "Toolbus-Progress-Of"
	// HeaderLogOf, on a message of ProgressSubject, names the call under way during
	// which its server logged the message it carries ([CallLog]).
	HeaderLogOf = "Toolbus-Log-Of"
	// HeaderResourceUpdated, on a message of ProgressSubject, names the server whose
	// resource a conversation subscribed to changed ([ResourceUpdated]).
	HeaderResourceUpdated = "Toolbus-Resource-Updated"
	// HeaderDeadline is an RFC 3339 time after which a call is answered with timeout.
	HeaderDeadline = "Toolbus-Deadline"
	// HeaderMsgID is JetStream's de-duplication id: the response's scoped id
	// ("<conversation>/<response id>", [ScopedID]) on responses and outputs, the call id
	// ("<conversation>/<response id>/<index>", [CallID]) on calls and results. Scoping by
	// conversation keeps two conversations that reuse a response id apart.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderTraceparent is the W3C trace context header.
	HeaderTraceparent = "traceparent"
	// HeaderTracestate is the W3C trace state header.
	HeaderTracestate = "tracestate"
)
