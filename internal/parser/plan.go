package parser

import (
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolbus/toolbus/internal/formatter"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// Work is what the parser publishes for one response: calls to execute, results it can
// give at once (calls it could not parse), or the output of a response without calls.
type Work struct {
	Calls  []messages.ToolCall
	Failed []messages.ToolResult
	// Output is set only for a response without calls.
	Output *messages.Output
}

// Plan extracts the calls of one response.
func Plan(responseID, conversation, text string, deadline time.Time, opts *toolcall.Options) Work {
	ext := toolcall.Extract(text, opts)
	if len(ext.Calls) == 0 {
		out := formatter.NoToolCall(responseID, conversation)
		return Work{Output: &out}
	}
	n := len(ext.Calls)
	w := Work{Calls: make([]messages.ToolCall, 0, n)}
	for i, c := range ext.Calls {
		call := messages.ToolCall{
			ID: messages.CallID(responseID, i), ResponseID: responseID, Conversation: conversation,
			Index: i, Count: n, Tool: c.Name, Arguments: c.Arguments, Repairs: c.Repairs, Deadline: deadline,
		}
		if c.Err != nil {
			w.Failed = append(w.Failed, messages.ResultFor(call).Fail(c.Err))
			continue
		}
		w.Calls = append(w.Calls, call)
	}
	return w
}

// CheckArguments moves every call whose arguments do not fit its tool's input schema
// from w.Calls to w.Failed, answered with invalid_arguments naming the argument. Tools
// without a known schema pass unchecked; the executor's backend checks them.
func CheckArguments(w Work, schemas map[string]*jsonschema.Resolved) Work {
	if len(schemas) == 0 || len(w.Calls) == 0 {
		return w
	}
	calls := w.Calls[:0:0]
	for _, c := range w.Calls {
		schema, ok := schemas[c.Tool]
		if !ok {
			calls = append(calls, c)
			continue
		}
		args, err := toolcall.CheckArguments(c.Tool, schema, c.Arguments)
		if err != nil {
			w.Failed = append(w.Failed, messages.ResultFor(c).Fail(err))
			continue
		}
		c.Arguments = args
		calls = append(calls, c)
	}
	w.Calls = calls
	return w
}
