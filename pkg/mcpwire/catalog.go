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

// Permitted reports whether the configuration allows the tool called tool on server: the
// server's allowedTools (when set) and the top-level allowed list (when set) match it, and
// its blockedTools do not. It decides from the configuration alone, on the canonical
// (server, tool) pair, whatever name a model spelled it with and whether or not the
// server has listed its tools yet; every path to a server's tool asks it.
func Permitted(cfg ServerConfig, allowed []string, server, tool string) bool {
	return (len(cfg.AllowedTools) == 0 || catalog.MatchTool(cfg.AllowedTools, server, tool)) &&
		!catalog.MatchTool(cfg.BlockedTools, server, tool) &&
		(len(allowed) == 0 || catalog.MatchTool(allowed, server, tool))
}

// catalogInput is what the catalog is built from: one entry per enabled server.
type catalogInput struct {
	cfg    ServerConfig
	tools  []*mcp.Tool
	listed bool
}

// newCatalog is the catalog of the servers' tools: the routes and allow-lists of the
// configuration apply, and every tool has a name of its own.
func newCatalog(in map[string]catalogInput, routes map[string]*string, allowed []string) *catalog.Catalog {
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
		Permitted: func(server, tool string) bool { return Permitted(in[server].cfg, allowed, server, tool) }})
}
