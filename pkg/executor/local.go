package executor

import (
	"context"
	"encoding/json"

	"github.com/toolbus/toolbus/pkg/localtools"
	"github.com/toolbus/toolbus/pkg/messages"
)

// LocalBackend runs the tools of a [localtools.Registry].
type LocalBackend struct{ Registry *localtools.Registry }

// Name is "local".
func (LocalBackend) Name() string { return "local" }

func (b LocalBackend) Tools(context.Context) []messages.ToolInfo { return b.Registry.Tools() }

func (b LocalBackend) Resolve(_ context.Context, name string) (Route, bool, error) {
	t, ok := b.Registry.Lookup(name)
	if !ok {
		return Route{}, false, nil
	}
	return Route{Server: "local", Info: t.Info, Run: func(ctx context.Context, _ string, args json.RawMessage) (json.RawMessage, error) {
		return t.Run(ctx, args)
	}}, true, nil
}
