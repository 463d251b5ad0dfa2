package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Failed is what [Classify] knows of the call that failed.
type Failed struct {
	// Name is the tool's name as the model wrote it.
	Name string
	// Route is where the call went (its MCP tool, its annotations, its time limit).
	Route Route
	// Budget is the call's time budget ([Executor.Budget] less its first attempt); 0:
	// unknown.
	Budget time.Duration
}

// Classify turns any failure of a call into the one error the model reads and the
// executor acts on: its code, its message, and whether it may be tried again. Every
// backend's failure goes through it, so that the same failure gets the same answer
// whichever backend, name or spelling led to it. The rules, in order:
//
//   - A server that needs an OAuth login, and a server that cannot be used as configured
//     ([mcpwire.Misconfigured]: its command not found or not executable, its credentials
//     refused with HTTP 401 or 403 — a 401 to the headers the configuration gives it is
//     such a refusal, not a login that is missing —, its TLS certificate not verified), is
//     server_unavailable, Unsent and Final: answered at once, never retried, not a sign
//     of trouble to the breaker.
//   - A deadline is timeout, naming the limit that ran out: the tool's own (a tools-folder
//     tool's, an MCP server's timeout) when it is shorter than the call's budget, else the
//     budget. A timeout of a tool that is neither read-only nor idempotent, was sent (not
//     one whose server could not be reached in time) and was not stopped (a remote server
//     may still complete it) is outcome_unknown.
//   - The server's own errors: it has no such tool → unknown_tool, it rejected the
//     arguments → invalid_arguments, isError → tool_error.
//   - The configuration's refusals → not_allowed; unknown or ambiguous names →
//     unknown_tool.
//   - A server that cannot be reached, or a closed pool → server_unavailable, Unsent
//     (retried). A connection lost during the call, or the call cancelled under it (the
//     executor stopping) → server_unavailable when the tool is safe to repeat, else
//     outcome_unknown.
//   - A *messages.ToolError a backend made is kept as it is; anything else is
//     tool_error.
func Classify(err error, f Failed) *messages.ToolError {
	if err == nil {
		return nil
	}
	te := func(code messages.ErrorCode, format string, args ...any) *messages.ToolError {
		return &messages.ToolError{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
	}
	server := f.Route.MCP.Server
	var (
		tool   *mcpwire.ToolError
		made   *messages.ToolError
		login  *oauth.NeedsLoginError
		status *mcpwire.StatusError
		result *messages.ToolError
	)
	switch {
	case errors.As(err, &made):
		result = made
	case errors.Is(err, oauth.ErrNeedsLogin) && !(errors.As(err, &status) && status.Static):
		// Nobody has authorized toolbus with the server (or the authorization was
		// revoked): say who can, and do not retry.
		reason := "it requires an OAuth authorization"
		if errors.As(err, &login) {
			reason = login.Reason
		}
		result = te(messages.CodeServerUnavailable, "the server %q needs a login: %s; an operator authorizes toolbus with `%s`", server, reason, messages.LoginCommand(server))
		result.Unsent, result.Final = true, true
	case mcpwire.Misconfigured(err):
		result = te(messages.CodeServerUnavailable, "the server %q cannot be used as configured: %s; this call was not sent, and no call of its tools can succeed until an operator fixes its configuration or the server",
			server, cause(err, server))
		result.Unsent, result.Final = true, true
	case errors.Is(err, context.DeadlineExceeded):
		result = te(messages.CodeTimeout, "the tool %q did not finish in time", messages.EchoName(f.Name))
		// Not connected in time: nothing was sent, nothing may still complete.
		result.Unsent = errors.Is(err, mcpwire.ErrUnavailable)
	case errors.As(err, &tool) && tool.UnknownTool():
		result = te(messages.CodeUnknownTool, "the server %q has no tool %q (any more): %s", server, messages.EchoName(f.Route.MCP.Remote), tool.Message)
	case errors.As(err, &tool) && tool.InvalidArguments():
		result = te(messages.CodeInvalidArguments, "the arguments of %q were rejected: %s", messages.EchoName(f.Name), tool.Message)
	case errors.As(err, &tool):
		result = te(messages.CodeToolError, "%s", tool.Message)
	case errors.Is(err, catalog.ErrNotAllowed):
		result = NotAllowed(f.Name, err)
	case errors.Is(err, catalog.ErrUnknownTool), errors.Is(err, catalog.ErrAmbiguous):
		result = te(messages.CodeUnknownTool, "%s", err.Error())
	case errors.Is(err, mcpwire.ErrUnavailable), errors.Is(err, mcpwire.ErrClosed):
		// The request never left: repeating it cannot repeat an effect. Say why
		// (connection refused, handshake failed); the stage masks secrets in it.
		result = te(messages.CodeServerUnavailable, "the server %q cannot be reached: %s", server, cause(err, server))
		result.Unsent = true
	case errors.Is(err, mcpwire.ErrConnectionLost), errors.Is(err, context.Canceled):
		result = lost(err, f)
	default:
		result = te(messages.CodeToolError, "the tool %q failed: %v", messages.EchoName(f.Name), err)
	}
	if result.Code == messages.CodeTimeout {
		result = timedOut(result, f)
	}
	return result
}

// lost is the failure of a call whose connection to its server failed during the call,
// or that was cancelled under it (the executor stopping): server_unavailable for a tool
// safe to repeat, else outcome_unknown.
func lost(err error, f Failed) *messages.ToolError {
	server := f.Route.MCP.Server
	what := fmt.Sprintf("the connection to the server %q failed during the call of %q", server, messages.EchoName(f.Name))
	if server == "" || !errors.Is(err, mcpwire.ErrConnectionLost) {
		what = fmt.Sprintf("the call of %q was cancelled before it finished (the executor is stopping)", messages.EchoName(f.Name))
	}
	if f.Route.MCP.Retryable() || f.Route.Info.ReadOnly || f.Route.Info.Idempotent {
		return &messages.ToolError{Code: messages.CodeServerUnavailable, Message: what, Err: err}
	}
	return &messages.ToolError{Code: messages.CodeOutcomeUnknown, Message: what + "; it may or may not have run, and is not repeated", Err: err}
}

// timedOut is the timeout e told as it happened: the limit that ran out, whether the
// tool was stopped, and for a tool with side effects that may still complete, that its
// outcome is unknown.
func timedOut(e *messages.ToolError, f Failed) *messages.ToolError {
	limit := f.Budget
	if own := f.Route.Timeout; own > 0 && (limit <= 0 || own < limit) {
		limit = own
	}
	safe := f.Route.Info.ReadOnly || f.Route.Info.Idempotent
	out := *e
	within := "in time"
	if limit > 0 {
		within = "within its time limit of " + limit.Round(time.Millisecond).String()
	}
	switch {
	case e.Stopped:
		out.Message = fmt.Sprintf("the tool %q did not finish %s and was stopped", messages.EchoName(f.Name), within)
		out.Final = true // stopped at its limit: a second run would be stopped as well
	case e.Unsent:
		out.Message = fmt.Sprintf("the call to %q was not sent: its server could not be reached %s", messages.EchoName(f.Name), within)
	case !safe && !e.Unsent:
		out = messages.ToolError{Code: messages.CodeOutcomeUnknown, Err: e, Message: fmt.Sprintf(
			"the call to %q did not finish %s; it may still complete, and it was not repeated: check its effect before calling it again",
			messages.EchoName(f.Name), within)}
	default:
		out.Message = fmt.Sprintf("the tool %q did not finish %s", messages.EchoName(f.Name), within)
	}
	return &out
}

// cause is err's message without the sentinels and the server's name that wrap it.
func cause(err error, server string) string {
	c := err.Error()
	for _, prefix := range []string{mcpwire.ErrUnavailable.Error() + ": ", mcpwire.ErrClosed.Error() + ": ", server + ": ", mcpwire.ErrMisconfigured.Error() + ": "} {
		c = strings.TrimPrefix(c, prefix)
	}
	return c
}
