package executor

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Backend runs the tools of one kind. Besides the backends of this package (local tools,
// MCP servers), a program adds its own through toolbus.Options.Backends; the engineering
// calculators are one (pkg/engineering/backend).
type Backend interface {
	// Name is the backend's name in the catalog ("local", "engineering", ...), where
	// the parser finds its tools; the MCP servers' backend is "mcp", whose servers keep
	// their tools under their own names.
	Name() string
	// Tools lists the tools a model may call.
	Tools(ctx context.Context) []messages.ToolInfo
	// Resolve finds the tool called name. ok is false when the tool is not this
	// backend's; ok with an error means the backend owns the name but refuses the call
	// (a tool the configuration forbids, a bare name several servers share).
	Resolve(ctx context.Context, name string) (r Route, ok bool, err error)
}

// Route is a call resolved: the backend that runs it and everything looked up on the
// way, carried with the call so that nothing is looked up twice.
type Route struct {
	// Server is what results, metrics and the breaker call the backend: "local",
	// "engineering" or "mcp:<server>".
	Server string
	// Info describes the tool; its annotations decide claims and retries.
	Info messages.ToolInfo
	// MCP is the server's tool, for a route to an MCP server.
	MCP catalog.Tool
	// Timeout, when set, is the time budget of calls on this route (an MCP server's
	// configured timeout); see [Executor.Budget].
	Timeout time.Duration
	// Session, when set, names the server in whose conversation's own session the call
	// runs (a conversation-scoped MCP server): every call of the conversation must reach
	// the replica holding that session ([Stage.Owners]).
	Session string

	// Run runs the call for a conversation: the backend's work. A failure is a
	// *messages.ToolError (or an error the executor reports as tool_error).
	Run func(ctx context.Context, conversation string, args json.RawMessage) (json.RawMessage, error)
}

// Label is the backend's name in metrics, spans and logs, spelled as the health bucket
// and `toolbus health` spell it: an MCP server's own name, "local" or "engineering".
func (r Route) Label() string { return label(r.Server) }

// label is [Route.Label] of a backend's name as results carry it.
func label(backend string) string {
	name, _ := strings.CutPrefix(backend, "mcp:")
	return name
}

// Call runs the tool. A failure is a *messages.ToolError (or an error the executor
// reports as tool_error).
func (r Route) Call(ctx context.Context, conversation string, args json.RawMessage) (json.RawMessage, error) {
	if r.Run == nil {
		return nil, messages.Errorf(messages.CodeUnknownTool, "there is no tool called %q", messages.EchoName(r.Info.Name))
	}
	return r.Run(ctx, conversation, args)
}

// Router picks the backend of a tool: the first backend that has it, in the order given.
type Router struct{ backends []Backend }

// NewRouter returns a router over backends, in priority order.
func NewRouter(backends ...Backend) *Router { return &Router{backends: backends} }

// Backends returns the router's backends in priority order.
func (r *Router) Backends() []Backend { return r.backends }

// Resolve routes the tool called name, once. Waiting for a backend that does not know
// its tools yet (an MCP server that has not listed them) ends with ctx. A name no
// backend has is an unknown_tool error; a refused one carries its backend's error.
func (r *Router) Resolve(ctx context.Context, name string) (Route, error) {
	for _, b := range r.backends {
		if route, ok, err := b.Resolve(ctx, name); ok {
			return route, err
		}
	}
	names := r.names(ctx)
	// The name a vendor's API was given for a tool whose own name it rejects
	// (catalog.VendorNames: "geometry_solve_circle_area" for "geometry.solve_circle_area").
	if original, ok := catalog.Unalias(name, names); ok {
		return r.Resolve(ctx, original)
	}
	closest := catalog.ClosestNames(name, names, maxSuggestions)
	if len(closest) == len(names) {
		return Route{Info: messages.ToolInfo{Name: name}}, messages.Errorf(messages.CodeUnknownTool,
			"there is no tool called %q; available tools: %s", messages.EchoName(name), strings.Join(closest, ", "))
	}
	return Route{Info: messages.ToolInfo{Name: name}}, messages.Errorf(messages.CodeUnknownTool,
		"there is no tool called %q; the closest of the %d tools: %s", messages.EchoName(name), len(names), strings.Join(closest, ", "))
}

// maxSuggestions bounds the tool names an unknown_tool error lists: a model's context is
// no place for a catalog of hundreds.
const maxSuggestions = 10

// Tools lists every tool of every backend.
func (r *Router) Tools(ctx context.Context) []messages.ToolInfo {
	var out []messages.ToolInfo
	seen := map[string]bool{}
	for _, b := range r.backends {
		for _, t := range b.Tools(ctx) {
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
	}
	return out
}

func (r *Router) names(ctx context.Context) []string {
	var names []string
	for _, t := range r.Tools(ctx) {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names
}
