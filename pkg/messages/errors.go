package messages

import (
	"errors"
	"fmt"
)

// ErrorCode is the stable code of a failed call. Models and orchestrators branch on it.
type ErrorCode string

// The error codes of a failed call.
const (
	// CodeParseError: the model wrote a call that could not be understood.
	CodeParseError ErrorCode = "parse_error"
	// CodeUnknownTool: no backend offers a tool of that name.
	CodeUnknownTool ErrorCode = "unknown_tool"
	// CodeInvalidArguments: the arguments do not fit the tool's input schema.
	CodeInvalidArguments ErrorCode = "invalid_arguments"
	// CodeNotAllowed: configuration forbids the tool.
	CodeNotAllowed ErrorCode = "not_allowed"
	// CodeDomainNotActive: an engineering calculator was called before its domain was
	// activated in the conversation.
	CodeDomainNotActive ErrorCode = "domain_not_active"
	// CodeServerUnavailable: the tool's server could not be reached within the retry budget.
	CodeServerUnavailable ErrorCode = "server_unavailable"
	// CodeTimeout: the call did not finish before its deadline.
	CodeTimeout ErrorCode = "timeout"
	// CodeToolError: the tool ran and reported a failure of its own.
	CodeToolError ErrorCode = "tool_error"
	// CodeOutcomeUnknown: a call with side effects may or may not have run; it is not
	// repeated.
	CodeOutcomeUnknown ErrorCode = "outcome_unknown"
	// CodeSkipped: the call was not run because an earlier call of its response failed
	// and the configuration says to skip the rest (executor.on_error "skip").
	CodeSkipped ErrorCode = "skipped"
	// CodeRateLimited: the call was not run because a limit on calls (the
	// configuration's "limits") is used up; the message says when to try again. Not
	// final: the same call may run once the limit's window has passed, but toolbus does
	// not wait for it.
	CodeRateLimited ErrorCode = "rate_limited"
	// CodeInternal: toolbus itself failed.
	CodeInternal ErrorCode = "internal"
)

// Retryable reports whether a failure with this code may succeed when tried again
// without any change by the model.
func (c ErrorCode) Retryable() bool {
	return c == CodeServerUnavailable || c == CodeTimeout || c == CodeRateLimited
}

// ToolError is a failed call: a code and a message written for the model.
type ToolError struct {
	Code    ErrorCode
	Message string
	// Err is the underlying cause, kept for logs; it is not shown to the model.
	Err error
	// Unsent is set when the request provably never reached the tool (the connection was
	// refused), so repeating it cannot repeat a side effect.
	Unsent bool
	// Final is set when trying again cannot help until someone acts (a server that
	// needs a login, a command that is not found, credentials refused): the failure is
	// answered at once, never retried.
	Final bool
	// Stopped is set when the tool was stopped at its time limit (a tools-folder
	// process killed with everything it started): it cannot complete later, so a
	// timeout is a timeout, not an unknown outcome.
	Stopped bool
}

// Retryable reports whether the call may be tried again as it is: a retryable code,
// and nothing that only an operator can change.
func (e *ToolError) Retryable() bool { return e.Code.Retryable() && !e.Final }

// Errorf returns a *ToolError with a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *ToolError {
	return &ToolError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *ToolError) Error() string { return string(e.Code) + ": " + e.Message }

func (e *ToolError) Unwrap() error { return e.Err }

// AsToolError returns the *ToolError in err's chain, or wraps err as CodeInternal.
func AsToolError(err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	return &ToolError{Code: CodeInternal, Message: err.Error(), Err: err}
}

// LoginCommand is the command that authorizes toolbus with an http server that
// requires OAuth: the answer of a call to it, and its health, name it.
func LoginCommand(server string) string { return "toolbus auth login " + server }
