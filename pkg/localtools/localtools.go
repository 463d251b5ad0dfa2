// Package localtools is the registry of tools that run inside the executor process: Go
// functions added by the program that embeds toolbus, and the built-in tools. A
// [Registry] is a value; build one, add tools, and hand it to the executor.
//
//	reg := localtools.New()
//	reg.Add(localtools.Tool{
//		Info: messages.ToolInfo{Name: "echo", Description: "Returns its arguments."},
//		Run: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
//			return args, nil
//		},
//	})
package localtools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/toolbus/toolbus/pkg/engineering"
	"github.com/toolbus/toolbus/pkg/messages"
)

// Func runs a tool. Its error should be a *messages.ToolError; any other error is
// reported as a tool_error.
type Func func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)

// Tool is one local tool.
type Tool struct {
	Info messages.ToolInfo
	Run  Func
}

// Registry holds local tools by name. It is safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	tools map[string]Tool
}

// New returns an empty registry.
func New() *Registry { return &Registry{tools: map[string]Tool{}} }

// Add registers t, replacing a tool of the same name.
func (r *Registry) Add(t Tool) error {
	if t.Info.Name == "" || t.Run == nil {
		return fmt.Errorf("localtools: a tool needs a name and a function")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tools[t.Info.Name] = t
	return nil
}

// Lookup returns the tool called name.
func (r *Registry) Lookup(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tools[name]
	return t, ok
}

// Tools lists the registered tools by name.
func (r *Registry) Tools() []messages.ToolInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]messages.ToolInfo, 0, len(r.tools))
	for _, t := range r.tools {
		out = append(out, t.Info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Clock is the built-in clock tool: the current UTC time. now nil means time.Now.
func Clock(now func() time.Time) Tool {
	if now == nil {
		now = time.Now
	}
	return Tool{
		Info: messages.ToolInfo{
			Name:        "clock",
			Description: "Returns the current time in UTC (RFC 3339).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{}}`),
			ReadOnly:    true, Idempotent: true,
		},
		Run: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			return engineering.Clock(now()), nil
		},
	}
}
