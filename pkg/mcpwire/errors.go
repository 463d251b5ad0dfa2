package mcpwire

import (
	"errors"
	"fmt"
	"strings"

	"github.com/toolbus/toolbus/pkg/catalog"
)

// Sentinel errors of [Pool.Call] and [Pool.Lookup]. Callers branch on them with
// errors.Is; a deadline shows as context.DeadlineExceeded.
var (
	// ErrUnknownTool: no configured server offers a tool of that name
	// ([catalog.ErrUnknownTool]).
	ErrUnknownTool = catalog.ErrUnknownTool
	// ErrAmbiguous: a bare tool name that more than one server offers
	// ([catalog.ErrAmbiguous]).
	ErrAmbiguous = catalog.ErrAmbiguous
	// ErrNotAllowed: the tool exists but configuration forbids it
	// ([catalog.ErrNotAllowed]).
	ErrNotAllowed = catalog.ErrNotAllowed
	// ErrUnavailable: the server could not be reached. The request never left, so
	// trying again later is always safe.
	ErrUnavailable = errors.New("server unavailable")
	// ErrConnectionLost: the connection failed after the request was sent; the tool may
	// or may not have run.
	ErrConnectionLost = errors.New("connection lost during the call")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("pool closed")
)

// ToolError is a failure the server reported: a result with isError set (Code 0), or a
// JSON-RPC error response to tools/call.
type ToolError struct {
	Server, Tool string
	// Code is the JSON-RPC error code, or 0 for a result with isError.
	Code int64
	// Message is the server's own text, meant for the model.
	Message string
}

// JSON-RPC error codes toolbus branches on.
const (
	codeMethodNotFound = -32601
	codeParseError     = -32700
	codeInvalidParams  = -32602
)

func (e *ToolError) Error() string {
	if e.Code != 0 {
		return fmt.Sprintf("%s: %s: error %d: %s", e.Server, e.Tool, e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s: %s", e.Server, e.Tool, e.Message)
}

// InvalidArguments reports whether the server rejected the call's arguments.
func (e *ToolError) InvalidArguments() bool {
	return e.Code == codeInvalidParams && !e.UnknownTool()
}

// UnknownTool reports whether the server says it has no such tool, which happens when
// its tools changed after the catalog was last refreshed.
func (e *ToolError) UnknownTool() bool {
	return e.Code == codeMethodNotFound || (e.Code == codeInvalidParams && containsFold(e.Message, "unknown tool"))
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
