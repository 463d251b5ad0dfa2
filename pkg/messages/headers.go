package messages

// Header names. Metadata rides in headers so that a response can be published with no
// client library and so that services can route without decoding bodies.
const (
	// HeaderResponseID names the response a message belongs to. On a response it is
	// optional: without it the parser uses Nats-Msg-Id, then the stream sequence.
	HeaderResponseID = "Toolbus-Response-Id"
	// HeaderConversation repeats the conversation of the subject.
	HeaderConversation = "Toolbus-Conversation"
	// HeaderCallIndex is the 0-based position of a call within its response.
	HeaderCallIndex = "Toolbus-Call-Index"
	// HeaderCallCount is the number of calls the parser found in the response.
	HeaderCallCount = "Toolbus-Call-Count"
	// HeaderFormat pins the tool-call syntax of one response ("tool_call", "llama_json",
	// "mistral", ...; see toolcall.Formats), overriding the configuration.
	HeaderFormat = "Toolbus-Format"
	// HeaderDeadline is an RFC 3339 time after which a call is answered with timeout.
	HeaderDeadline = "Toolbus-Deadline"
	// HeaderMsgID is JetStream's de-duplication id: the response id on responses and
	// outputs, the call id ("<response id>/<index>") on calls and results.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderTraceparent is the W3C trace context header.
	HeaderTraceparent = "traceparent"
	// HeaderTracestate is the W3C trace state header.
	HeaderTracestate = "tracestate"
)
