package messages

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
