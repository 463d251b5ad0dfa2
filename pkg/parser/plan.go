package parser

import (
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/toolcall"
)

// Work is what the parser publishes for one response: its calls, in order, or the
// output of a response without calls. A call the parser could not read, or whose
// arguments do not fit its tool's schema, carries the error to answer it with; the
// executor answers it without running anything. (All calls go through the executor, so
// the parser needs no permission to publish results.)
type Work struct {
	Calls []messages.ToolCall
	// Output is set only for a response without calls.
	Output *messages.Output
}

// Plan extracts the calls of one response.
func Plan(responseID, conversation, text string, deadline time.Time, opts *toolcall.Options) Work {
	return planOf(toolcall.Extract(text, opts), responseID, conversation, deadline)
}

func planOf(ext toolcall.Extraction, responseID, conversation string, deadline time.Time) Work {
	if len(ext.Calls) == 0 {
		out := messages.NoToolCall(responseID, conversation)
		return Work{Output: &out}
	}
	n := len(ext.Calls)
	w := Work{Calls: make([]messages.ToolCall, 0, n)}
	for i, c := range ext.Calls {
		call := messages.ToolCall{
			ID: messages.CallID(conversation, responseID, i), ResponseID: responseID, Conversation: conversation,
			Index: i, Count: n, Tool: c.Name, ModelID: c.ID, Arguments: c.Arguments, Repairs: c.Repairs, Deadline: deadline,
		}
		if call.ModelID == "" {
			call.ModelID = messages.GeneratedCallID(call.ID)
		}
		if c.Err != nil {
			call.Error = &messages.ResultError{Code: c.Err.Code, Message: c.Err.Message}
		}
		w.Calls = append(w.Calls, call)
	}
	return w
}

// CheckArguments marks every call whose arguments do not fit its tool's input schema
// with an invalid_arguments error naming the argument, and gives the others their
// arguments with the schema's defaults applied. Tools without a known schema pass
// unchecked; the executor's backend checks them.
func CheckArguments(w Work, schemas map[string]*jsonschema.Resolved) Work {
	if len(schemas) == 0 {
		return w
	}
	for i, c := range w.Calls {
		schema, ok := schemas[c.Tool]
		if !ok || c.Error != nil {
			continue
		}
		args, err := toolcall.CheckArguments(c.Tool, schema, c.Arguments)
		if err != nil {
			te := messages.AsToolError(err)
			w.Calls[i].Error = &messages.ResultError{Code: te.Code, Message: te.Message}
			continue
		}
		w.Calls[i].Arguments = args
	}
	return w
}
