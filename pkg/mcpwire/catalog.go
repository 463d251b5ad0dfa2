package mcpwire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/toolbus/toolbus/pkg/messages"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is one tool of one server, as the catalog keeps it.
type Tool struct {
	// Name is what a model calls it: see [ExposedName], or the route's name.
	Name string `json:"name"`
	// Server is the configured name of its server; Remote is its name there.
	Server string `json:"server"`
	Remote string `json:"remote"`

	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`

	// From the tool's annotations. They are hints of the server, and decide only
	// whether a call whose outcome is unknown may be repeated.
	ReadOnly    bool `json:"readOnly,omitempty"`
	Idempotent  bool `json:"idempotent,omitempty"`
	Destructive bool `json:"destructive,omitempty"`
	// ReadOnlyWhen: see [messages.ToolInfo]; set by in-process backends only.
	ReadOnlyWhen *messages.ArgIn `json:"readOnlyWhen,omitempty"`
}

// Retryable reports whether running the tool twice does no harm.
func (t Tool) Retryable() bool { return t.ReadOnly || t.Idempotent }

// toolFromMCP converts a listed tool; the exposed name is set by the catalog.
func toolFromMCP(server string, t *mcp.Tool) Tool {
	out := Tool{Server: server, Remote: t.Name, Name: t.Name, Title: t.Title, Description: t.Description}
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

// Catalog is every server's tools under the names a model uses. It is immutable: the
// pool swaps in a new one when a server's tools change.
type Catalog struct {
	tools   []Tool                     // visible, sorted by Name
	byName  map[string]int             // Name → index in tools
	remote  map[string]map[string]int  // server → Remote → index in tools
	hidden  map[string]map[string]bool // server → Remote of tools configuration forbids
	listed  map[string]bool            // servers whose tools/list answered
	servers []string                   // enabled servers, sorted
	routes  map[string]*string
	cfgs    map[string]ServerConfig // enabled servers' configurations
	allowed []string                // the top-level allow-list
}

// Permitted reports whether the configuration allows the tool called tool on server: the
// server's allowedTools (when set) and the top-level allowed list (when set) match it, and
// its blockedTools do not. It decides from the configuration alone, on the canonical
// (server, tool) pair, whatever name a model spelled it with and whether or not the
// server has listed its tools yet; every path to a server's tool asks it.
func Permitted(cfg ServerConfig, allowed []string, server, tool string) bool {
	return (len(cfg.AllowedTools) == 0 || MatchTool(cfg.AllowedTools, server, tool)) &&
		!MatchTool(cfg.BlockedTools, server, tool) &&
		(len(allowed) == 0 || MatchTool(allowed, server, tool))
}

// catalogInput is what the catalog is built from: one entry per enabled server.
type catalogInput struct {
	cfg    ServerConfig
	tools  []*mcp.Tool
	listed bool
}

func newCatalog(in map[string]catalogInput, routes map[string]*string, allowed []string) *Catalog {
	c := &Catalog{
		byName: map[string]int{},
		remote: map[string]map[string]int{},
		hidden: map[string]map[string]bool{},
		listed: map[string]bool{},
		routes: routes,
		cfgs:   map[string]ServerConfig{}, allowed: allowed,
	}
	routedName := map[[2]string]string{} // {server, tool} → route name
	for name, server := range routes {
		if server != nil {
			routedName[[2]string{*server, name}] = name
		}
	}
	for server := range in {
		c.servers = append(c.servers, server)
	}
	sort.Strings(c.servers)
	for _, server := range c.servers {
		e := in[server]
		c.listed[server] = e.listed
		c.cfgs[server] = e.cfg
		c.hidden[server] = map[string]bool{}
		for _, mt := range e.tools {
			if mt == nil {
				continue
			}
			if !Permitted(e.cfg, allowed, server, mt.Name) {
				c.hidden[server][mt.Name] = true
				continue
			}
			t := toolFromMCP(server, mt)
			t.Name = ExposedName(server, e.cfg.Prefix, mt.Name)
			if r, ok := routedName[[2]string{server, mt.Name}]; ok {
				t.Name = r
			}
			c.tools = append(c.tools, t)
		}
	}
	// Two tools whose names sanitize alike keep apart by a hash of server and tool.
	sort.SliceStable(c.tools, func(i, j int) bool { return c.tools[i].Name < c.tools[j].Name })
	for i := range c.tools {
		t := &c.tools[i]
		if _, taken := c.byName[t.Name]; taken {
			sum := sha256.Sum256([]byte(t.Server + "\x00" + t.Remote))
			suffix := "_" + hex.EncodeToString(sum[:])[:8]
			t.Name = t.Name[:min(len(t.Name), MaxNameLen-len(suffix))] + suffix
		}
		c.byName[t.Name] = i
	}
	sort.SliceStable(c.tools, func(i, j int) bool { return c.tools[i].Name < c.tools[j].Name })
	clear(c.byName)
	for i, t := range c.tools {
		c.byName[t.Name] = i
		if c.remote[t.Server] == nil {
			c.remote[t.Server] = map[string]int{}
		}
		c.remote[t.Server][t.Remote] = i
	}
	return c
}

// Tools returns the tools a model may call, sorted by name.
func (c *Catalog) Tools() []Tool { return slices.Clone(c.tools) }

// Servers returns the enabled servers, sorted.
func (c *Catalog) Servers() []string { return slices.Clone(c.servers) }

// Resolve finds the tool a model means by name. In order: an explicit route; the exposed
// name; "<server>__<tool>" and its aliases "mcp__<server>__<tool>" and "<server>::<tool>";
// a bare tool name that exactly one server has. A qualified name of a server whose tools
// are not known yet (it never answered) resolves, so that calling it reports the server
// as unavailable rather than the tool as unknown. With [ErrNotAllowed] and [ErrAmbiguous]
// the tool returned names the server that refuses the call (the first, when ambiguous).
func (c *Catalog) Resolve(name string) (Tool, error) {
	if server, ok := c.routes[name]; ok {
		if server == nil {
			return Tool{}, fmt.Errorf("%w: %q is routed to the local tools", ErrUnknownTool, name)
		}
		if !slices.Contains(c.servers, *server) {
			return Tool{}, fmt.Errorf("%w: %q is routed to %q, which is disabled", ErrUnknownTool, name, *server)
		}
		remote := name
		if s, t, ok := SplitAlias(name, c.servers); ok && s == *server {
			remote = t
		}
		return c.onServer(name, *server, remote, true)
	}
	if i, ok := c.byName[name]; ok {
		return c.tools[i], nil
	}
	if server, remote, ok := SplitAlias(name, c.servers); ok {
		return c.onServer(name, server, remote, !c.listed[server])
	}
	var found []Tool
	for _, t := range c.tools {
		if t.Remote == name {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		for _, server := range c.servers {
			if c.hidden[server][name] {
				return Tool{Name: name, Server: server, Remote: name},
					fmt.Errorf("%w: %q of server %q is not allowed by the configuration", ErrNotAllowed, name, server)
			}
		}
		return Tool{}, fmt.Errorf("%w: no server has a tool called %q", ErrUnknownTool, name)
	default:
		var names []string
		for _, t := range found {
			names = append(names, t.Name)
		}
		return found[0], fmt.Errorf("%w: %d servers have a tool called %q; call one of %s", ErrAmbiguous, len(found), name, strings.Join(names, ", "))
	}
}

// onServer finds remote on server; unlisted accepts a tool the catalog does not know.
func (c *Catalog) onServer(name, server, remote string, unlisted bool) (Tool, error) {
	if !Permitted(c.cfgs[server], c.allowed, server, remote) {
		return Tool{Name: name, Server: server, Remote: remote}, fmt.Errorf("%w: %q of server %q is not allowed by the configuration", ErrNotAllowed, remote, server)
	}
	if i, ok := c.remote[server][remote]; ok {
		return c.tools[i], nil
	}
	if unlisted {
		return Tool{Name: name, Server: server, Remote: remote, Destructive: true}, nil
	}
	return Tool{}, fmt.Errorf("%w: server %q has no tool called %q", ErrUnknownTool, server, remote)
}
