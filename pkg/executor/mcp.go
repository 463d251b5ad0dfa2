package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/mcpwire"
	"github.com/toolbus/toolbus/pkg/mcpwire/oauth"
	"github.com/toolbus/toolbus/pkg/messages"
)

// MCPBackend runs the tools of the MCP servers of a pool, including servers added while
// toolbus runs ([mcpwire.Pool.Update]). Routes name the server "mcp:<server>".
type MCPBackend struct {
	Pool *mcpwire.Pool
	// RoutedOnly makes the backend resolve only the names the configuration routes to a
	// server explicitly, and list no tools. Such a backend goes first in a [Router], so
	// that routes win over every other backend; a second MCPBackend, last, serves the
	// servers' own tools.
	RoutedOnly bool
}

// Name is "mcp": the servers' tools are in the catalog under each server's name.
func (MCPBackend) Name() string { return "mcp" }

// Tools lists the servers' visible tools under the names a model calls them by, after
// waiting (up to ctx) for every server's first answer.
func (b MCPBackend) Tools(ctx context.Context) []messages.ToolInfo {
	if b.RoutedOnly {
		return nil
	}
	tools := b.Pool.Tools(ctx)
	out := make([]messages.ToolInfo, 0, len(tools))
	for _, t := range tools {
		out = append(out, info(t.Name, t))
	}
	return out
}

// Resolve looks name up in the pool once; the route carries the server's tool to call.
// A name the configuration forbids, or a bare name several servers share, is refused
// here with the error the model sees.
func (b MCPBackend) Resolve(ctx context.Context, name string) (Route, bool, error) {
	if b.RoutedOnly {
		if server, routed := b.Pool.Route(name); !routed || server == "" {
			return Route{}, false, nil
		}
	}
	t, err := b.Pool.Lookup(ctx, name)
	switch {
	case err == nil:
	case errors.Is(err, catalog.ErrNotAllowed), errors.Is(err, catalog.ErrAmbiguous):
		return Route{Server: "mcp:" + t.Server, Info: messages.ToolInfo{Name: name}, MCP: t, Ref: catalog.Ref{Server: t.Server, Tool: t.Remote}}, true, mcpError(err, name, t)
	case b.RoutedOnly:
		return Route{Info: messages.ToolInfo{Name: name}}, true, mcpError(err, name, t)
	default:
		return Route{}, false, nil
	}
	pool := b.Pool
	session := ""
	if pool.Scoped(t.Server) {
		session = t.Server
	}
	return Route{Server: "mcp:" + t.Server, Info: info(name, t), MCP: t, Ref: catalog.Ref{Server: t.Server, Tool: t.Remote}, Timeout: pool.Timeout(t.Server), Session: session,
		Run: func(ctx context.Context, conversation string, args json.RawMessage) (json.RawMessage, error) {
			// The conversation is in the request's _meta; a server under the
			// elicitation policy "ask" asks it; a conversation-scoped server runs the
			// call in the conversation's own session.
			out, err := pool.CallTool(mcpwire.WithConversation(ctx, conversation), t, args)
			if err != nil {
				return nil, mcpError(err, name, t)
			}
			return out, nil
		}}, true, nil
}

func info(name string, t catalog.Tool) messages.ToolInfo {
	return messages.ToolInfo{Name: name, Description: t.Description, InputSchema: t.InputSchema,
		OutputSchema: t.OutputSchema, ReadOnly: t.ReadOnly, Idempotent: t.Idempotent}
}

// mcpError maps an error of [mcpwire.Pool] to the code a model sees: isError →
// tool_error, rejected arguments → invalid_arguments, unreachable server →
// server_unavailable, deadline → timeout, and a connection lost during a call of a tool
// that is neither read-only nor idempotent → outcome_unknown.
func mcpError(err error, name string, t catalog.Tool) *messages.ToolError {
	te := func(code messages.ErrorCode, format string, args ...any) *messages.ToolError {
		return &messages.ToolError{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
	}
	var tool *mcpwire.ToolError
	switch {
	case errors.As(err, &tool) && tool.UnknownTool():
		return te(messages.CodeUnknownTool, "the server %q has no tool %q (any more): %s", t.Server, messages.EchoName(t.Remote), tool.Message)
	case errors.As(err, &tool) && tool.InvalidArguments():
		return te(messages.CodeInvalidArguments, "the arguments of %q were rejected: %s", messages.EchoName(name), tool.Message)
	case errors.As(err, &tool):
		return te(messages.CodeToolError, "%s", tool.Message)
	case errors.Is(err, catalog.ErrNotAllowed):
		return NotAllowed(name, err)
	case errors.Is(err, catalog.ErrUnknownTool), errors.Is(err, catalog.ErrAmbiguous):
		return te(messages.CodeUnknownTool, "%s", err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return te(messages.CodeTimeout, "the tool %q did not finish in time", messages.EchoName(name))
	case errors.Is(err, oauth.ErrNeedsLogin):
		// Nobody has authorized toolbus with the server (or the authorization was
		// revoked): say who can, and do not retry.
		var nl *oauth.NeedsLoginError
		reason := "it requires an OAuth authorization"
		if errors.As(err, &nl) {
			reason = nl.Reason
		}
		e := te(messages.CodeServerUnavailable, "the server %q needs a login: %s; an operator authorizes toolbus with `%s`", t.Server, reason, messages.LoginCommand(t.Server))
		e.Unsent, e.Final = true, true
		return e
	case errors.Is(err, mcpwire.ErrUnavailable), errors.Is(err, mcpwire.ErrClosed):
		// The request never left: repeating it cannot repeat an effect.
		// Say why (command not found, connection refused, handshake failed); the stage
		// masks secrets in it.
		cause := err.Error()
		for _, prefix := range []string{mcpwire.ErrUnavailable.Error() + ": ", mcpwire.ErrClosed.Error() + ": ", t.Server + ": "} {
			cause = strings.TrimPrefix(cause, prefix)
		}
		e := te(messages.CodeServerUnavailable, "the server %q cannot be reached right now: %s", t.Server, cause)
		e.Unsent = true
		return e
	case errors.Is(err, mcpwire.ErrConnectionLost), errors.Is(err, context.Canceled):
		if t.Retryable() {
			return te(messages.CodeServerUnavailable, "the connection to the server %q failed during the call", t.Server)
		}
		return te(messages.CodeOutcomeUnknown, "the connection to the server %q failed during the call of %q; it may or may not have run, and is not repeated", t.Server, messages.EchoName(name))
	}
	return te(messages.CodeToolError, "the tool %q failed: %v", messages.EchoName(name), err)
}
