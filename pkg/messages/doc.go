// Package messages defines every message toolbus puts on NATS, the subjects they travel
// on, the headers that carry their metadata and the error codes a model sees. Nothing
// else in toolbus spells a subject, a header name or an error code by hand.
//
// # Flow
//
// An orchestrator publishes the raw text of a model's answer to [ResponseSubject]. The
// parser turns it into one [ToolCall] per call on [CallSubject]; the executor answers
// each with a [ToolResult] on [ResultSubject]; the formatter gathers the results of one
// response, in call order, into one [Output] on [OutputSubject].
//
// Metadata travels in headers so that a plain `nats pub toolbus.responses.c1 "..."` is a
// valid request: [HeaderResponseID], [HeaderConversation], [HeaderCallIndex],
// [HeaderCallCount], [HeaderMsgID] and the W3C [HeaderTraceparent].
//
// # Errors
//
// A failed call carries an [ErrorCode] and a message a model can act on. Code that fails
// a call returns a [*ToolError]; [AsToolError] recovers it from any wrapped error.
package messages
