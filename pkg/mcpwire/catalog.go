package mcpwire

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolbus/toolbus/pkg/catalog"
)

// Tool is one tool of one server, as the catalog keeps it and the catalog bucket holds it.
type Tool = catalog.Tool

// toolFromMCP converts a tool server listed, named as a server with prefix shows it.
func toolFromMCP(server, prefix string, t *mcp.Tool) Tool {
	out := Tool{Server: server, Remote: t.Name, Name: catalog.ExposedName(server, prefix, t.Name), Title: t.Title, Description: t.Description}
	out.InputSchema = marshalSchema(t.InputSchema)
	if t.OutputSchema != nil {
		out.OutputSchema = marshalSchema(t.OutputSchema)
	}
	if a := t.Annotations; a != nil {
		out.ReadOnly, out.Idempotent = a.ReadOnlyHint, a.IdempotentHint || a.ReadOnlyHint
		// The spec's default for destructiveHint is true, and it is meaningless for a
		// read-only tool.
		out.Destructive = !a.ReadOnlyHint && (a.DestructiveHint == nil || *a.DestructiveHint)
		if out.Title == "" {
			out.Title = a.Title
		}
	} else {
		out.Destructive = true
	}
	return out
}

// remembered is the MCP tool catalog tool t was made of (toolFromMCP): its remote name,
// texts, schemas and annotations.
func remembered(t Tool) *mcp.Tool {
	destructive := t.Destructive
	out := &mcp.Tool{Name: t.Remote, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: t.ReadOnly, IdempotentHint: t.Idempotent, DestructiveHint: &destructive}}
	if len(t.OutputSchema) > 0 {
		out.OutputSchema = t.OutputSchema
	}
	if len(t.InputSchema) == 0 {
		out.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	if out.Name == "" {
		out.Name = t.Name
	}
	return out
}

func marshalSchema(s any) json.RawMessage {
	if s == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

// Lists are the server's own allowedTools and blockedTools, as [catalog.Permit] reads
// them beside the configuration's top-level lists.
func (c ServerConfig) Lists(server string) catalog.Lists {
	return catalog.Lists{Scope: "mcpServers." + server, Allowed: c.AllowedTools, Blocked: c.BlockedTools}
}

// catalogInput is what the catalog is built from: one entry per enabled server.
type catalogInput struct {
	cfg    ServerConfig
	tools  []*mcp.Tool
	listed bool
}

// newCatalog is the catalog of the servers' tools: the routes apply, and so do the
// allow- and block-lists — each server's own, then the top-level ones, top — through
// catalog.Permit, on the canonical (server, tool) pair, whatever name a model spelled it
// with and whether or not the server has listed its tools yet; and every tool has a
// name of its own.
func newCatalog(in map[string]catalogInput, routes map[string]*string, top catalog.Lists) *catalog.Catalog {
	servers := make(map[string][]Tool, len(in))
	var unlisted []string
	for server, e := range in {
		if !e.listed {
			unlisted = append(unlisted, server)
		}
		tools := make([]Tool, 0, len(e.tools))
		for _, mt := range e.tools {
			if mt != nil {
				tools = append(tools, toolFromMCP(server, e.cfg.Prefix, mt))
			}
		}
		servers[server] = tools
	}
	routed := make(map[string]string, len(routes))
	for name, server := range routes {
		routed[name] = ""
		if server != nil {
			routed[name] = *server
		}
	}
	return catalog.New(servers, &catalog.Options{Unlisted: unlisted, Routes: routed, Distinct: true,
		Permitted: func(server, tool string) error {
			return catalog.Permit(catalog.Ref{Server: server, Tool: tool}, in[server].cfg.Lists(server), top)
		}})
}
