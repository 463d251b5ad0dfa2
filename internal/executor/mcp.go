package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/messages"
)

// DefaultMCPWait bounds how long [MCPBackend.Tools] and [MCPBackend.Has] wait for the
// servers' first tools/list.
const DefaultMCPWait = 10 * time.Second

// MCPBackend runs the tools of one remote MCP server through a pool shared by every
// server, so that results report "mcp:<server>".
type MCPBackend struct {
	Pool   *mcpwire.Pool
	Server string
	// Wait bounds how long Tools and Has wait for the servers' first answer (they
	// connect on first use). Default [DefaultMCPWait].
	Wait time.Duration
	// RoutedOnly makes the backend claim only the names the configuration routes to
	// its server explicitly, and list no tools. Such backends go first in a [Router],
	// so that routes win over every other backend.
	RoutedOnly bool
}

// MCPBackends returns a backend for each enabled server of pool, sorted by name.
func MCPBackends(pool *mcpwire.Pool) []Backend {
	var out []Backend
	for _, st := range pool.Status() {
		out = append(out, MCPBackend{Pool: pool, Server: st.Server})
	}
	return out
}

// MCPRoutedBackends returns the [MCPBackend.RoutedOnly] twin of each backend of
// [MCPBackends].
func MCPRoutedBackends(pool *mcpwire.Pool) []Backend {
	var out []Backend
	for _, st := range pool.Status() {
		out = append(out, MCPBackend{Pool: pool, Server: st.Server, RoutedOnly: true})
	}
	return out
}

func (b MCPBackend) Name() string { return "mcp:" + b.Server }

// Tools lists the server's visible tools under the names a model calls them by.
func (b MCPBackend) Tools() []messages.ToolInfo {
	if b.RoutedOnly {
		return nil
	}
	ctx, cancel := b.waitCtx()
	defer cancel()
	var out []messages.ToolInfo
	for _, t := range b.Pool.Tools(ctx) {
		if t.Server != b.Server {
			continue
		}
		out = append(out, messages.ToolInfo{
			Name: t.Name, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
			ReadOnly: t.ReadOnly, Idempotent: t.Idempotent,
		})
	}
	return out
}

// Has reports whether name resolves to this server, including to refuse it: a tool the
// configuration forbids, or a bare name several servers share (the first one answers
// with the names to use instead).
func (b MCPBackend) Has(name string) bool {
	if server, routed := b.Pool.Route(name); b.RoutedOnly && (!routed || server != b.Server) {
		return false
	}
	ctx, cancel := b.waitCtx()
	defer cancel()
	t, err := b.Pool.Lookup(ctx, name)
	if err != nil && !errors.Is(err, mcpwire.ErrNotAllowed) && !errors.Is(err, mcpwire.ErrAmbiguous) {
		return false
	}
	return t.Server == b.Server
}

// Call runs the tool. Failures are *messages.ToolError: isError → tool_error, rejected
// arguments → invalid_arguments, unreachable server → server_unavailable, deadline →
// timeout, and a connection lost during a call of a tool that is neither read-only nor
// idempotent → outcome_unknown.
func (b MCPBackend) Call(ctx context.Context, _ string, name string, args json.RawMessage) (json.RawMessage, error) {
	t, err := b.Pool.Lookup(ctx, name)
	if err != nil {
		return nil, mcpError(err, name, t)
	}
	out, err := b.Pool.CallTool(ctx, t, args)
	if err != nil {
		return nil, mcpError(err, name, t)
	}
	return out, nil
}

func (b MCPBackend) waitCtx() (context.Context, context.CancelFunc) {
	wait := b.Wait
	if wait <= 0 {
		wait = DefaultMCPWait
	}
	return context.WithTimeout(context.Background(), wait)
}

// mcpError maps an error of [mcpwire.Pool] to the code a model sees.
func mcpError(err error, name string, t mcpwire.Tool) *messages.ToolError {
	te := func(code messages.ErrorCode, format string, args ...any) *messages.ToolError {
		return &messages.ToolError{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
	}
	var tool *mcpwire.ToolError
	switch {
	case errors.As(err, &tool) && tool.UnknownTool():
		return te(messages.CodeUnknownTool, "the server %q has no tool %q (any more): %s", t.Server, t.Remote, tool.Message)
	case errors.As(err, &tool) && tool.InvalidArguments():
		return te(messages.CodeInvalidArguments, "the arguments of %q were rejected: %s", name, tool.Message)
	case errors.As(err, &tool):
		return te(messages.CodeToolError, "%s", tool.Message)
	case errors.Is(err, mcpwire.ErrNotAllowed):
		return te(messages.CodeNotAllowed, "the tool %q is not allowed by the configuration", name)
	case errors.Is(err, mcpwire.ErrUnknownTool), errors.Is(err, mcpwire.ErrAmbiguous):
		return te(messages.CodeUnknownTool, "%s", err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return te(messages.CodeTimeout, "the tool %q did not finish in time", name)
	case errors.Is(err, mcpwire.ErrUnavailable), errors.Is(err, mcpwire.ErrClosed):
		// The request never left: repeating it cannot repeat an effect.
		e := te(messages.CodeServerUnavailable, "the server %q cannot be reached right now", t.Server)
		e.Unsent = true
		return e
	case errors.Is(err, mcpwire.ErrConnectionLost), errors.Is(err, context.Canceled):
		if t.Retryable() {
			return te(messages.CodeServerUnavailable, "the connection to the server %q failed during the call", t.Server)
		}
		return te(messages.CodeOutcomeUnknown, "the connection to the server %q failed during the call of %q; it may or may not have run, and is not repeated", t.Server, name)
	}
	return te(messages.CodeToolError, "the tool %q failed: %v", name, err)
}
