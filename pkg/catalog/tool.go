package catalog

import (
	"encoding/json"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Tool is one tool of one server as a catalog keeps it, and as the executors write it
// into the catalog bucket (a JSON list of them per backend) for the parsers.
type Tool struct {
	// Name is what a model calls it: see [ExposedName], or the route's name.
	Name string `json:"name"`
	// Server is the name of its server (or backend: "local", "engineering"); Remote is
	// its name there, which [New] takes to be Name when it is empty.
	Server string `json:"server"`
	Remote string `json:"remote"`

	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`

	// From the tool's annotations. They are hints of the server, and decide only
	// whether a call whose outcome is unknown may be repeated.
	ReadOnly    bool `json:"readOnly,omitempty"`
	Idempotent  bool `json:"idempotent,omitempty"`
	Destructive bool `json:"destructive,omitempty"`
	// ReadOnlyWhen: see [messages.ToolInfo]; set by in-process backends only.
	ReadOnlyWhen *messages.ArgIn `json:"readOnlyWhen,omitempty"`
}

// Retryable reports whether running the tool twice does no harm.
func (t Tool) Retryable() bool { return t.ReadOnly || t.Idempotent }
