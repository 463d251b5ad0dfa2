package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolbus/toolbus/pkg/messages"
)

// Executor runs calls on their backends. It knows nothing of NATS.
type Executor struct {
	Router *Router
	// Timeout bounds one call when the call carries no earlier deadline. Default 60s.
	Timeout time.Duration
}

// Execute runs one call and returns its result; it never fails and never panics.
func (e *Executor) Execute(ctx context.Context, call messages.ToolCall) messages.ToolResult {
	start := time.Now()
	res := messages.ResultFor(call)
	res.Attempts = 1
	out, backend, err := e.run(ctx, call)
	res.Backend = backend
	res.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	if err != nil {
		return res.Fail(err)
	}
	if len(out) == 0 || !json.Valid(out) {
		return res.Fail(messages.Errorf(messages.CodeToolError, "the tool %q returned no valid JSON result", call.Tool))
	}
	res.Success, res.Result = true, out
	return res
}

func (e *Executor) run(ctx context.Context, call messages.ToolCall) (out json.RawMessage, backend string, err error) {
	b, err := e.Router.Route(call.Tool)
	if err != nil {
		return nil, "", err
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !call.Deadline.IsZero() {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, call.Deadline)
		defer cancelDeadline()
	}
	defer func() {
		if r := recover(); r != nil {
			err = messages.Errorf(messages.CodeInternal, "the tool %q crashed: %v", call.Tool, r)
		}
	}()
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	out, err = b.Call(ctx, call.Conversation, call.Tool, args)
	if err != nil {
		var te *messages.ToolError
		switch {
		case errors.As(err, &te):
		case errors.Is(err, context.DeadlineExceeded):
			err = &messages.ToolError{Code: messages.CodeTimeout, Message: fmt.Sprintf("the tool %q did not finish in time", call.Tool), Err: err}
		default:
			err = &messages.ToolError{Code: messages.CodeToolError, Message: err.Error(), Err: err}
		}
	}
	return out, b.Name(), err
}
