package executor

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/toolbus/toolbus/pkg/catalog"
	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

// LocalBackend runs the tools of a [localtools.Registry].
type LocalBackend struct{ Registry *localtools.Registry }

// Name is "local".
func (LocalBackend) Name() string { return "local" }

func (b LocalBackend) Tools(context.Context) []messages.ToolInfo { return b.Registry.Tools() }

// Resolve finds the tool a model means by name ([localtools.Registry.Resolve]): a tool
// of no server by its name, a tool of a server also by a qualified spelling
// ("mcp__calc__add", "calc::add") or its bare name. A bare name several servers' tools
// share is refused here, as an MCP pool refuses one.
func (b LocalBackend) Resolve(_ context.Context, name string) (Route, bool, error) {
	t, err := b.Registry.Resolve(name)
	switch {
	case errors.Is(err, catalog.ErrAmbiguous):
		return Route{Server: "local", Info: messages.ToolInfo{Name: name}}, true, messages.Errorf(messages.CodeUnknownTool, "%s", err)
	case err != nil:
		return Route{}, false, nil
	}
	info := t.Info
	info.Name = t.Name()
	// A tool with a time limit of its own (a tools-folder tool's) has that as its
	// call's budget: it is stopped there, so no budget beyond it can be used.
	return Route{Server: "local", Info: info, Ref: catalog.Ref{Server: t.Server, Tool: t.Info.Name}, Timeout: t.Timeout,
		Run: func(ctx context.Context, _ string, args json.RawMessage) (json.RawMessage, error) {
			return t.Run(ctx, args)
		}}, true, nil
}
