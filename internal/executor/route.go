package executor

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Backend runs the tools of one kind.
type Backend interface {
	// Name is what results report as their backend: "local", "engineering", "mcp:<server>".
	Name() string
	// Tools lists the tools a model may call.
	Tools() []messages.ToolInfo
	// Has reports whether the backend runs the tool called name.
	Has(name string) bool
	// Call runs the tool. A failure is a *messages.ToolError.
	Call(ctx context.Context, conversation, name string, args json.RawMessage) (json.RawMessage, error)
}

// Router picks the backend of a tool: the first backend that has it, in the order given.
type Router struct{ backends []Backend }

// NewRouter returns a router over backends, in priority order.
func NewRouter(backends ...Backend) *Router { return &Router{backends: backends} }

// Dispatcher is a backend that stands for several whose set changes while toolbus runs,
// such as the servers of an MCP pool: the router hands a call to the backend Dispatch
// picks, so that results name it.
type Dispatcher interface {
	Backend
	Dispatch(name string) (Backend, bool)
}

// Route returns the backend of the tool called name.
func (r *Router) Route(name string) (Backend, error) {
	for _, b := range r.backends {
		if d, ok := b.(Dispatcher); ok {
			if picked, ok := d.Dispatch(name); ok {
				return picked, nil
			}
			continue
		}
		if b.Has(name) {
			return b, nil
		}
	}
	return nil, messages.Errorf(messages.CodeUnknownTool, "there is no tool called %q; available tools: %s", name, strings.Join(r.names(), ", "))
}

// Backends returns the router's backends in priority order.
func (r *Router) Backends() []Backend { return r.backends }

// Describer is implemented by backends that can describe one tool without listing all.
type Describer interface {
	Info(name string) (messages.ToolInfo, bool)
}

// Resolve routes the tool called name and describes it, routing once.
func (r *Router) Resolve(name string) (Backend, messages.ToolInfo, error) {
	b, err := r.Route(name)
	if err != nil {
		return nil, messages.ToolInfo{}, err
	}
	if d, ok := b.(Describer); ok {
		if info, ok := d.Info(name); ok {
			return b, info, nil
		}
		return b, messages.ToolInfo{Name: name}, nil
	}
	for _, t := range b.Tools() {
		if t.Name == name {
			return b, t, nil
		}
	}
	return b, messages.ToolInfo{Name: name}, nil
}

// Tools lists every tool of every backend.
func (r *Router) Tools() []messages.ToolInfo {
	var out []messages.ToolInfo
	seen := map[string]bool{}
	for _, b := range r.backends {
		for _, t := range b.Tools() {
			if !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
	}
	return out
}

func (r *Router) names() []string {
	var names []string
	for _, t := range r.Tools() {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names
}

// LocalBackend runs the tools of a [localtools.Registry].
type LocalBackend struct{ Registry *localtools.Registry }

func (LocalBackend) Name() string                 { return "local" }
func (b LocalBackend) Tools() []messages.ToolInfo { return b.Registry.Tools() }
func (b LocalBackend) Has(name string) bool       { _, ok := b.Registry.Lookup(name); return ok }
func (b LocalBackend) Info(name string) (messages.ToolInfo, bool) {
	t, ok := b.Registry.Lookup(name)
	return t.Info, ok
}
func (b LocalBackend) Call(ctx context.Context, _ string, name string, args json.RawMessage) (json.RawMessage, error) {
	t, ok := b.Registry.Lookup(name)
	if !ok {
		return nil, messages.Errorf(messages.CodeUnknownTool, "there is no local tool called %q", name)
	}
	return t.Run(ctx, args)
}

// EngineeringBackend runs the engineering suite's visible tools.
type EngineeringBackend struct{ Suite *engineering.Suite }

func (EngineeringBackend) Name() string                 { return "engineering" }
func (b EngineeringBackend) Tools() []messages.ToolInfo { return b.Suite.Tools() }
func (b EngineeringBackend) Has(name string) bool       { return b.Suite.Has(name) }
func (b EngineeringBackend) Call(ctx context.Context, conversation, name string, args json.RawMessage) (json.RawMessage, error) {
	return b.Suite.Call(ctx, conversation, name, args)
}
