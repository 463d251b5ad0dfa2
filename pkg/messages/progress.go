package messages

import "encoding/json"

// CallProgress is an MCP server's notifications/progress about a call under way, with
// the call's id (mcpwire.Options.Progress receives it).
type CallProgress struct {
	CallID       string `json:"call_id"`
	Conversation string `json:"conversation"`
	Server       string `json:"server"`
	// Tool is the tool's canonical name (<server>__<tool>).
	Tool string `json:"tool"`
	// Progress grows with each notification; Total, when the server knows it, is its
	// end; Message is the server's word on the step.
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// CallLog is an MCP server's log message (notifications/message) sent while one of the
// conversation's calls ran on it, with the call's id (mcpwire.Options.Log receives it).
// It travels on [ProgressSubject] with [HeaderLogOf] naming the call.
type CallLog struct {
	CallID       string `json:"call_id"`
	Conversation string `json:"conversation"`
	Server       string `json:"server"`
	// Tool is the tool's canonical name (<server>__<tool>).
	Tool string `json:"tool"`
	// Level is the message's syslog severity (debug, info, notice, warning, error,
	// critical, alert, emergency), Logger the server's name for its source.
	Level  string `json:"level"`
	Logger string `json:"logger,omitempty"`
	// Data is what the server logged, any JSON value.
	Data json.RawMessage `json:"data"`
}

// ResourceUpdated says that a resource a conversation subscribed to changed: an MCP
// server's notifications/resources/updated, on a session where a call of the conversation
// subscribed to the URI (a server's resources_subscribe tool, which toolbus's MCP front
// door calls for a client's resources/subscribe). It travels on [ProgressSubject] with
// [HeaderResourceUpdated] naming the server; best effort.
type ResourceUpdated struct {
	Conversation string `json:"conversation"`
	Server       string `json:"server"`
	URI          string `json:"uri"`
}
