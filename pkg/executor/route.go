package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/messages"
	"github.com/toolbus/toolbus/pkg/telemetry"
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
	// Ref is the tool as the configuration's allow- and block-lists name it
	// ([catalog.Permit]): an MCP server's and its name there, the server a Go tool was
	// added under ([localtools.Tool.Server]) and its name, or no server and the name.
	// Empty: no server, and Info.Name.
	Ref catalog.Ref
	// Timeout, when set, is the time budget of calls on this route, and the limit a
	// timeout names (an MCP server's configured timeout, a tools-folder tool's own, at
	// which it is stopped); see [Executor.Budget].
	Timeout time.Duration
	// MaxAttempts, when set, is how many attempts of a call on this route may reach its
	// tool, in all across deliveries (an MCP server's "retry.maxAttempts"); see
	// [Executor.MaxAttempts].
	MaxAttempts int
	// Session, when set, names the server in whose conversation's own session the call
	// runs (a conversation-scoped MCP server): every call of the conversation must reach
	// the replica holding that session ([Stage.Owners]).
	Session string

	// toolLabel is canonicalLabel's answer for the route, found once by Router.Resolve.
	toolLabel string

	// Run runs the call for a conversation: the backend's work. A failure is a
	// *messages.ToolError, or an error [Classify] tells (an MCP pool's errors, a
	// deadline; anything else is a tool_error).
	Run func(ctx context.Context, conversation string, args json.RawMessage) (json.RawMessage, error)
}

// Canonical is the tool's one name in metrics, span names and logs, however the model
// spelled it ([catalog.Ref.Name]; a route without a Ref: its shown name).
func (r Route) Canonical() string {
	if r.Ref.Tool != "" {
		return r.Ref.Name()
	}
	return r.Info.Name
}

// canonicalLabel is the label of the tool a call names: its route's canonical name, or
// telemetry.UnknownTool when no route was found.
func canonicalLabel(r *Route, routeErr error) string {
	if routeErr != nil {
		return telemetry.UnknownTool
	}
	if r.toolLabel != "" {
		return r.toolLabel
	}
	return telemetry.ToolLabel(cmp.Or(r.Canonical(), telemetry.UnknownTool), true)
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

// Router picks the backend of a tool: the first backend that has it, in the order given,
// and refuses what the configuration's top-level allow- and block-lists do not permit
// ([Router.SetLists]), whichever backend offers it.
type Router struct {
	backends []Backend
	lists    atomic.Pointer[catalog.Lists]
}

// NewRouter returns a router over backends, in priority order.
func NewRouter(backends ...Backend) *Router { return &Router{backends: backends} }

// SetLists sets the top-level allow- and block-lists ("allowedTools", "blockedTools")
// that every call's route must pass ([catalog.Permit] on [Route.Ref]), whatever its
// backend: a refused call is answered not_allowed, naming the list, and the tools they
// refuse are not listed. An MCP pool applies the same lists to its servers' tools
// itself (with each server's own). Safe to call while calls are routed (a reload).
func (r *Router) SetLists(l catalog.Lists) {
	if l.Empty() {
		r.lists.Store(nil)
		return
	}
	r.lists.Store(&l)
}

// permit is nil when the top-level lists let route's tool through, else the not_allowed
// error a model reads for calling it name.
func (r *Router) permit(route Route, name string) error {
	l := r.lists.Load()
	if l == nil {
		return nil
	}
	if err := catalog.Permit(route.ref(), *l); err != nil {
		return NotAllowed(name, err)
	}
	return nil
}

// ref is [Route.Ref], or its default.
func (r Route) ref() catalog.Ref {
	if r.Ref.Tool == "" {
		return catalog.Ref{Tool: r.Info.Name}
	}
	return r.Ref
}

// NotAllowed is the error a model reads for calling name, which err (from
// [catalog.Permit], through a catalog or not) refuses: not_allowed, saying which list
// refused it.
func NotAllowed(name string, err error) *messages.ToolError {
	msg := fmt.Sprintf("the tool %q is not allowed by the configuration", messages.EchoName(name))
	var na *catalog.NotAllowedError
	if errors.As(err, &na) {
		msg += ": " + na.Reason()
	}
	return &messages.ToolError{Code: messages.CodeNotAllowed, Message: msg, Err: err}
}

// Backends returns the router's backends in priority order.
func (r *Router) Backends() []Backend { return r.backends }

// Resolve routes the tool called name, once. Waiting for a backend that does not know
// its tools yet (an MCP server that has not listed them) ends with ctx. A name no
// backend has is an unknown_tool error; a refused one carries its backend's error.
func (r *Router) Resolve(ctx context.Context, name string) (Route, error) {
	for _, b := range r.backends {
		if route, ok, err := b.Resolve(ctx, name); ok {
			if err == nil {
				err = r.permit(route, name)
			}
			if err == nil {
				route.toolLabel = canonicalLabel(&route, nil) // resolved once, read on every hop of the call
			}
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

// Tools lists every tool of every backend that the top-level lists permit.
func (r *Router) Tools(ctx context.Context) []messages.ToolInfo {
	var out []messages.ToolInfo
	seen := map[string]bool{}
	lists := r.lists.Load() != nil
	for _, b := range r.backends {
		for _, t := range b.Tools(ctx) {
			if seen[t.Name] {
				continue
			}
			if lists {
				if _, ok := r.listed(ctx, b, t); !ok {
					continue
				}
			}
			seen[t.Name] = true
			out = append(out, t)
		}
	}
	return out
}

// Offered returns the tools backend b lists that the top-level lists permit, as the
// catalog keeps them: under the names b lists them by, each with the server and name
// the lists see ([Route.Ref]; a tool of no server is b's, under its own name).
func (r *Router) Offered(ctx context.Context, b Backend) []catalog.Tool {
	tools := []catalog.Tool{}
	for _, t := range b.Tools(ctx) {
		ref, ok := r.listed(ctx, b, t)
		if !ok {
			continue
		}
		if ref.Server == "" {
			ref = catalog.Ref{Server: b.Name(), Tool: t.Name}
		}
		tools = append(tools, catalog.Tool{Name: t.Name, Server: ref.Server, Remote: ref.Tool, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, ReadOnly: t.ReadOnly, Idempotent: t.Idempotent, ReadOnlyWhen: t.ReadOnlyWhen})
	}
	return tools
}

// listed reports whether the top-level lists permit t, which b lists, and what they
// see of it: the route its name resolves to on b. An MCP pool applied the lists to its
// servers' tools already.
func (r *Router) listed(ctx context.Context, b Backend, t messages.ToolInfo) (catalog.Ref, bool) {
	if _, remote := b.(MCPBackend); remote {
		return catalog.Ref{Tool: t.Name}, true
	}
	ref := catalog.Ref{Tool: t.Name}
	if route, ok, err := b.Resolve(ctx, t.Name); ok && err == nil {
		ref = route.ref()
	}
	l := r.lists.Load()
	return ref, l == nil || catalog.Permit(ref, *l) == nil
}

func (r *Router) names(ctx context.Context) []string {
	var names []string
	for _, t := range r.Tools(ctx) {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names
}
