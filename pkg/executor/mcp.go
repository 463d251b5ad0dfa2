package executor

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/mcpwire"
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
		r := Route{Server: "mcp:" + t.Server, Info: messages.ToolInfo{Name: name}, MCP: t, Ref: catalog.Ref{Server: t.Server, Tool: t.Remote}}
		return r, true, Classify(err, Failed{Name: name, Route: r})
	case b.RoutedOnly:
		r := Route{Info: messages.ToolInfo{Name: name}, MCP: t}
		return Route{Info: r.Info}, true, Classify(err, Failed{Name: name, Route: r})
	default:
		return Route{}, false, nil
	}
	pool := b.Pool
	session := ""
	if pool.Scoped(t.Server) {
		session = t.Server
	}
	return Route{Server: "mcp:" + t.Server, Info: info(name, t), MCP: t, Ref: catalog.Ref{Server: t.Server, Tool: t.Remote},
		Timeout: pool.Timeout(t.Server), MaxAttempts: pool.MaxAttempts(t.Server), Session: session,
		Run: func(ctx context.Context, conversation string, args json.RawMessage) (json.RawMessage, error) {
			// The conversation is in the request's _meta; a server under the
			// elicitation policy "ask" asks it; a conversation-scoped server runs the
			// call in the conversation's own session. Its failures are the pool's
			// errors, which the executor classifies ([Classify]).
			return pool.CallTool(mcpwire.WithConversation(ctx, conversation), t, args)
		}}, true, nil
}

func info(name string, t catalog.Tool) messages.ToolInfo {
	return messages.ToolInfo{Name: name, Description: t.Description, InputSchema: t.InputSchema,
		OutputSchema: t.OutputSchema, ReadOnly: t.ReadOnly, Idempotent: t.Idempotent}
}
